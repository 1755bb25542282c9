import AttendanceProtocol
import Foundation
import Hummingbird
import ServiceRuntime
import SessionMergerCore

/// Limits of the admin API.
package enum MergerAdminLimits {
    package static let pageSizes: ClosedRange<Int> = 1...200
    package static let defaultPageSize = 50
    /// The longest daily-attendance range, in days (a quarter).
    package static let maxDailyRangeDays = 92
    /// The most sessions one daily-attendance report reads (about 100 MB in memory while it is built): a
    /// site of 10,000 people over a quarter is about 1.4 million, which one request must not hold.
    package static let maxDailyReportSessions = 250_000
}

extension StrictQuery {
    func calendarDate(_ name: String) throws(ProblemDetails) -> CalendarDate? {
        guard let value = self[name] else { return nil }
        guard let date = CalendarDate(value) else {
            throw .validation([FieldError(field: name, reason: "must be a calendar date YYYY-MM-DD, got \"\(value)\"")])
        }
        return date
    }
}

extension StrictQuery {
    /// `from` and `to` (RFC 3339), `from` before `to` when both are given.
    func timeWindow() throws(ProblemDetails) -> (from: Date?, to: Date?) {
        let from = try timestamp("from")
        let to = try timestamp("to")
        if let from, let to, from >= to {
            throw .validation([FieldError(field: "from", reason: "must be before to")])
        }
        return (from, to)
    }
}

/// A keyset position as an opaque cursor: `PageCursorText` of `version` and `<time>:<id>`, the time
/// in whole units since 1970 (`unitsPerSecond`) and the row's id. Times from 1970 to the end of 9999
/// (what a timestamp column stores).
struct PositionCursorCoding {
    let version: String
    let unitsPerSecond: Int64
    let maxIdBytes: Int

    /// Session lists: check-in milliseconds and the session id.
    static let sessions = PositionCursorCoding(version: "s1", unitsPerSecond: 1_000, maxIdBytes: 128)
    /// Event lists: event-time microseconds and the idempotency key.
    static let events = PositionCursorCoding(version: "e1", unitsPerSecond: 1_000_000, maxIdBytes: 256)

    /// The time in whole units, as the column holds it.
    func units(_ time: Date) -> Int64 { Int64((time.timeIntervalSince1970 * Double(unitsPerSecond)).rounded()) }

    func encode(_ time: Date, _ id: String) -> String {
        PageCursorText.encode(version: version, "\(units(time)):\(id)")
    }

    func decode(_ text: String) -> (time: Date, id: String)? {
        guard let rest = PageCursorText.decode(text, version: version, maxLength: 600) else { return nil }
        let valid = 0...(253_402_300_800 * unitsPerSecond - 1)
        guard let colon = rest.firstIndex(of: ":"), let count = Int64(rest[..<colon]), valid.contains(count) else { return nil }
        let id = String(rest[rest.index(after: colon)...])
        guard !id.isEmpty, id.utf8.count <= maxIdBytes else { return nil }
        return (Date(timeIntervalSince1970: Double(count) / Double(unitsPerSecond)), id)
    }

    /// The `cursor` parameter decoded, nil when absent; a 400 naming it for one this API did not make.
    func parameter(_ query: StrictQuery) throws(ProblemDetails) -> (time: Date, id: String)? {
        guard let text = try query.string("cursor", maxLength: 600) else { return nil }
        guard let decoded = decode(text) else {
            throw .validation([FieldError(field: "cursor", reason: "is not a cursor this API returned")])
        }
        return decoded
    }
}
