import AttendanceProtocol
import Foundation
import Testing

@testable import SessionMergerCore

func span(
    _ id: String, _ start: String, _ end: String, user: String = "u_1", open: Bool = false, checkedOut: Bool = false
) -> AttendanceInterval {
    AttendanceInterval(
        sessionId: id, userId: user, siteId: "S_HQ", start: utc(start), end: utc(end), isOpen: open, checkedOut: checkedOut)
}

func hhmm(_ text: String) -> TimeOfDay { TimeOfDay(text)! }

@Suite("Daily attendance")
struct DailyAttendanceTests {
    /// Ho Chi Minh City (UTC+7, no DST): 08:00-17:00, 60 min allowances, 15 min late grace, 10 min early grace.
    let saigon = AttendanceShift(
        timezone: "Asia/Ho_Chi_Minh", start: hhmm("08:00"), end: hhmm("17:00"), checkInBeforeStartMinutes: 60,
        checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)

    @Test("a local day and its start convert both ways, before the year 1 too")
    func localDaysRoundTrip() throws {
        let calendar = try #require(ShiftCalendar(shift: saigon))
        let today = try #require(CalendarDate(year: 2025, month: 9, day: 18))
        // 2025-09-18 12:00 UTC is 19:00 in Ho Chi Minh City, the same local day.
        #expect(calendar.localDate(of: Date(timeIntervalSince1970: Double(today.daysSince1970) * 86_400 + 12 * 3_600)) == today)
        // Foundation's calendar is Julian before 1582; a day's label still converts both ways, and 1 BC is year 0.
        for date in [today, CalendarDate(year: 0, month: 2, day: 29), CalendarDate(year: 1, month: 1, day: 1)] {
            let day = try #require(date)
            #expect(calendar.localDate(of: calendar.startOfDay(day)) == day, "\(day)")
        }
        #expect(ShiftCalendar(shift: AttendanceShift(timezone: "Mars/Olympus", start: hhmm("08:00"), end: hhmm("17:00"))) == nil)
    }

    @Test("on time: first in, last out, worked minutes, no flags")
    func onTime() throws {
        // 07:50-17:05 local.
        let rows = try DailyAttendanceCalculator.days(for: [span("s1", "2025-09-18T00:50:00Z", "2025-09-18T10:05:00Z")], shift: saigon)
        #expect(rows.count == 1)
        try #require(rows.count > 0)
        let row = rows[0]
        #expect(row.date == CalendarDate(year: 2025, month: 9, day: 18))
        #expect(row.firstIn == utc("2025-09-18T00:50:00Z"))
        #expect(row.lastOut == utc("2025-09-18T10:05:00Z"))
        #expect(row.workedMinutes == 555)
        #expect(row.workedSeconds == 555 * 60)
        #expect(row.shiftStart == utc("2025-09-18T01:00:00Z"))
        #expect(row.shiftEnd == utc("2025-09-18T10:00:00Z"))
        #expect(row.attendedShift)
        #expect(!row.late)
        #expect(!row.earlyExit)
        #expect(row.sessionIds == ["s1"])
    }

    /// The site moved from 08:00 to 09:00 starts on the 19th: 08:20 is late on the 18th and early on
    /// the 19th, each judged by the shift its day had, whatever range is asked.
    @Test("each day is judged by the shift it had")
    func eachDayByItsOwnShift() throws {
        var nine = saigon.settings
        nine.start = hhmm("09:00")
        nine.end = hhmm("18:00")
        let changed = try #require(CalendarDate("2025-09-19"))
        let schedule = ShiftSchedule(
            timezone: saigon.timezone, current: nine, earlier: [ShiftPeriod(until: changed, shift: saigon.settings)])
        #expect(schedule.shift(on: changed.previous).settings == saigon.settings)
        #expect(schedule.shift(on: changed).settings == nine)
        let sessions = [
            span("d18", "2025-09-18T01:20:00Z", "2025-09-18T10:00:00Z"), span("d19", "2025-09-19T01:20:00Z", "2025-09-19T11:00:00Z"),
        ]
        let from = try #require(CalendarDate("2025-09-17")), to = try #require(CalendarDate("2025-09-20"))
        let rows = try DailyAttendanceCalculator.days(for: sessions, schedule: schedule, from: from, to: to)
        #expect(rows.map(\.date.description) == ["2025-09-18", "2025-09-19"])
        #expect(rows.map(\.late) == [true, false])
        #expect(rows.map(\.lateMinutes) == [20, 0])
        #expect(rows.map(\.shiftStart) == [utc("2025-09-18T01:00:00Z"), utc("2025-09-19T02:00:00Z")])
        // Asked one day at a time, the same rows.
        for row in rows {
            #expect(try DailyAttendanceCalculator.days(for: sessions, schedule: schedule, from: row.date, to: row.date) == [row])
        }
    }

    /// Night shifts (22:00-06:00) until the 19th, day shifts (07:00-16:00) from it: the last night,
    /// ending at 06:30 on the 19th, is the 18th's shift and not an early exit of the 19th's; with a
    /// two-hour check-out allowance at night, an arrival at 06:30 on the 19th is the 19th's day shift,
    /// not a made-up night of the 18th.
    @Test("a session at a shift change belongs to the shift whose window holds it")
    func aSessionAtAShiftChange() throws {
        let night = ShiftSettings(
            start: hhmm("22:00"), end: hhmm("06:00"), checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 60,
            lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        let day = ShiftSettings(
            start: hhmm("07:00"), end: hhmm("16:00"), checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 60,
            lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        let changed = try #require(CalendarDate("2025-09-19"))
        let schedule = ShiftSchedule(timezone: saigon.timezone, current: day, earlier: [ShiftPeriod(until: changed, shift: night)])
        let from = try #require(CalendarDate("2025-09-17")), to = try #require(CalendarDate("2025-09-20"))
        // 22:00 on the 18th to 06:30 on the 19th, local (UTC+7).
        let lastNight = [span("n", "2025-09-18T15:00:00Z", "2025-09-18T23:30:00Z")]
        let rows = try DailyAttendanceCalculator.days(for: lastNight, schedule: schedule, from: from, to: to)
        #expect(rows.map(\.date.description) == ["2025-09-18", "2025-09-19"])
        #expect(rows.map(\.attendedShift) == [true, false])
        #expect(rows.map(\.earlyExit) == [false, false])
        #expect(rows.map(\.late) == [false, false])

        var lateNight = night
        lateNight.checkOutAfterEndMinutes = 120
        let longAllowance = ShiftSchedule(timezone: saigon.timezone, current: day, earlier: [ShiftPeriod(until: changed, shift: lateNight)])
        // 06:30 to 15:00 on the 19th, local.
        let firstDay = [span("d", "2025-09-18T23:30:00Z", "2025-09-19T08:00:00Z")]
        let dayRows = try DailyAttendanceCalculator.days(for: firstDay, schedule: longAllowance, from: from, to: to)
        #expect(dayRows.map(\.date.description) == ["2025-09-19"])
        #expect(dayRows.first?.attendedShift == true && dayRows.first?.late == false)
        #expect(dayRows.first?.earlyExit == true && dayRows.first?.earlyExitMinutes == 60)
    }

    @Test("late arrival and early exit beyond the graces are flagged with minutes")
    func lateAndEarly() throws {
        // 08:20-16:40 local: 20 min after start (grace 15), 20 min before end (grace 10).
        let row = try #require(
            DailyAttendanceCalculator.days(
                for: [span("s1", "2025-09-18T01:20:00Z", "2025-09-18T09:40:00Z")], shift: saigon
            ).first)
        #expect(row.late)
        #expect(row.lateMinutes == 20)
        #expect(row.earlyExit)
        #expect(row.earlyExitMinutes == 20)
        #expect(row.workedMinutes == 500)
    }

    @Test("arrival exactly at start + grace and departure exactly at end - grace are not flagged")
    func graceBoundaries() throws {
        // 08:15-16:50 local.
        let row = try #require(
            DailyAttendanceCalculator.days(
                for: [span("s1", "2025-09-18T01:15:00Z", "2025-09-18T09:50:00Z")], shift: saigon
            ).first)
        #expect(!row.late)
        #expect(!row.earlyExit)
        #expect(row.lateMinutes == 0)
    }

    @Test("a session checked out within the minimum presence is not attendance; open or timed-out ones count")
    func briefPresenceIsLeftOut() throws {
        let tenMinutes = AttendancePresence.defaultMinimumSeconds
        func days(_ spans: [AttendanceInterval], _ minimum: TimeInterval = tenMinutes) throws -> [DailyAttendance] {
            try DailyAttendanceCalculator.days(for: spans, shift: saigon, minimumPresence: minimum)
        }
        // A stop at the door at 07:55-08:03 local, checked out, then the real arrival at 08:40 (late).
        let day = [
            span("stop", "2025-09-18T00:55:00Z", "2025-09-18T01:03:00Z", checkedOut: true),
            span("s1", "2025-09-18T01:40:00Z", "2025-09-18T10:00:00Z", checkedOut: true),
        ]
        let rows = try days(day)
        try #require(rows.count == 1)
        #expect(rows[0].sessionIds == ["s1"] && rows[0].late && rows[0].lateMinutes == 40)
        #expect(rows[0].firstIn == utc("2025-09-18T01:40:00Z") && rows[0].workedMinutes == 8 * 60 + 20)
        // Counted when the rule is off; the product's default is the rule.
        let all = try days(day, 0)
        #expect(all.count == 1 && all.first?.sessionIds == ["stop", "s1"] && all.first?.late == false)
        #expect(try DailyAttendanceCalculator.days(for: day, shift: saigon) == rows)
        // A day of nothing but a walk past has no row, even across midnight (23:55-00:04 local).
        #expect(try days([span("past", "2025-09-18T03:00:00Z", "2025-09-18T03:02:00Z", checkedOut: true)]).isEmpty)
        #expect(try days([span("night", "2025-09-18T16:55:00Z", "2025-09-18T17:04:00Z", checkedOut: true)]).isEmpty)
        // Exactly the minimum counts.
        #expect(try days([span("x", "2025-09-18T03:00:00Z", "2025-09-18T03:10:00Z", checkedOut: true)]).count == 1)
        // Open, in its soft-exit grace, or closed for want of presence (a phone that died at the door):
        // not a check-out the device made for good, so it counts.
        let open = try days([span("o", "2025-09-18T03:00:00Z", "2025-09-18T03:02:00Z", open: true)])
        #expect(open.count == 1 && open.first?.lastOut == nil)
        #expect(try days([span("soft", "2025-09-18T03:00:00Z", "2025-09-18T03:02:00Z")]).count == 1)
        #expect(
            AttendanceInterval(
                sessionId: "z", userId: "u", siteId: "S", start: utc("2025-09-18T03:00:00Z"),
                end: utc("2025-09-18T03:02:00Z"), isOpen: true, checkedOut: true
            ).checkedOut == false)
    }

    @Test("a session's interval knows whether its check-out closed it for good")
    func checkedOutOnlyWhenClosedByTheCheckOut() throws {
        let checkIn = utc("2025-09-18T03:00:00Z")
        var session = SessionSnapshot(
            id: "ses_a", userId: "u", siteId: "S", status: .softExit, checkInAt: checkIn, lastSeenAt: checkIn,
            checkOutAt: checkIn.addingTimeInterval(120), closeReason: nil, sessionKeys: ["k"], eventIds: ["a"], reopenCount: 0)
        #expect(!AttendanceInterval(session).checkedOut, "a soft exit may still reopen")
        session.status = .closed
        session.closeReason = .checkOut
        #expect(AttendanceInterval(session).checkedOut && AttendanceInterval(session).isBrief(minimumPresence: 600))
        session.closeReason = .presenceTimeout
        #expect(!AttendanceInterval(session).checkedOut)
    }

    @Test("two sessions in a day add up; first in and last out span both")
    func twoSessions() throws {
        // 08:00-12:00 and 13:00-17:00 local.
        let rows = try DailyAttendanceCalculator.days(
            for: [
                span("pm", "2025-09-18T06:00:00Z", "2025-09-18T10:00:00Z"),
                span("am", "2025-09-18T01:00:00Z", "2025-09-18T05:00:00Z"),
            ], shift: saigon)
        #expect(rows.count == 1)
        try #require(rows.count > 0)
        #expect(rows[0].workedMinutes == 480)
        #expect(rows[0].firstIn == utc("2025-09-18T01:00:00Z"))
        #expect(rows[0].lastOut == utc("2025-09-18T10:00:00Z"))
        #expect(rows[0].sessionIds == ["am", "pm"])
        #expect(!rows[0].late && !rows[0].earlyExit)
    }

    @Test("a session crossing midnight is split between the two local days")
    func crossingMidnight() throws {
        // 22:00 on the 18th to 06:00 on the 19th, local.
        let night = span("n", "2025-09-18T15:00:00Z", "2025-09-18T23:00:00Z")
        let rows = try DailyAttendanceCalculator.days(for: [night], shift: saigon)
        #expect(rows.map(\.date.description) == ["2025-09-18", "2025-09-19"])
        #expect(rows.map(\.workedMinutes) == [120, 360])
        try #require(rows.count > 1)
        #expect(rows[0].firstIn == utc("2025-09-18T15:00:00Z"))
        #expect(rows[0].lastOut == utc("2025-09-18T17:00:00Z")) // local midnight
        #expect(rows[1].firstIn == utc("2025-09-18T17:00:00Z"))
        #expect(rows[1].lastOut == utc("2025-09-18T23:00:00Z"))
        // Nothing of it falls in either day's 07:00-18:00 shift window.
        #expect(rows.map(\.attendedShift) == [false, false])
        #expect(rows.allSatisfy { !$0.late && !$0.earlyExit })

        // Against an overnight 22:00-06:00 shift the flags belong to the day it starts.
        var overnight = saigon
        overnight.start = hhmm("22:00")
        overnight.end = hhmm("06:00")
        let nightRows = try DailyAttendanceCalculator.days(for: [night], shift: overnight)
        #expect(nightRows.map(\.workedMinutes) == [120, 360])
        try #require(nightRows.count == 2)
        #expect(nightRows[0].shiftStart == utc("2025-09-18T15:00:00Z"))
        #expect(nightRows[0].shiftEnd == utc("2025-09-18T23:00:00Z"))
        #expect(nightRows.map(\.attendedShift) == [true, false])
        #expect(!nightRows[0].late && !nightRows[0].earlyExit)
    }

    @Test("a night shift arrived at after midnight is the previous day's shift, late")
    func nightShiftArrivedAfterMidnight() throws {
        var overnight = saigon
        overnight.start = hhmm("22:00")
        overnight.end = hhmm("06:00")
        // 00:30 to 06:00 on the 19th, local: the shift that started on the 18th, 150 minutes late.
        let rows = try DailyAttendanceCalculator.days(for: [span("n", "2025-09-18T17:30:00Z", "2025-09-18T23:00:00Z")], shift: overnight)
        #expect(rows.map(\.date.description) == ["2025-09-18", "2025-09-19"])
        try #require(rows.count == 2)
        let shiftDay = rows[0]
        #expect(shiftDay.firstIn == nil && shiftDay.lastOut == nil && shiftDay.workedMinutes == 0)
        #expect(shiftDay.attendedShift && shiftDay.late && shiftDay.lateMinutes == 150 && !shiftDay.earlyExit)
        #expect(shiftDay.sessionIds == ["n"])
        // The 19th holds the presence; its own shift (22:00 on the 19th) was not attended.
        #expect(rows[1].firstIn == utc("2025-09-18T17:30:00Z"))
        #expect(rows[1].workedMinutes == 330)
        #expect(!rows[1].attendedShift && !rows[1].late)
    }

    @Test("a round-the-clock shift's hand-over is not the next shift's arrival")
    func roundTheClockHandOver() throws {
        let allDay = AttendanceShift(
            timezone: "Asia/Ho_Chi_Minh", start: hhmm("06:00"), end: hhmm("06:00"), checkInBeforeStartMinutes: 60,
            checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        // u_1 works the 18th's shift, 06:05 to 06:30 the next morning (local), handing over.
        let outgoing = span("out", "2025-09-17T23:05:00Z", "2025-09-18T23:30:00Z")
        // u_2 arrives 10 minutes before the 19th's shift and stays to 18:00.
        let incoming = span("in", "2025-09-18T22:50:00Z", "2025-09-19T11:00:00Z", user: "u_2")
        let rows = try DailyAttendanceCalculator.days(for: [outgoing, incoming], shift: allDay)
        let byUser = Dictionary(grouping: rows, by: \.userId)
        let u1 = try #require(byUser["u_1"])
        #expect(u1.map(\.date.description) == ["2025-09-18", "2025-09-19"])
        try #require(u1.count == 2)
        #expect(u1[0].attendedShift && !u1[0].late && !u1[0].earlyExit)
        #expect(!u1[1].attendedShift && !u1[1].earlyExit)
        let u2 = try #require(byUser["u_2"])
        #expect(u2.map(\.date.description) == ["2025-09-19"])
        #expect(u2.first?.attendedShift == true && u2.first?.late == false)
    }

    @Test("a double shift attends both shifts; the second is not late")
    func doubleShift() throws {
        let allDay = AttendanceShift(
            timezone: "Asia/Ho_Chi_Minh", start: hhmm("06:00"), end: hhmm("06:00"), checkInBeforeStartMinutes: 60,
            checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        // 05:55 on the 18th to 06:10 on the 20th, local: the 18th's and the 19th's shifts.
        let rows = try DailyAttendanceCalculator.days(for: [span("d", "2025-09-17T22:55:00Z", "2025-09-19T23:10:00Z")], shift: allDay)
        #expect(rows.map(\.date.description) == ["2025-09-18", "2025-09-19", "2025-09-20"])
        try #require(rows.count == 3)
        #expect(rows[0].attendedShift && !rows[0].late && !rows[0].earlyExit)
        #expect(rows[1].attendedShift && !rows[1].late && !rows[1].earlyExit)
        #expect(rows[1].workedMinutes == 1_440)
        // The 20th holds only the hand-over: its shift was not attended.
        #expect(!rows[2].attendedShift)
    }

    @Test("an open session has no last out and is never an early exit")
    func openSession() throws {
        let row = try #require(
            DailyAttendanceCalculator.days(
                for: [span("s1", "2025-09-18T01:00:00Z", "2025-09-18T03:00:00Z", open: true)], shift: saigon
            ).first)
        #expect(row.lastOut == nil)
        #expect(row.workedMinutes == 120)
        #expect(!row.earlyExit)
    }

    /// Still present, last seen at the very end of the day (local midnight): no last out at midnight.
    @Test("an open session last seen exactly at local midnight has no last out")
    func openSessionSeenAtMidnight() throws {
        let berlin = AttendanceShift(timezone: "Europe/Berlin", start: hhmm("08:00"), end: hhmm("17:00"))
        // 2025-06-10 20:00 to 2025-06-11 00:00 CEST.
        let rows = try DailyAttendanceCalculator.days(
            for: [span("s1", "2025-06-10T18:00:00Z", "2025-06-10T22:00:00Z", open: true)], shift: berlin)
        #expect(rows.map(\.date.description) == ["2025-06-10"])
        let row = try #require(rows.first)
        #expect(row.lastOut == nil)
        #expect(row.workedMinutes == 240)
    }

    /// Samoa moved across the date line and had no 2011-12-30: nothing is reported on a day the zone did
    /// not have, and the next day keeps its shift.
    @Test("Pacific/Apia, December 2011: a day the zone skipped has no row, the next keeps its shift")
    func aSkippedDay() throws {
        let apia = AttendanceShift(
            timezone: "Pacific/Apia", start: hhmm("09:00"), end: hhmm("17:00"), checkInBeforeStartMinutes: 60,
            checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        let calendar = try #require(ShiftCalendar(shift: apia))
        #expect(!calendar.exists(try #require(CalendarDate(year: 2011, month: 12, day: 30))))
        #expect(calendar.exists(try #require(CalendarDate(year: 2011, month: 12, day: 31))))
        // 2011-12-31 08:55 to 17:05 local (UTC+14).
        let rows = try DailyAttendanceCalculator.days(
            for: [span("s1", "2011-12-30T18:55:00Z", "2011-12-31T03:05:00Z")], shift: apia)
        #expect(rows.map(\.date.description) == ["2011-12-31"])
        let row = try #require(rows.first)
        #expect(row.attendedShift && !row.late && !row.earlyExit)
        #expect(row.workedMinutes == 490)
        // A session across the skipped day: a row for each day the zone had (29th and 31st), none for the 30th.
        let across = try DailyAttendanceCalculator.days(
            for: [span("s2", "2011-12-30T09:00:00Z", "2011-12-30T11:00:00Z", open: true)], shift: apia)
        #expect(across.map(\.date.description) == ["2011-12-29", "2011-12-31"])
    }

    @Test("Europe/Berlin, last Sunday of March: a 23-hour day, shift times in summer time")
    func springForward() throws {
        let berlin = AttendanceShift(
            timezone: "Europe/Berlin", start: hhmm("08:00"), end: hhmm("17:00"), checkInBeforeStartMinutes: 60,
            checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        let rows = try DailyAttendanceCalculator.days(
            for: [
                // u1: Saturday 22:00 CET to Sunday 09:00 CEST: 2 h on Saturday, 8 h (not 9) on Sunday.
                span("n", "2025-03-29T21:00:00Z", "2025-03-30T07:00:00Z", user: "u1"),
                // u2: Sunday 08:20-17:00 CEST.
                span("d", "2025-03-30T06:20:00Z", "2025-03-30T15:00:00Z", user: "u2"),
                // u3: the whole Sunday, local midnight to local midnight: 23 h.
                span("w", "2025-03-29T23:00:00Z", "2025-03-30T22:00:00Z", user: "u3"),
            ], shift: berlin)
        #expect(rows.map { "\($0.userId) \($0.date)" } == ["u1 2025-03-29", "u1 2025-03-30", "u2 2025-03-30", "u3 2025-03-30"])

        try #require(rows.count > 3)
        let (u1Saturday, u1Sunday, u2Sunday, u3Sunday) = (rows[0], rows[1], rows[2], rows[3])
        #expect(u1Saturday.workedMinutes == 120)
        #expect(u1Saturday.shiftStart == utc("2025-03-29T07:00:00Z")) // 08:00 CET
        #expect(u1Saturday.lastOut == utc("2025-03-29T23:00:00Z"))
        #expect(!u1Saturday.attendedShift)
        #expect(u1Sunday.workedMinutes == 480)
        #expect(u1Sunday.firstIn == utc("2025-03-29T23:00:00Z"))
        #expect(u1Sunday.lastOut == utc("2025-03-30T07:00:00Z"))
        #expect(u1Sunday.shiftStart == utc("2025-03-30T06:00:00Z")) // 08:00 CEST
        #expect(u1Sunday.shiftEnd == utc("2025-03-30T15:00:00Z")) // 17:00 CEST
        #expect(!u1Sunday.late) // present since before the window
        #expect(u1Sunday.earlyExit)
        #expect(u1Sunday.earlyExitMinutes == 480)

        // 08:20 CEST is 06:20Z: late by 20 min (a fixed +01:00 offset would call it 07:20, early).
        #expect(u2Sunday.late)
        #expect(u2Sunday.lateMinutes == 20)
        #expect(!u2Sunday.earlyExit)
        #expect(u2Sunday.workedMinutes == 520)

        #expect(u3Sunday.workedMinutes == 23 * 60)
    }

    @Test("Europe/Berlin, last Sunday of October: a 25-hour day")
    func fallBack() throws {
        let berlin = AttendanceShift(timezone: "Europe/Berlin", start: hhmm("08:00"), end: hhmm("17:00"))
        let rows = try DailyAttendanceCalculator.days(
            for: [span("w", "2025-10-25T22:00:00Z", "2025-10-26T23:00:00Z")], shift: berlin)
        #expect(rows.map(\.date.description) == ["2025-10-26"])
        try #require(rows.count > 0)
        #expect(rows[0].workedMinutes == 25 * 60)
        #expect(rows[0].shiftStart == utc("2025-10-26T07:00:00Z")) // 08:00 CET again
    }

    /// The registry accepts a shift whose end equals its start as 24 hours; the daily report must
    /// read it so too, not refuse the site's settings.
    @Test("a round-the-clock shift (end equal to start) is 24 hours long")
    func roundTheClock() throws {
        let allDay = AttendanceShift(
            timezone: "Asia/Ho_Chi_Minh", start: hhmm("06:00"), end: hhmm("06:00"), checkInBeforeStartMinutes: 60,
            checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
        #expect(allDay.validationIssues().isEmpty)
        #expect(allDay.nominalMinutes == 1_440)
        // 06:05 to 18:00 local: on time, but out long before the next day's 06:00.
        let rows = try DailyAttendanceCalculator.days(for: [span("s1", "2025-09-17T23:05:00Z", "2025-09-18T11:00:00Z")], shift: allDay)
        let row = try #require(rows.first)
        #expect(rows.count == 1)
        #expect(row.shiftStart == utc("2025-09-17T23:00:00Z"))
        #expect(row.shiftEnd == utc("2025-09-18T23:00:00Z"))
        #expect(row.attendedShift)
        #expect(!row.late)
        #expect(row.earlyExit)
    }

    @Test("bad shift settings are refused with every field named")
    func validation() {
        let bad = AttendanceShift(
            timezone: "Mars/Olympus", start: hhmm("08:00"), end: hhmm("08:00"), checkInBeforeStartMinutes: -1,
            checkOutAfterEndMinutes: 2_000, lateEntryGraceMinutes: 0, earlyExitGraceMinutes: 0)
        #expect(bad.validationIssues().map(\.field) == ["timezone", "checkInBeforeStartMinutes", "checkOutAfterEndMinutes"])
        #expect(throws: ShiftSettingsError.self) { try DailyAttendanceCalculator.days(for: [], shift: bad) }
        #expect(TimeOfDay("24:00") == nil)
        #expect(TimeOfDay("8:30") == TimeOfDay(hour: 8, minute: 30))
        #expect(TimeOfDay("08:30:00")?.description == "08:30")
    }

    @Test("from a timeline: sessions in, daily rows out; superseded changes are not sessions")
    func fromTimeline() throws {
        var timeline = try newTimeline()
        // UTC site: 07:59:40-13:00 and 14:00-17:00 (the working day).
        try timeline.applyAll(workingDay())
        timeline.closeIdle(now: at(0, day: 1))
        let shift = AttendanceShift(
            timezone: "UTC", start: hhmm("08:00"), end: hhmm("17:00"), lateEntryGraceMinutes: 5, earlyExitGraceMinutes: 5)
        let rows = try DailyAttendanceCalculator.days(for: timeline.sessions.map(AttendanceInterval.init), shift: shift)
        #expect(rows.count == 1)
        try #require(rows.count > 0)
        #expect(rows[0].firstIn == at(7, 59, 40))
        #expect(rows[0].lastOut == at(17))
        #expect(rows[0].workedSeconds == 5 * 3_600 + 20 + 3 * 3_600)
        #expect(rows[0].workedMinutes == 480)
        #expect(!rows[0].late && !rows[0].earlyExit)

        let superseded = SessionChange(
            sessionId: "ses_x", userId: userId, siteId: siteId, change: .closed, checkInAt: at(8),
            closeReason: .superseded, eventIds: [], version: 2, changedAt: at(9))
        #expect(AttendanceInterval(superseded) == nil)
        let open = SessionChange(
            sessionId: "ses_y", userId: userId, siteId: siteId, change: .extended, checkInAt: at(8), lastSeenAt: at(9),
            eventIds: ["y"], version: 2, changedAt: at(9))
        #expect(
            AttendanceInterval(open)
                == AttendanceInterval(
                    sessionId: "ses_y", userId: userId, siteId: siteId, start: at(8), end: at(9), isOpen: true))
    }
}
