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
