import Foundation

/// One failing field: its dotted path (`beacon.minor`, `rssiSeries[3]`) and why, in words.
/// The `errors` member of a 400 problem+json body.
public struct FieldError: Codable, Hashable, Sendable, CustomStringConvertible {
    public var field: String
    public var reason: String

    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(field.isEmpty ? "(body)" : field): \(reason)" }
}

/// The bounds the gateway enforces on device input. Every limit is inclusive: the boundary value
/// itself is accepted.
public struct ValidationLimits: Hashable, Sendable {
    /// How old an event time may be. Devices hold events offline for up to 72 h; a week leaves room.
    public var maxEventAge: Duration = .seconds(7 * 24 * 3600)
    /// How far ahead of the server clock an event time may be (device clock skew).
    public var maxClockSkewAhead: Duration = .seconds(5 * 60)
    /// An event whose times lie further ahead than the skew, but by no more than this, is answered 425
    /// with `Retry-After` instead of 400: it is taken once the server's clock catches up.
    public var maxEarlyWait: Duration = .seconds(24 * 3600)

    /// The event times accepted at server time `now`: `now - maxEventAge ... now + maxClockSkewAhead`.
    public func eventTimes(around now: Date) -> ClosedRange<Date> {
        now.addingTimeInterval(-maxEventAge.timeInterval)...now.addingTimeInterval(maxClockSkewAhead.timeInterval)
    }
    /// iOS reports RSSI in -127...0 dBm, 0 meaning "not heard this second".
    public var rssiRange: ClosedRange<Int> = -127...0
    /// At about 1 Hz, ten minutes of ranging.
    public var maxRSSISamples = 600
    /// Calibrated power at 1 m, or a transmit power setting.
    public var txPowerRange: ClosedRange<Int> = -127...20
    /// iBeacon major and minor are unsigned 16-bit.
    public var beaconFieldRange: ClosedRange<Int> = 0...65535
    /// Ids: user, device, site, event, session key.
    public var maxIdentifierLength = 128
    /// Versions, models, OS names, reasons.
    public var maxShortStringLength = 64
    /// Nonces and HMACs of the GATT proof.
    public var maxTokenLength = 256
    /// Steps in two minutes: running is about 360.
    public var maxStepsPerTwoMinutes = 1_000
    public var maxGeofenceRadiusMeters = 100_000.0
    public var maxBatchEvents = 100
    public var maxTelemetryEvents = 1_000
    public var maxTelemetryAttributes = 32
    /// A telemetry event's `value` lies within plus or minus this (a backlog size, milliseconds, a battery
    /// level): the aggregator's sums stay exact and cannot overflow.
    public var maxTelemetryValueMagnitude = 1e9
    /// Request bodies above this are 413 (the gateway checks before decoding).
    public var maxBodyBytes = 64 * 1024

    public init() {}

    public static let `default` = ValidationLimits()
}

/// A payload the gateway validates after decoding: all problems at once, each naming its field.
public protocol Validatable {
    /// Every field that breaks `limits`, judged against the server clock `now`; empty when valid.
    func validate(now: Date, limits: ValidationLimits) -> [FieldError]
}

extension Validatable {
    public func validate(now: Date = Date()) -> [FieldError] {
        validate(now: now, limits: .default)
    }

    /// When this payload is refused at `now` only because its times lie ahead of the server's clock by
    /// more than `limits.maxClockSkewAhead`, and is taken at some time no later than `now + within`: the
    /// whole seconds until then (at least 1). `nil` when it is valid now, or has another problem, or
    /// would still be refused then. Each time is accepted over one interval of server time, so the
    /// payload is over their intersection, and the first accepted second is found by bisection.
    public func secondsUntilAcceptable(now: Date, limits: ValidationLimits, within: TimeInterval) -> Int? {
        let horizon = Int(within)
        guard horizon >= 1, !validate(now: now, limits: limits).isEmpty,
            validate(now: now.addingTimeInterval(TimeInterval(horizon)), limits: limits).isEmpty
        else { return nil }
        var low = 1, high = horizon
        while low < high {
            let mid = low + (high - low) / 2
            if validate(now: now.addingTimeInterval(TimeInterval(mid)), limits: limits).isEmpty { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

/// Collects field errors under a path prefix.
struct FieldValidator {
    let now: Date
    let limits: ValidationLimits
    private(set) var errors: [FieldError] = []

    mutating func fail(_ field: String, _ reason: String) {
        errors.append(FieldError(field: field, reason: reason))
    }

    mutating func merge(_ nested: [FieldError], under prefix: String) {
        for error in nested {
            let field = error.field.isEmpty ? prefix : error.field.hasPrefix("[") ? prefix + error.field : "\(prefix).\(error.field)"
            errors.append(FieldError(field: field, reason: error.reason))
        }
    }

    /// Non-empty, at most `maxLength` UTF-8 bytes, no whitespace or control characters.
    mutating func identifier(_ value: String, _ field: String) {
        token(value, field, maxLength: limits.maxIdentifierLength)
    }

    mutating func token(_ value: String, _ field: String, maxLength: Int) {
        if value.isEmpty {
            fail(field, "must not be empty")
        } else if value.utf8.count > maxLength {
            fail(field, "must be at most \(maxLength) bytes, is \(value.utf8.count)")
        } else if Self.containsWhitespaceOrControl(value) {
            fail(field, "must not contain whitespace or control characters")
        }
    }

    /// Unicode whitespace or an ASCII control character anywhere in `value`. ASCII text (every id a
    /// device sends) is checked byte by byte; Unicode's property table is read only beyond it (it was
    /// 2 % of the gateway's CPU when read for every character).
    static func containsWhitespaceOrControl(_ value: String) -> Bool {
        for byte in value.utf8 {
            if byte >= 0x80 {
                return value.unicodeScalars.contains { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }
            }
            if byte <= 0x20 || byte == 0x7F { return true }
        }
        return false
    }

    /// Non-empty text of at most `maxShortStringLength` bytes without control characters.
    mutating func shortText(_ value: String, _ field: String) {
        if value.isEmpty {
            fail(field, "must not be empty")
        } else if value.utf8.count > limits.maxShortStringLength {
            fail(field, "must be at most \(limits.maxShortStringLength) bytes, is \(value.utf8.count)")
        } else if value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            fail(field, "must not contain control characters")
        }
    }

    /// Within `limits.eventTimes(around: now)`.
    mutating func eventTime(_ date: Date, _ field: String) {
        let window = limits.eventTimes(around: now)
        if date < window.lowerBound {
            fail(field, "is more than \(limits.maxEventAge.humanReadable) in the past")
        } else if date > window.upperBound {
            fail(field, "is more than \(limits.maxClockSkewAhead.humanReadable) in the future")
        }
    }

    mutating func range<T: Comparable>(_ value: T, _ range: ClosedRange<T>, _ field: String) {
        if !range.contains(value) { fail(field, "must be within \(range.lowerBound)...\(range.upperBound), is \(value)") }
    }

    mutating func nonNegative(_ value: Int, _ field: String) {
        if value < 0 { fail(field, "must not be negative, is \(value)") }
    }

    mutating func sha256Hex(_ value: String, _ field: String) {
        let isHex = value.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        if value.utf8.count != 64 || !isHex { fail(field, "must be 64 lowercase hex digits (a sha256)") }
    }

    mutating func uuid(_ value: String, _ field: String) {
        if !Self.isUUID(value) { fail(field, "must be a UUID like E2C56DB5-DFFB-48D2-B060-D0F5A71096E0") }
    }

    /// 8-4-4-4-12 hex digits, either case.
    static func isUUID(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 36 else { return false }
        for (i, b) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if b != UInt8(ascii: "-") { return false }
            } else if !((0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b)) {
                return false
            }
        }
        return true
    }
}

extension Duration {
    package var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    package var humanReadable: String {
        let seconds = Int(timeInterval)
        if seconds % 86_400 == 0 { return "\(seconds / 86_400) day\(seconds == 86_400 ? "" : "s")" }
        if seconds % 3600 == 0 { return "\(seconds / 3600) h" }
        if seconds % 60 == 0 { return "\(seconds / 60) min" }
        return "\(seconds) s"
    }
}
