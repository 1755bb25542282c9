import AttendanceProtocol
import Foundation

/// A site's shift as daily attendance judges it (Frappe HRMS "Shift Type" fields). Same fields as the
/// registry's `ShiftSettings`, plus the site's time zone.
///
/// - The shift runs from `start` to `end` every local day; an `end` before `start` is an overnight
///   shift ending the next day, and an `end` equal to `start` a round-the-clock shift of 24 hours (as
///   the registry accepts it).
/// - Presence counts for the shift from `checkInBeforeStartMinutes` before the start until
///   `checkOutAfterEndMinutes` after the end (the *shift window*).
/// - Late: the first presence in the window is later than `start + lateEntryGraceMinutes`.
/// - Early exit: the last presence in the window ends before `end - earlyExitGraceMinutes`.
///
/// Minutes are durations (a 15-minute grace is 15 real minutes, also across a DST change); `start` and
/// `end` are wall-clock times in `timezone` on each local day.
public struct AttendanceShift: Codable, Hashable, Sendable {
    /// Every window and grace is at most one day.
    public static let minutesRange: ClosedRange<Int> = 0...1_440

    /// IANA time zone identifier, e.g. `Europe/Berlin`, `Asia/Ho_Chi_Minh`.
    public var timezone: String
    public var start: TimeOfDay
    public var end: TimeOfDay
    public var checkInBeforeStartMinutes: Int
    public var checkOutAfterEndMinutes: Int
    public var lateEntryGraceMinutes: Int
    public var earlyExitGraceMinutes: Int

    public init(
        timezone: String, start: TimeOfDay, end: TimeOfDay, checkInBeforeStartMinutes: Int = 60,
        checkOutAfterEndMinutes: Int = 60, lateEntryGraceMinutes: Int = 0, earlyExitGraceMinutes: Int = 0
    ) {
        self.timezone = timezone
        self.start = start
        self.end = end
        self.checkInBeforeStartMinutes = checkInBeforeStartMinutes
        self.checkOutAfterEndMinutes = checkOutAfterEndMinutes
        self.lateEntryGraceMinutes = lateEntryGraceMinutes
        self.earlyExitGraceMinutes = earlyExitGraceMinutes
    }

    /// An overnight shift ends on the next local day.
    public var isOvernight: Bool { end <= start }

    /// The shift's length in wall-clock minutes (a DST change makes the real length differ).
    public var nominalMinutes: Int {
        let d = end.minutesSinceMidnight - start.minutesSinceMidnight
        return d > 0 ? d : d + 1_440
    }

    /// Every problem, empty when usable.
    public func validationIssues() -> [ConfigurationIssue] {
        var issues: [ConfigurationIssue] = []
        if TimeZone(identifier: timezone) == nil {
            issues.append(.init(field: "timezone", message: "\"\(timezone)\" is not an IANA time zone identifier like Europe/Berlin"))
        }
        let minutes: [(String, Int)] = [
            ("checkInBeforeStartMinutes", checkInBeforeStartMinutes), ("checkOutAfterEndMinutes", checkOutAfterEndMinutes),
            ("lateEntryGraceMinutes", lateEntryGraceMinutes), ("earlyExitGraceMinutes", earlyExitGraceMinutes),
        ]
        for (field, value) in minutes where !Self.minutesRange.contains(value) {
            issues.append(.init(field: field, message: "must be between 0 and 1440 minutes, got \(value)"))
        }
        if lateEntryGraceMinutes + earlyExitGraceMinutes > nominalMinutes && Self.minutesRange.contains(lateEntryGraceMinutes)
            && Self.minutesRange.contains(earlyExitGraceMinutes)
        {
            issues.append(
                .init(
                    field: "earlyExitGraceMinutes",
                    message:
                        "late-entry plus early-exit grace (\(lateEntryGraceMinutes + earlyExitGraceMinutes) min) exceeds the shift (\(nominalMinutes) min)"
                ))
        }
        return issues
    }

    public func validated() throws(ShiftSettingsError) -> AttendanceShift {
        let issues = validationIssues()
        guard issues.isEmpty else { throw ShiftSettingsError(issues: issues) }
        return self
    }
}

/// Unusable shift settings: every problem, each naming its field.
public struct ShiftSettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    public var issues: [ConfigurationIssue]

    public init(issues: [ConfigurationIssue]) { self.issues = issues }

    public var fields: [String] { issues.map(\.field) }

    public var description: String { issues.map(\.description).joined(separator: "; ") }
}

/// A calendar date in a site's time zone, encoded `YYYY-MM-DD`.
public struct LocalDate: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD`.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...12).contains(m), (1...31).contains(d)
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    public var description: String {
        func pad(_ v: Int, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    public static func < (a: Self, b: Self) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not a date like 2025-03-30"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
