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

/// Opaque session-list cursors: `PageCursorText` of version `s1` and `<check-in ms>:<session id>`.
enum SessionCursorCoding {
    /// Check-in times a cursor may carry: 1970 to the end of 9999 (what a timestamp column stores).
    static let validMillis: ClosedRange<Int64> = 0...253_402_300_799_999

    static func encode(_ cursor: SessionCursor) -> String {
        PageCursorText.encode(version: "s1", "\(cursor.checkInMillis):\(cursor.sessionId)")
    }

    static func decode(_ text: String) -> SessionCursor? {
        guard let rest = PageCursorText.decode(text, version: "s1", maxLength: 600) else { return nil }
        guard let colon = rest.firstIndex(of: ":"), let millis = Int64(rest[..<colon]), validMillis.contains(millis) else { return nil }
        let id = String(rest[rest.index(after: colon)...])
        guard !id.isEmpty, id.utf8.count <= 128 else { return nil }
        return SessionCursor(checkInAt: Date(timeIntervalSince1970: Double(millis) / 1000), sessionId: id)
    }
}
