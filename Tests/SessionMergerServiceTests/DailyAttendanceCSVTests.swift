import AttendanceProtocol
import Foundation
import SessionMergerCore
import SessionMergerService
import Testing

@Suite("Daily attendance CSV")
struct DailyAttendanceCSVTests {
    /// A shift in Ho Chi Minh City from `start` to `end`.
    static func shift(_ start: String, _ end: String) throws -> AttendanceShift {
        AttendanceShift(
            timezone: "Asia/Ho_Chi_Minh", start: try #require(TimeOfDay(start)), end: try #require(TimeOfDay(end)),
            checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 15, earlyExitGraceMinutes: 10)
    }

    @Test func aRowThatExistsOnlyForItsShiftLeavesFirstInAndLastOutEmpty() throws {
        let night = try Self.shift("22:00", "06:00")
        // 00:30 to 06:00 local on the 19th: the night shift of the 18th, arrived at after midnight.
        let arrival = Date(timeIntervalSince1970: 1_758_216_600) // 2025-09-18T17:30:00Z
        let session = AttendanceInterval(
            sessionId: "n", userId: "u_1", siteId: "S_HQ", start: arrival, end: arrival.addingTimeInterval(5.5 * 3_600), isOpen: false)
        let rows = try DailyAttendanceCalculator.days(for: [session], shift: night)
        // As an import expects it: the fourteen columns.
        let plain = DailyAttendanceCSV.render(rows).components(separatedBy: "\r\n")
        try #require(plain.count >= 3)
        #expect(plain[0].components(separatedBy: ",").count == 14 && plain[2].hasSuffix(",n"))
        let lines = DailyAttendanceCSV.render(rows, localTimesIn: night.timezone).components(separatedBy: "\r\n")
        try #require(lines.count >= 3)
        #expect(lines[0].hasSuffix(",timezone,firstInLocal,lastOutLocal,workedSeconds"))
        #expect(lines[1].hasPrefix("u_1,S_HQ,2025-09-18,,,0,true,150,false,0,true,"))
        #expect(lines[1].hasSuffix(",Asia/Ho_Chi_Minh,,,0"))
        #expect(lines[2].hasPrefix("u_1,S_HQ,2025-09-19,2025-09-18T17:30:00"))
        // The same instants in the site's time: 00:30 and 06:00 on the 19th, as the people reading it count,
        // and the day's seconds (5 h 30 min).
        #expect(
            lines[2].hasSuffix(",Asia/Ho_Chi_Minh,2025-09-19T00:30:00.000+07:00,2025-09-19T06:00:00.000+07:00,19800"), "\(lines[2])")
    }

    /// The local columns are the UTC ones' instants to the millisecond (they dropped the fraction, so the
    /// two disagreed by up to a second).
    @Test func theLocalColumnsKeepTheMilliseconds() throws {
        let day = try Self.shift("08:00", "17:00")
        let arrival = Date(timeIntervalSince1970: 1_758_502_800.75) // 2025-09-22T01:00:00.750Z
        let session = AttendanceInterval(
            sessionId: "d", userId: "u_1", siteId: "S_HQ", start: arrival, end: arrival.addingTimeInterval(3_600.5), isOpen: false)
        let rows = try DailyAttendanceCalculator.days(for: [session], shift: day)
        let lines = DailyAttendanceCSV.render(rows, localTimesIn: day.timezone).components(separatedBy: "\r\n")
        try #require(lines.count >= 2)
        #expect(lines[1].contains(",2025-09-22T01:00:00.750Z,"), "\(lines[1])")
        #expect(lines[1].hasSuffix(",2025-09-22T08:00:00.750+07:00,2025-09-22T09:00:01.250+07:00,3600"), "\(lines[1])")
    }
}
