import AttendanceProtocol
import Foundation

/// A span of presence: one session as daily attendance sees it.
package struct AttendanceInterval: Hashable, Sendable {
    package var sessionId: String
    package var userId: String
    package var siteId: String
    package var start: Date
    /// The check-out, else the last presence (for an open session: presence so far).
    package var end: Date
    /// Still open: `end` is only the latest presence, there is no "out" yet.
    package var isOpen: Bool
    /// Closed by its check-out for good (the soft-exit grace passed without presence): `end` is a
    /// departure the device reported, not a timeout or a check-out that may still reopen.
    package var checkedOut: Bool

    package init(
        sessionId: String, userId: String, siteId: String, start: Date, end: Date, isOpen: Bool, checkedOut: Bool = false
    ) {
        self.sessionId = sessionId
        self.userId = userId
        self.siteId = siteId
        self.start = start
        self.end = max(start, end)
        self.isOpen = isOpen
        self.checkedOut = checkedOut && !isOpen
    }

    /// A session closed by a check-out sooner than `minimumPresence` seconds after its check-in: a stop
    /// or a walk past a door, not attendance (`AttendancePresence`).
    package func isBrief(minimumPresence: TimeInterval) -> Bool {
        checkedOut && end.timeIntervalSince(start) < minimumPresence
    }

    /// A derived session; a soft exit counts as ended at its check-out.
    package init(_ session: SessionSnapshot) {
        self.init(
            sessionId: session.id, userId: session.userId, siteId: session.siteId, start: session.checkInAt,
            end: session.endedAt ?? session.lastSeenAt, isOpen: session.status == .open,
            checkedOut: session.status == .closed && session.closeReason == .checkOut)
    }

    /// The latest `attendance.sessions` change of a session; `nil` for a superseded one (not a session).
    package init?(_ change: SessionChange) {
        if change.change == .closed && change.closeReason == .superseded { return nil }
        let open = change.change == .opened || change.change == .extended || change.change == .reopened
        let end = open ? (change.lastSeenAt ?? change.checkInAt) : (change.checkOutAt ?? change.lastSeenAt ?? change.checkInAt)
        self.init(
            sessionId: change.sessionId, userId: change.userId, siteId: change.siteId,
            start: change.checkInAt, end: end, isOpen: open,
            checkedOut: change.change == .closed && change.closeReason == .checkOut)
    }
}

/// One user's attendance on one local day at one site.
package struct DailyAttendance: Codable, Hashable, Sendable {
    package var userId: String
    package var siteId: String
    /// The local calendar day in the site's time zone.
    package var date: CalendarDate
    /// Earliest presence in the day (a session from the previous evening starts the day at 00:00);
    /// `nil` on a row that exists only for its shift: the presence of the shift that starts this day
    /// all fell after midnight (a night shift arrived at after 00:00).
    package var firstIn: Date?
    /// Latest end of presence in the day (a session running past midnight ends the day at 24:00);
    /// `nil` while a session that is still open has its latest presence in this day.
    package var lastOut: Date?
    /// Seconds of presence inside the day: sessions are clipped to the day's local midnights, so the
    /// sum over days equals the sessions' real length (a DST day is 23 or 25 hours long).
    package var workedSeconds: Int
    /// `workedSeconds / 60`, rounded down.
    package var workedMinutes: Int
    /// This day's shift, as instants (an overnight shift ends the next day).
    package var shiftStart: Date
    package var shiftEnd: Date
    /// Whether the shift's sessions have presence in its window (start - check-in allowance ... end +
    /// check-out allowance): those that belong to it, and those still present after the previous
    /// day's shift window closed.
    package var attendedShift: Bool
    /// First presence in the shift window later than start + late-entry grace.
    package var late: Bool
    /// Minutes after the shift start of that first presence, when late.
    package var lateMinutes: Int
    /// Last presence in the shift window ending before end - early-exit grace (never while still open).
    package var earlyExit: Bool
    /// Minutes before the shift end of that last presence, when early.
    package var earlyExitMinutes: Int
    /// Sessions that contributed, in start order.
    package var sessionIds: [String]
}

/// Daily attendance from sessions and a site's shift.
package enum DailyAttendanceCalculator {
    /// One row per (user, site, local day) that has presence or whose shift has, sorted by user, site, day.
    ///
    /// Sessions crossing local midnight are split between the days; worked time is real elapsed time
    /// (Foundation's calendar in the shift's time zone gives the midnights, so DST days are right).
    /// Late and early-exit flags follow the shift of the row's day (for an overnight shift, the shift
    /// that *starts* that day) and look only at the presence, inside its window, of the sessions that
    /// belong to that shift (`shiftDay(of:)`) or that began earlier and were still present after the
    /// previous day's shift window closed (a double shift). A day whose shift has presence has a row
    /// even when the day itself has none.
    ///
    /// A session closed by its check-out less than `minimumPresence` seconds after it began is left out
    /// altogether (`AttendancePresence`): a stop or a walk past a door is not attendance. An open
    /// session, one in its soft-exit grace and one closed for want of presence count whatever their
    /// length.
    package static func days(
        for intervals: [AttendanceInterval], shift: AttendanceShift,
        minimumPresence: TimeInterval = AttendancePresence.defaultMinimumSeconds
    ) throws(ShiftSettingsError) -> [DailyAttendance] {
        try days(
            for: intervals, schedule: ShiftSchedule(timezone: shift.timezone, current: shift.settings), minimumPresence: minimumPresence)
    }

    /// The rows of the local days `from...to` (as `days(for:shift:minimumPresence:)`), each day judged by the
    /// shift `schedule` gives it. Every day's windows are its own shift's, so a session at a change (a
    /// night shift's last night before day shifts) belongs to the shift whose window holds it, as on any
    /// other day.
    package static func days(
        for intervals: [AttendanceInterval], schedule: ShiftSchedule, from: CalendarDate, to: CalendarDate,
        minimumPresence: TimeInterval = AttendancePresence.defaultMinimumSeconds
    ) throws(ShiftSettingsError) -> [DailyAttendance] {
        try days(for: intervals, schedule: schedule, minimumPresence: minimumPresence).filter { $0.date >= from && $0.date <= to }
    }

    private static func days(
        for intervals: [AttendanceInterval], schedule: ShiftSchedule, minimumPresence: TimeInterval
    ) throws(ShiftSettingsError) -> [DailyAttendance] {
        for settings in [schedule.current] + schedule.earlier.map(\.shift) {
            _ = try AttendanceShift(timezone: schedule.timezone, settings: settings).validated()
        }
        let intervals = intervals.filter { !$0.isBrief(minimumPresence: minimumPresence) }
        // A validated shift's time zone is known.
        let calendar = ShiftCalendar(schedule: schedule)!
        var groups: [String: [AttendanceInterval]] = [:]
        for interval in intervals {
            groups[interval.userId + "\u{1F}" + interval.siteId, default: []].append(interval)
        }
        var rows: [DailyAttendance] = []
        for key in groups.keys.sorted() {
            let group = groups[key]!.sorted { ($0.start, $0.sessionId) < ($1.start, $1.sessionId) }
            let shiftDays = group.map { calendar.shiftDay(of: $0) }
            var dates = Set<CalendarDate>(shiftDays.compactMap { $0 })
            for interval in group {
                var date = calendar.localDate(of: interval.start)
                let last = calendar.localDate(of: interval.end > interval.start ? interval.end.addingTimeInterval(-0.001) : interval.start)
                while date <= last {
                    if calendar.exists(date) { dates.insert(date) }
                    date = date.next
                }
            }
            // A session still present after the previous shift's window closed goes on into this one
            // (a double shift, a session left open): it counts here too; a hand-over does not.
            for date in dates.sorted() {
                let previousWindowEnd = calendar.window(calendar.existingDay(before: date)).end
                var ofShift: [AttendanceInterval] = []
                for (interval, day) in zip(group, shiftDays) {
                    guard let day else { continue }
                    if day == date || (day < date && interval.end > previousWindowEnd) { ofShift.append(interval) }
                }
                if let row = row(for: date, group, ofShift: ofShift, calendar) { rows.append(row) }
            }
        }
        return rows
    }

    /// The row of `date`: `group`'s presence inside the day, and the flags of the day's shift from
    /// `ofShift`, the sessions that belong to it.
    private static func row(
        for date: CalendarDate, _ group: [AttendanceInterval], ofShift: [AttendanceInterval], _ calendar: ShiftCalendar
    ) -> DailyAttendance? {
        let dayStart = calendar.startOfDay(date)
        let dayEnd = calendar.startOfDay(date.next)
        let inDay = group.filter { overlaps($0, dayStart, dayEnd) }
        guard let first = inDay.first ?? ofShift.first else { return nil }
        let shift = calendar.shift(on: date)
        var worked: TimeInterval = 0
        var firstIn: Date?
        var lastOut: Date?
        var openInDay = false
        for interval in inDay {
            let from = max(interval.start, dayStart), to = min(interval.end, dayEnd)
            worked += max(0, to.timeIntervalSince(from))
            firstIn = min(firstIn ?? from, from)
            lastOut = max(lastOut ?? to, to)
            // Open and last seen in this day, its very end included: still there, not gone at midnight.
            if interval.isOpen && interval.end <= dayEnd { openInDay = true }
        }

        let (shiftStart, shiftEnd) = calendar.shiftInstants(date)
        let (windowStart, windowEnd) = calendar.window(date)
        let inWindow = ofShift.filter { overlaps($0, windowStart, windowEnd) }
        var late = false, lateMinutes = 0, early = false, earlyMinutes = 0
        if !inWindow.isEmpty {
            let arrival = inWindow.map { max($0.start, windowStart) }.min()!
            if arrival > shiftStart.addingTimeInterval(Double(shift.lateEntryGraceMinutes) * 60) {
                late = true
                lateMinutes = Int((arrival.timeIntervalSince(shiftStart) / 60).rounded(.down))
            }
            let stillThere = inWindow.contains { $0.isOpen && $0.end <= windowEnd }
            let departure = inWindow.map { min($0.end, windowEnd) }.max()!
            if !stillThere, departure < shiftEnd.addingTimeInterval(-Double(shift.earlyExitGraceMinutes) * 60) {
                early = true
                earlyMinutes = Int((shiftEnd.timeIntervalSince(departure) / 60).rounded(.down))
            }
        }
        let seconds = Int(worked.rounded(.down))
        var sessionIds = inDay.map(\.sessionId)
        for interval in inWindow where !sessionIds.contains(interval.sessionId) { sessionIds.append(interval.sessionId) }
        let starts = Dictionary(group.map { ($0.sessionId, $0.start) }, uniquingKeysWith: min)
        sessionIds.sort { (starts[$0] ?? .distantPast, $0) < (starts[$1] ?? .distantPast, $1) }
        return DailyAttendance(
            userId: first.userId, siteId: first.siteId, date: date, firstIn: firstIn, lastOut: openInDay ? nil : lastOut,
            workedSeconds: seconds, workedMinutes: seconds / 60, shiftStart: shiftStart, shiftEnd: shiftEnd,
            attendedShift: !inWindow.isEmpty, late: late, lateMinutes: lateMinutes, earlyExit: early,
            earlyExitMinutes: earlyMinutes, sessionIds: sessionIds)
    }

    /// Whether the interval has presence in [from, to): a positive overlap, or an instant inside.
    static func overlaps(_ interval: AttendanceInterval, _ from: Date, _ to: Date) -> Bool {
        if interval.end > interval.start { return interval.start < to && interval.end > from }
        return interval.start >= from && interval.start < to
    }
}

/// Foundation's Gregorian calendar in the shift's time zone: the local days of a site.
package struct ShiftCalendar {
    let schedule: ShiftSchedule
    let calendar: Calendar

    /// `nil` when the shift's time zone is not a zone this system knows.
    package init?(shift: AttendanceShift) {
        self.init(schedule: ShiftSchedule(timezone: shift.timezone, current: shift.settings))
    }

    /// Each day's shift as `schedule` gives it; `nil` when its time zone is not a zone this system knows.
    package init?(schedule: ShiftSchedule) {
        guard let zone = TimeZone(identifier: schedule.timezone) else { return nil }
        self.schedule = schedule
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        calendar.locale = Locale(identifier: "en_US_POSIX")
        self.calendar = calendar
    }

    package func localDate(of instant: Date) -> CalendarDate {
        let c = calendar.dateComponents([.era, .year, .month, .day], from: instant)
        // Foundation counts years before 1 AD backwards from era 0; CalendarDate's are proleptic (0 is 1 BC).
        let year = c.era == 0 ? 1 - (c.year ?? 1) : (c.year ?? 1970)
        return CalendarDate(year: year, month: c.month ?? 1, day: c.day ?? 1) ?? CalendarDate(daysSince1970: 0)
    }

    /// Noon exists on every day in every zone (DST changes happen at night), so days are anchored there.
    private func noon(_ date: CalendarDate) -> Date {
        calendar.date(from: DateComponents(year: date.year, month: date.month, day: date.day, hour: 12))!
    }

    /// Whether the zone had the local day `date`: Samoa skipped 2011-12-30 when it moved across the date
    /// line, and Foundation gives such a day the next day's instants.
    package func exists(_ date: CalendarDate) -> Bool { localDate(of: noon(date)) == date }

    /// The last day before `date` that the zone had.
    func existingDay(before date: CalendarDate) -> CalendarDate {
        var day = date.previous
        // A zone skips one day at a time, and none twice in a row.
        for _ in 0..<3 where !exists(day) { day = day.previous }
        return day
    }

    /// The day's first instant (local midnight, or the first existing time when midnight is skipped).
    package func startOfDay(_ date: CalendarDate) -> Date {
        calendar.startOfDay(for: noon(date))
    }

    /// The shift of the local day `date`.
    func shift(on date: CalendarDate) -> AttendanceShift { schedule.shift(on: date) }

    /// The shift of `date` as instants (an overnight or round-the-clock shift ends the next day).
    func shiftInstants(_ date: CalendarDate) -> (start: Date, end: Date) {
        let shift = shift(on: date)
        return (instant(date, shift.start), instant(shift.isOvernight ? date.next : date, shift.end))
    }

    /// The shift window of `date`: start - check-in allowance ..< end + check-out allowance.
    func window(_ date: CalendarDate) -> (start: Date, end: Date) {
        let shift = shift(on: date)
        let (start, end) = shiftInstants(date)
        return (
            start.addingTimeInterval(-Double(shift.checkInBeforeStartMinutes) * 60),
            end.addingTimeInterval(Double(shift.checkOutAfterEndMinutes) * 60)
        )
    }

    /// The day whose shift a session belongs to, so that its presence counts for one shift only (a
    /// round-the-clock shift's hand-over is not the next shift's arrival; a night shift arrived at
    /// after midnight is the previous day's).
    /// - The shift whose window holds the session's start; when two windows hold it (a
    ///   round-the-clock shift's allowances overlap the next one's), the shift whose start is nearest
    ///   (an arrival 10 minutes before the next shift is that shift's, not the end of the last).
    /// - A session starting in no window (before the check-in allowance) belongs to the first shift
    ///   whose window it reaches; one that reaches none belongs to no shift.
    package func shiftDay(of interval: AttendanceInterval) -> CalendarDate? {
        // Windows reach at most a day plus an allowance (up to a day) either side of their date.
        let startDate = localDate(of: interval.start)
        var date = startDate.previous.previous.previous
        var holding: [CalendarDate] = []
        while date <= startDate.next.next {
            let (from, to) = window(date)
            if exists(date), from <= interval.start && interval.start < to { holding.append(date) }
            date = date.next
        }
        if let nearest = holding.min(by: {
            abs(shiftInstants($0).start.timeIntervalSince(interval.start)) < abs(shiftInstants($1).start.timeIntervalSince(interval.start))
        }) {
            return nearest
        }
        date = startDate.previous.previous.previous
        let last = localDate(of: interval.end).next.next
        while date <= last {
            let (from, to) = window(date)
            if exists(date), DailyAttendanceCalculator.overlaps(interval, from, to) { return date }
            date = date.next
        }
        return nil
    }

    /// The wall-clock time on that day. Foundation resolves a time skipped by a DST change to the
    /// instant the same distance after the change (02:30 on Berlin's spring-forward day is 03:30 CEST)
    /// and a repeated time to its first occurrence.
    func instant(_ date: CalendarDate, _ time: TimeOfDay) -> Date {
        calendar.date(from: DateComponents(year: date.year, month: date.month, day: date.day, hour: time.hour, minute: time.minute))!
    }
}
