import AttendanceProtocol
import Foundation

/// A site's shift as daily attendance judges it (Frappe HRMS "Shift Type" fields): the registry's
/// `ShiftSettings` and the site's time zone.
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
@dynamicMemberLookup
package struct AttendanceShift: Codable, Hashable, Sendable {
    /// Every window and grace is at most one day.
    package static let minutesRange = ShiftSettings.minutesRange

    /// IANA time zone identifier, e.g. `Europe/Berlin`, `Asia/Ho_Chi_Minh`.
    package var timezone: String
    /// The shift as the registry publishes it; its fields read as the shift's own (`shift.start`).
    package var settings: ShiftSettings

    package init(timezone: String, settings: ShiftSettings) {
        self.timezone = timezone
        self.settings = settings
    }

    package init(
        timezone: String, start: TimeOfDay, end: TimeOfDay, checkInBeforeStartMinutes: Int = 60,
        checkOutAfterEndMinutes: Int = 60, lateEntryGraceMinutes: Int = 0, earlyExitGraceMinutes: Int = 0
    ) {
        self.init(
            timezone: timezone,
            settings: ShiftSettings(
                start: start, end: end, checkInBeforeStartMinutes: checkInBeforeStartMinutes,
                checkOutAfterEndMinutes: checkOutAfterEndMinutes, lateEntryGraceMinutes: lateEntryGraceMinutes,
                earlyExitGraceMinutes: earlyExitGraceMinutes))
    }

    package subscript<Value>(dynamicMember keyPath: WritableKeyPath<ShiftSettings, Value>) -> Value {
        get { settings[keyPath: keyPath] }
        set { settings[keyPath: keyPath] = newValue }
    }

    private enum CodingKeys: String, CodingKey { case timezone }

    // On the wire the time zone sits beside the shift's fields.
    package init(from decoder: any Decoder) throws {
        timezone = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .timezone)
        settings = try ShiftSettings(from: decoder)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(timezone, forKey: .timezone)
        try settings.encode(to: encoder)
    }

    /// An overnight shift ends on the next local day.
    package var isOvernight: Bool { settings.end <= settings.start }

    /// The shift's length in wall-clock minutes (`ShiftSettings.nominalMinutes`).
    package var nominalMinutes: Int { settings.nominalMinutes }

    /// Every problem, empty when usable: the time zone, and the shift's own rules (`ShiftSettings.issues`).
    package func validationIssues() -> [ConfigurationIssue] {
        var issues: [ConfigurationIssue] = []
        if TimeZone(identifier: timezone) == nil {
            issues.append(.init(field: "timezone", reason: "\"\(timezone)\" is not an IANA time zone identifier like Europe/Berlin"))
        }
        return issues + settings.issues
    }

    package func validated() throws(ShiftSettingsError) -> AttendanceShift {
        let issues = validationIssues()
        guard issues.isEmpty else { throw ShiftSettingsError(issues: issues) }
        return self
    }
}

/// Unusable shift settings: every problem, each naming its field.
package struct ShiftSettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    package var issues: [ConfigurationIssue]

    package init(issues: [ConfigurationIssue]) { self.issues = issues }

    package var fields: [String] { issues.map(\.field) }

    package var description: String { issues.map(\.description).joined(separator: "; ") }
}

/// A site's shifts over time: `current` from the last of `earlier` on, each of `earlier` on the local
/// days before its `until` (the registry's `Site.shiftHistory`). The daily report judges each day by the
/// shift it had.
package struct ShiftSchedule: Hashable, Sendable {
    package var timezone: String
    package var current: ShiftSettings
    /// Oldest first.
    package var earlier: [ShiftPeriod]

    package init(timezone: String, current: ShiftSettings, earlier: [ShiftPeriod] = []) {
        self.timezone = timezone
        self.current = current
        self.earlier = earlier.sorted { $0.until < $1.until }
    }

    /// The shift of the local day `day`.
    package func shift(on day: CalendarDate) -> AttendanceShift {
        AttendanceShift(timezone: timezone, settings: earlier.first { day < $0.until }?.shift ?? current)
    }
}
