/// What the device knows of the server's clock, learnt from the `Date` header of its answers, so that
/// what it sends is stamped with the time the server will judge it by (an event more than 5 minutes
/// ahead of the server, or a week behind, is refused) whatever the phone's own clock says.
///
/// Each answer bounds the offset, server time minus the host's steady time: the header was written
/// between the request's send and its answer, holds whole seconds, and may come from a cache a second
/// old (servers refresh it once a second). The bounds of successive answers are intersected, so the
/// estimate tightens to about a second within a few answers. Two answers in a row outside them that
/// agree with each other (the server's clock was stepped, or the steady clock drifted out of them over
/// days) start over from those two; a single one is taken for a stray. Record only the gateway's own
/// answers (JSON or problem+json), never a captive portal's or a cache's. A host delivers `offsetMs`
/// (with `phoneAheadMs(wallClockOffsetMs:)`) as `PresenceEvent.serverClockKnown` when it becomes known
/// and whenever it moves, and the phone's wall clock as `PresenceEvent.clockOffsetChanged` until then.
public struct ServerClock: Sendable, Hashable, Codable {
    /// The offset's bounds, milliseconds; nil before the first usable answer.
    public private(set) var bounds: ClosedRange<Int64>?
    /// The last answer outside `bounds`, waiting for a second one that agrees with it.
    public private(set) var outlier: ClosedRange<Int64>?

    /// An answer slower than this says too little to be worth recording.
    public static let maxRoundTripMs: Int64 = 30_000

    public init() {}

    /// Server time minus steady time (the middle of the bounds); nil before the first usable answer.
    public var offsetMs: Int64? { bounds.map { $0.lowerBound + ($0.upperBound - $0.lowerBound) / 2 } }

    /// How far the phone's wall clock (`wallClockOffsetMs` ahead of the steady time) reads ahead of the
    /// server's; nil before the first usable answer.
    public func phoneAheadMs(wallClockOffsetMs: Int64) -> Int64? { offsetMs.map { wallClockOffsetMs - $0 } }

    /// Records one answer: its `Date` header and the steady times of the request's send and of its
    /// answer. Returns false (and records nothing) for an answer slower than `maxRoundTripMs` or
    /// answered before it was sent.
    @discardableResult
    public mutating func record(serverDate: Timestamp, sentAt: Timestamp, answeredAt: Timestamp) -> Bool {
        guard answeredAt >= sentAt, answeredAt - sentAt <= Self.maxRoundTripMs else { return false }
        let lower = serverDate - answeredAt, upper = serverDate + 1_999 - sentAt
        guard lower <= upper else { return false } // only for times near the ends of Int64
        let answer = lower...upper
        if let known = bounds, !known.overlaps(answer) {
            if let stray = outlier, stray.overlaps(answer) {
                bounds = Self.intersection(stray, answer)
                outlier = nil
            } else {
                outlier = answer
            }
        } else {
            bounds = bounds.map { Self.intersection($0, answer) } ?? answer
            outlier = nil
        }
        return true
    }

    static func intersection(_ a: ClosedRange<Int64>, _ b: ClosedRange<Int64>) -> ClosedRange<Int64> {
        max(a.lowerBound, b.lowerBound)...min(a.upperBound, b.upperBound)
    }
}

extension Timestamp {
    /// Parses an HTTP `Date` header in the form servers must send (RFC 9110 IMF-fixdate,
    /// `Sun, 06 Nov 1994 08:49:37 GMT`); nil for anything else.
    public init?(httpDate: String) {
        let parts = httpDate.split(separator: " ", omittingEmptySubsequences: false)
        func number(_ text: Substring, digits: Int) -> Int64? {
            guard text.count == digits, text.allSatisfy({ $0.isASCII && $0.isWholeNumber }) else { return nil }
            return Int64(text)
        }
        guard parts.count == 6, parts[0].hasSuffix(","), Self.weekdays.contains(String(parts[0].dropLast())), parts[5] == "GMT",
            let day = number(parts[1], digits: 2), let month = Self.months.firstIndex(of: String(parts[2])),
            let year = number(parts[3], digits: 4), year >= 1970
        else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, let hour = number(clock[0], digits: 2), let minute = number(clock[1], digits: 2),
            let second = number(clock[2], digits: 2), hour < 24, minute < 60, second < 61
        else { return nil }
        let days = Self.daysFromCivil(year, Int64(month) + 1, day)
        // A day the month does not have (31 Feb) comes back as another date.
        guard day >= 1, Self.civilFromDays(days) == (year, Int64(month) + 1, day) else { return nil }
        self.init(millisecondsSinceEpoch: ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000)
    }

    /// The same date as an HTTP `Date` header (IMF-fixdate; milliseconds dropped).
    public var httpDate: String {
        let c = civil
        // 1970-01-01 was a Thursday.
        let weekday = Self.weekdays[Int(((c.days % 7) + 7 + 4) % 7)]
        return "\(weekday), \(Self.pad(c.day, 2)) \(Self.months[Int(c.month) - 1]) \(c.year) "
            + "\(Self.pad(c.secondOfDay / 3600, 2)):\(Self.pad(c.secondOfDay / 60 % 60, 2)):\(Self.pad(c.secondOfDay % 60, 2)) GMT"
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// Howard Hinnant's days-from-civil: (year, month, day) → days since 1970-01-01.
    static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
