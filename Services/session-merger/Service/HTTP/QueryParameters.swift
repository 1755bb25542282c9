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

/// Opaque session-list cursors: base64url of `s1:<check-in ms>:<session id>`.
enum SessionCursorCoding {
    /// Check-in times a cursor may carry: 1970 to the end of 9999 (what a timestamp column stores).
    static let validMillis: ClosedRange<Int64> = 0...253_402_300_799_999

    static func encode(_ cursor: SessionCursor) -> String {
        let millis = Int64((cursor.checkInAt.timeIntervalSince1970 * 1000).rounded())
        return Data("s1:\(millis):\(cursor.sessionId)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> SessionCursor? {
        guard !text.isEmpty, text.count <= 600 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8), decoded.hasPrefix("s1:") else {
            return nil
        }
        let rest = decoded.dropFirst(3)
        guard let colon = rest.firstIndex(of: ":"), let millis = Int64(rest[..<colon]), validMillis.contains(millis) else { return nil }
        let id = String(rest[rest.index(after: colon)...])
        guard !id.isEmpty, id.utf8.count <= 128, !RequestTextGuard.containsControlCharacter(id) else { return nil }
        return SessionCursor(checkInAt: Date(timeIntervalSince1970: Double(millis) / 1000), sessionId: id)
    }
}
