import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in time as whole milliseconds since the Unix epoch, UTC.
///
/// Why not `Date`: the detection logic runs one million samples a second in the benchmark and days of
/// virtual time in tests, so time is a plain integer — exact, cheap to compare, no floating-point drift,
/// and identical on every platform. Durations are plain `Int64` milliseconds (fields end in `Ms`).
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// Whole seconds since the epoch.
    public static func seconds(_ seconds: Int64) -> Timestamp {
        Timestamp(millisecondsSinceEpoch: seconds &* 1000)
    }

    public static let zero = Timestamp(millisecondsSinceEpoch: 0)
    /// A sentinel earlier than any real event; used for "never".
    public static let distantPast = Timestamp(millisecondsSinceEpoch: Int64.min / 4)

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch
    }

    /// `self` moved forward by `milliseconds` (saturating, so "never" + anything stays far in the past).
    public static func + (lhs: Timestamp, milliseconds: Int64) -> Timestamp {
        let (sum, overflow) = lhs.millisecondsSinceEpoch.addingReportingOverflow(milliseconds)
        return Timestamp(millisecondsSinceEpoch: overflow ? (milliseconds > 0 ? Int64.max : Int64.min) : sum)
    }

    public static func - (lhs: Timestamp, milliseconds: Int64) -> Timestamp {
        lhs + (0 &- milliseconds)
    }

    /// Milliseconds from `rhs` to `lhs`.
    public static func - (lhs: Timestamp, rhs: Timestamp) -> Int64 {
        lhs.millisecondsSinceEpoch &- rhs.millisecondsSinceEpoch
    }

    public init(from decoder: any Decoder) throws {
        millisecondsSinceEpoch = try decoder.singleValueContainer().decode(Int64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(millisecondsSinceEpoch)
    }

    /// ISO-8601 UTC with whole seconds, e.g. `2025-09-18T06:35:12Z`: for display. Milliseconds are
    /// truncated toward the past; the REST payload keeps them (`iso8601Milliseconds`). Computed without Foundation so it is
    /// deterministic and allocation-light.
    public var iso8601: String { iso8601(withMilliseconds: false) }

    /// ISO-8601 UTC with milliseconds, e.g. `2025-09-18T06:35:12.345Z`.
    public var iso8601Milliseconds: String { iso8601(withMilliseconds: true) }

    func iso8601(withMilliseconds: Bool) -> String {
        let c = civil
        let pad = Timestamp.pad
        return "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))T\(pad(c.secondOfDay / 3600, 2)):"
            + "\(pad(c.secondOfDay / 60 % 60, 2)):\(pad(c.secondOfDay % 60, 2))"
            + (withMilliseconds ? ".\(pad(c.milliseconds, 3))Z" : "Z")
    }

    /// This time's UTC calendar parts (days since the epoch, date, second of the day, milliseconds),
    /// rounded toward the past.
    var civil: (days: Int64, year: Int64, month: Int64, day: Int64, secondOfDay: Int64, milliseconds: Int64) {
        var seconds = millisecondsSinceEpoch / 1000
        var milliseconds = millisecondsSinceEpoch % 1000
        if milliseconds < 0 {
            seconds -= 1
            milliseconds += 1000
        }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        let (y, m, d) = Timestamp.civilFromDays(days)
        return (days, y, m, d, secondOfDay, milliseconds)
    }

    /// `v` in decimal, zero-padded to `width` digits.
    static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    public var description: String { "\(iso8601)(\(millisecondsSinceEpoch)ms)" }

    /// Howard Hinnant's days-from-civil inverse: days since 1970-01-01 → (year, month, day).
    static func civilFromDays(_ z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}

/// Every time read in PresenceKit goes through a clock, so tests and the fleet simulator can run days of
/// virtual time in microseconds. The state machine itself never reads a clock: the caller passes `now`
/// with each event, which keeps it a pure function of its inputs.
public protocol PresenceClock: Sendable {
    func now() -> Timestamp
}

/// The wall clock (`CLOCK_REALTIME`): what the device's user and the network set. Good for stamps and
/// files; the state machine's `at:` wants `SteadyClock`.
public struct SystemClock: PresenceClock {
    public init() {}

    public func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(millisecondsSinceEpoch: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}

/// The clock a phone host feeds the state machine with: it never jumps when the wall clock is set.
/// It starts at the wall clock's reading when it is made (once per process) and counts on with a clock
/// that keeps running while the device sleeps (`CLOCK_BOOTTIME` on Linux, `CLOCK_MONOTONIC` on Darwin).
/// Timers scheduled on it fire after the time they say, whatever the user or the network does to the
/// wall clock; what the device sends is stamped with the wall clock through
/// `PresenceEvent.clockOffsetChanged(offsetMs: wallClockOffsetMs())`, or with the server's clock (`ServerClock`).
public struct SteadyClock: PresenceClock {
    /// Wall clock minus the running clock, when this clock was made.
    let originMs: Int64

    public init() {
        originMs = SystemClock().now().millisecondsSinceEpoch &- Self.runningMs()
    }

    public func now() -> Timestamp { Timestamp(millisecondsSinceEpoch: originMs &+ Self.runningMs()) }

    /// How far the wall clock reads ahead of this clock now (behind, when negative): 0 until the wall
    /// clock is set, then the size of every setting so far (plus any slew, a few ms a day).
    public func wallClockOffsetMs() -> Int64 { SystemClock().now() - now() }

    static func runningMs() -> Int64 {
        var ts = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_BOOTTIME, &ts)
        #else
        clock_gettime(CLOCK_MONOTONIC, &ts)
        #endif
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// A clock that only moves when told to. Shared between tasks safely (guarded by a `Mutex`).
public final class ManualClock: PresenceClock {
    private let current: Mutex<Timestamp>

    public init(_ start: Timestamp = Timestamp.seconds(1_758_177_312)) {
        current = Mutex(start)
    }

    public func now() -> Timestamp { current.withLock { $0 } }

    /// Moves the clock forward by `milliseconds` (never backward) and returns the new time.
    @discardableResult
    public func advance(by milliseconds: Int64) -> Timestamp {
        precondition(milliseconds >= 0, "ManualClock never goes backward")
        return current.withLock { value in
            value = value + milliseconds
            return value
        }
    }

    /// Sets the clock to `time` if it is later than now.
    public func advance(to time: Timestamp) {
        current.withLock { value in
            if time > value { value = time }
        }
    }
}
