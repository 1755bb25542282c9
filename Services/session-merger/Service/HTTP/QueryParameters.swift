import AttendanceProtocol
import Foundation
import Hummingbird
import SessionMergerCore

/// Limits of the admin API.
public enum MergerAdminLimits {
    public static let pageSizes: ClosedRange<Int> = 1...200
    public static let defaultPageSize = 50
    /// The longest daily-attendance range, in days (a quarter).
    public static let maxDailyRangeDays = 92
}

/// The query string of one request, checked strictly: an unknown parameter, a repeated one or an
/// empty value is a 400 naming it, never ignored.
struct QueryParameters {
    private var values: [String: String] = [:]

    init(_ request: Request, allowed: Set<String>) throws(ProblemDetails) {
        var errors: [FieldError] = []
        for (name, value) in request.uri.queryParameters {
            let key = String(name)
            guard allowed.contains(key) else {
                errors.append(FieldError(field: key, reason: "is not a parameter of this endpoint (allowed: \(allowed.sorted().joined(separator: ", ")))"))
                continue
            }
            guard values[key] == nil else {
                errors.append(FieldError(field: key, reason: "is given more than once"))
                continue
            }
            let text = String(value) // Hummingbird has percent-decoded values already
            guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                errors.append(FieldError(field: key, reason: "must not be empty"))
                continue
            }
            values[key] = text
        }
        if !errors.isEmpty { throw .validation(errors) }
    }

    func string(_ name: String, maxLength: Int = 256) throws(ProblemDetails) -> String? {
        guard let value = values[name] else { return nil }
        guard value.count <= maxLength else {
            throw .validation([FieldError(field: name, reason: "must be at most \(maxLength) characters")])
        }
        return value
    }

    func timestamp(_ name: String) throws(ProblemDetails) -> Date? {
        guard let value = values[name] else { return nil }
        guard let date = WireTimestamp.date(from: value) else {
            throw .validation([FieldError(field: name, reason: "must be an RFC 3339 timestamp such as 2025-09-18T08:30:00Z")])
        }
        return date
    }

    func localDate(_ name: String) throws(ProblemDetails) -> LocalDate? {
        guard let value = values[name] else { return nil }
        guard let date = LocalDate(value), CivilDays.isValid(date) else {
            throw .validation([FieldError(field: name, reason: "must be a calendar date YYYY-MM-DD, got \"\(value)\"")])
        }
        return date
    }

    func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(ProblemDetails) -> Int {
        guard let text = values[name] else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw .validation([FieldError(field: name, reason: "must be an integer within \(range.lowerBound)...\(range.upperBound)")])
        }
        return value
    }

    func choice<T>(_ name: String, _ options: [String: T]) throws(ProblemDetails) -> T? {
        guard let text = values[name] else { return nil }
        guard let value = options[text] else {
            throw .validation([FieldError(field: name, reason: "must be one of \(options.keys.sorted().joined(separator: ", ")), got \"\(text)\"")])
        }
        return value
    }
}

/// Day arithmetic on `LocalDate` (proleptic Gregorian civil days).
enum CivilDays {
    /// Days since 1970-01-01.
    static func ordinal(_ date: LocalDate) -> Int {
        let y = date.month <= 2 ? date.year - 1 : date.year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = date.month
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + date.day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func date(ordinal: Int) -> LocalDate {
        let z = ordinal + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return LocalDate(year: yoe + era * 400 + (month <= 2 ? 1 : 0), month: month, day: day)
    }

    /// False for dates like 2025-02-30.
    static func isValid(_ date: LocalDate) -> Bool {
        Self.date(ordinal: ordinal(date)) == date
    }

    /// The instant a local day starts in `zone`.
    static func startOfDay(_ date: LocalDate, in zone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar.date(from: DateComponents(year: date.year, month: date.month, day: date.day))
            .map { calendar.startOfDay(for: $0) }
    }
}

/// Opaque session-list cursors: base64url of `s1:<check-in ms>:<session id>`.
enum SessionCursorCoding {
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
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8), decoded.hasPrefix("s1:") else { return nil }
        let rest = decoded.dropFirst(3)
        guard let colon = rest.firstIndex(of: ":"), let millis = Int64(rest[..<colon]) else { return nil }
        let id = String(rest[rest.index(after: colon)...])
        guard !id.isEmpty else { return nil }
        return SessionCursor(checkInAt: Date(timeIntervalSince1970: Double(millis) / 1000), sessionId: id)
    }
}
