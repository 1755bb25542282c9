/// When a site's shift runs and how much slack check-in and check-out get (as Frappe HRMS models it):
/// the registry stores it with the site and publishes it on its change feed, and the merger's daily
/// attendance judges lateness and early exits by it.
public struct ShiftSettings: Codable, Hashable, Sendable {
    /// Every window and grace is bounded by one day.
    public static let minutesRange: ClosedRange<Int> = 0...1_440

    /// Local to the site. An end before the start is an overnight shift; an end equal to the start a
    /// 24-hour one (round the clock).
    public var start: TimeOfDay
    public var end: TimeOfDay
    /// A check-in counts from this many minutes before `start`.
    public var checkInBeforeStartMinutes: Int
    /// A check-out counts until this many minutes after `end`.
    public var checkOutAfterEndMinutes: Int
    /// Arriving up to this many minutes after `start` is not late.
    public var lateEntryGraceMinutes: Int
    /// Leaving up to this many minutes before `end` is not early.
    public var earlyExitGraceMinutes: Int

    public init(
        start: TimeOfDay, end: TimeOfDay, checkInBeforeStartMinutes: Int, checkOutAfterEndMinutes: Int,
        lateEntryGraceMinutes: Int, earlyExitGraceMinutes: Int
    ) {
        self.start = start
        self.end = end
        self.checkInBeforeStartMinutes = checkInBeforeStartMinutes
        self.checkOutAfterEndMinutes = checkOutAfterEndMinutes
        self.lateEntryGraceMinutes = lateEntryGraceMinutes
        self.earlyExitGraceMinutes = earlyExitGraceMinutes
    }

    /// The shift's length in wall-clock minutes, 1-1440 (a DST change makes the real length differ; an
    /// end equal to the start is 24 hours).
    public var nominalMinutes: Int {
        let d = end.minutesSinceMidnight - start.minutesSinceMidnight
        return d > 0 ? d : d + 1_440
    }

    /// Every rule the shift breaks, each naming its field (empty when usable): every window and grace
    /// within a day, and the two graces together at most the shift's length. The registry refuses such
    /// a shift; the merger's daily attendance cannot judge by it.
    public var issues: [FieldError] {
        var issues: [FieldError] = []
        let minutes: [(String, Int)] = [
            ("checkInBeforeStartMinutes", checkInBeforeStartMinutes), ("checkOutAfterEndMinutes", checkOutAfterEndMinutes),
            ("lateEntryGraceMinutes", lateEntryGraceMinutes), ("earlyExitGraceMinutes", earlyExitGraceMinutes),
        ]
        for (field, value) in minutes where !Self.minutesRange.contains(value) {
            issues.append(FieldError(field: field, reason: "must be within 0...1440 minutes, got \(value)"))
        }
        let graces = lateEntryGraceMinutes + earlyExitGraceMinutes
        if issues.isEmpty && graces > nominalMinutes {
            issues.append(
                FieldError(
                    field: "earlyExitGraceMinutes",
                    reason: "late-entry plus early-exit grace (\(graces) min) exceeds the shift (\(nominalMinutes) min)"))
        }
        return issues
    }
}

/// What daily attendance counts as presence.
public enum AttendancePresence {
    /// A session closed by its check-out less than this many seconds after its check-in is not
    /// attendance: a person who stopped at a door or walked past it, whose phone checked in and then
    /// left the site's geofence minutes later. The session itself is kept; only the daily rows leave it
    /// out. 10 minutes; the merger's `MERGER_MINIMUM_PRESENCE_SECONDS` sets another, 0 counts every
    /// session.
    public static let defaultMinimumSeconds: Double = 600
    /// A check-in or heartbeat this soon after a check-out reopens the session instead of starting a
    /// new one (the merger's soft-exit grace, `MERGER_SOFT_EXIT_GRACE_SECONDS`): 5 minutes.
    public static let defaultSoftExitGraceSeconds: Double = 300
}
