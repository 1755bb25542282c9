import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceRuntime
import SessionMergerCore

/// A page of a list endpoint (the registry's shape).
package struct SessionPage: Codable, Sendable {
    package var items: [SessionRecordView]
    /// Pass as `?cursor=` for the next page; absent on the last page.
    package var nextCursor: String?
}

/// `GET /v1/admin/sessions?userId=&siteId=&from=&to=&status=&includeSuperseded=&limit=&cursor=` (viewer).
///
/// Sessions of a user and/or a site (at least one), whose check-in is in `[from, to)` (RFC 3339),
/// ordered by check-in time; superseded sessions only with `includeSuperseded=true`.
struct SessionsController {
    static let parameters: Set<String> = ["userId", "siteId", "from", "to", "status", "includeSuperseded", "limit", "cursor"]

    let repository: any SessionQueryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("sessions") { request, context in
            try context.authorize(.viewer)
            let query = try StrictQuery(request, allowed: Self.parameters)
            let userId = try query.string("userId")
            let siteId = try query.string("siteId")
            guard userId != nil || siteId != nil else {
                throw ProblemDetails.validation([
                    FieldError(field: "userId", reason: "userId or siteId is required"),
                    FieldError(field: "siteId", reason: "userId or siteId is required"),
                ])
            }
            let (from, to) = try query.timeWindow()
            let status = try query.choice("status", ["open": SessionStatus.open, "soft_exit": .softExit, "closed": .closed])
            let includeSuperseded = try query.choice("includeSuperseded", ["true": true, "false": false]) ?? false
            let limit = try query.int("limit", default: MergerAdminLimits.defaultPageSize, in: MergerAdminLimits.pageSizes)
            let cursor = try PositionCursorCoding.sessions.parameter(query).map { SessionCursor(checkInAt: $0.time, sessionId: $0.id) }
            let filter = SessionFilter(
                userId: userId, siteId: siteId, from: from, to: to, status: status, includeSuperseded: includeSuperseded)
            let rows = try await repository.sessions(filter, after: cursor, limit: limit + 1)
            let items = Array(rows.prefix(limit))
            let next =
                rows.count > limit ? items.last.map { PositionCursorCoding.sessions.encode($0.checkInAt, $0.sessionId) } : nil
            return try Reply.json(SessionPage(items: items, nextCursor: next), request: request, context: context)
        }
    }
}

/// `GET /v1/admin/events?userId=&from=&to=&limit=&cursor=` (viewer).
///
/// The events recorded for a user, accepted and refused, whose event time is in `[from, to)`
/// (RFC 3339), ordered by event time: when each reached the gateway, what the policy decided and why,
/// and the session it is in. What an operator answers a disputed record from.
struct EventsController {
    static let parameters: Set<String> = ["userId", "from", "to", "limit", "cursor"]

    let repository: any SessionQueryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("events") { request, context in
            try context.authorize(.viewer)
            let query = try StrictQuery(request, allowed: Self.parameters)
            guard let userId = try query.string("userId") else {
                throw ProblemDetails.validation([FieldError(field: "userId", reason: "is required")])
            }
            let (from, to) = try query.timeWindow()
            let limit = try query.int("limit", default: MergerAdminLimits.defaultPageSize, in: MergerAdminLimits.pageSizes)
            let cursor = try PositionCursorCoding.events.parameter(query).map {
                RecordedEventCursor(eventTime: $0.time, idempotencyKey: $0.id)
            }
            let rows = try await repository.events(userId: userId, from: from, to: to, after: cursor, limit: limit + 1)
            let items = Array(rows.prefix(limit))
            let next =
                rows.count > limit ? items.last.map { PositionCursorCoding.events.encode($0.eventTime, $0.idempotencyKey) } : nil
            return try Reply.json(RecordedEventPage(items: items, nextCursor: next), request: request, context: context)
        }
    }
}

/// `GET /v1/admin/pipeline` (admin): the consumer group's stored offsets, the session-change outbox
/// backlog and the timelines waiting for the idle sweep.
struct PipelineController {
    let repository: any SessionQueryRepository
    let groupId: String

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("pipeline") { request, context in
            try context.authorize(.admin)
            _ = try StrictQuery(request, allowed: [])
            let status = try await repository.pipelineStatus(groupId: groupId, now: Date())
            return try Reply.json(status, request: request, context: context)
        }
    }
}

/// The daily report's JSON body.
package struct DailyAttendanceReport: Codable, Sendable {
    package var siteId: String
    package var userId: String?
    package var from: CalendarDate
    package var to: CalendarDate
    package var timezone: String
    package var shift: AttendanceShift
    package var items: [DailyAttendance]
}

/// `GET /v1/admin/attendance/daily?siteId=&userId=&from=YYYY-MM-DD&to=YYYY-MM-DD&format=&localTimes=` (viewer).
///
/// One row per user and local day with presence at the site: first in, last out, worked minutes,
/// late / early-exit flags by the shift the site had that day (from the registry feed). JSON by default; CSV with
/// `format=csv` or `Accept: text/csv`. The range is inclusive and at most 92 days.
struct DailyAttendanceController {
    static let parameters: Set<String> = ["siteId", "userId", "from", "to", "format", "localTimes"]

    let repository: any SessionQueryRepository
    let shifts: any SiteShiftProvider
    /// Sessions closed by their check-out sooner after their check-in are not attendance (`AttendancePresence`).
    let minimumPresence: TimeInterval
    /// The most sessions one report reads (`MergerAdminLimits.maxDailyReportSessions`); a report that
    /// would need more is refused, naming the narrower requests that fit.
    var maxSessions = MergerAdminLimits.maxDailyReportSessions

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("attendance/daily") { request, context in
            try context.authorize(.viewer)
            let query = try StrictQuery(request, allowed: Self.parameters)
            var missing: [FieldError] = []
            let siteId = try query.string("siteId")
            let userId = try query.string("userId")
            let from = try query.calendarDate("from")
            let to = try query.calendarDate("to")
            if siteId == nil { missing.append(FieldError(field: "siteId", reason: "is required")) }
            if from == nil { missing.append(FieldError(field: "from", reason: "is required (YYYY-MM-DD)")) }
            if to == nil { missing.append(FieldError(field: "to", reason: "is required (YYYY-MM-DD)")) }
            guard missing.isEmpty, let siteId, let from, let to else { throw ProblemDetails.validation(missing) }
            guard from <= to else {
                throw ProblemDetails.validation([FieldError(field: "from", reason: "must not be after to (\(to))")])
            }
            let days = to.daysSince1970 - from.daysSince1970 + 1
            guard days <= MergerAdminLimits.maxDailyRangeDays else {
                throw ProblemDetails.validation([
                    FieldError(
                        field: "to", reason: "the range is \(days) days; at most \(MergerAdminLimits.maxDailyRangeDays) days are allowed")
                ])
            }
            let localTimes = try query.choice("localTimes", ["true": true, "false": false]) ?? false
            let format =
                try query.choice("format", ["json": "json", "csv": "csv"])
                ?? (request.headers[.accept].map { $0.lowercased().contains("text/csv") } == true ? "csv" : "json")

            let schedule: ShiftSchedule
            switch shifts.shift(siteId: siteId) {
            case .found(let found): schedule = found
            case .unknownSite: throw ProblemDetails.notFound("no site \(siteId) in the registry")
            case .noShift: throw ProblemDetails.notFound("site \(siteId) has no shift settings")
            case .notReady: throw ProblemDetails.unavailable("the registry feed is still loading", retryAfterSeconds: 2)
            }
            // The report names the shift of its last day; each row carries its own day's shift window.
            let shift = schedule.shift(on: to)
            guard let calendar = ShiftCalendar(shift: shift) else {
                context.logger.error(
                    "a site's time zone is unusable", metadata: ["siteId": .string(siteId), "timezone": .string(shift.timezone)])
                throw ProblemDetails.unavailable("site \(siteId) has an unusable time zone \(shift.timezone)")
            }
            // A day's row judges its whole shift window, which an overnight shift or an allowance carries
            // into the day before or after: the sessions of those days are loaded too, and only the
            // rows of `from...to` are answered.
            let start = calendar.startOfDay(from.previous), end = calendar.startOfDay(to.next.next)
            let sessions = try await repository.sessionsOverlapping(
                siteId: siteId, userId: userId, start: start, end: end, limit: maxSessions + 1)
            guard sessions.count <= maxSessions else {
                throw ProblemDetails.validation([
                    FieldError(
                        field: userId == nil ? "userId" : "to",
                        reason:
                            "the report would read more than \(maxSessions) sessions; ask for fewer days\(userId == nil ? " or one user" : "")"
                    )
                ])
            }
            let rows: [DailyAttendance]
            do {
                rows = try DailyAttendanceCalculator.days(
                    for: sessions.map(\.interval), schedule: schedule, from: from, to: to, minimumPresence: minimumPresence)
            } catch {
                context.logger.error("a site's shift settings are unusable", metadata: ["siteId": .string(siteId), "error": "\(error)"])
                throw ProblemDetails.unavailable("site \(siteId) has unusable shift settings: \(error)")
            }
            if format == "csv" {
                return DailyAttendanceCSV.response(
                    rows, localTimesIn: localTimes ? shift.timezone : nil, filename: "attendance-\(siteId)-\(from)-\(to).csv")
            }
            let report = DailyAttendanceReport(
                siteId: siteId, userId: userId, from: from, to: to, timezone: shift.timezone, shift: shift, items: rows)
            return try Reply.json(report, request: request, context: context)
        }
    }
}

/// The daily report as RFC 4180 CSV: a header row, CRLF line ends, fields with a comma, a quote or a
/// line break quoted (quotes doubled), timestamps RFC 3339 UTC. Asked for (`localTimes=true`), four
/// more columns for the people counting hours: first in and last out again in the site's time zone
/// (RFC 3339 with its offset, to the millisecond as the UTC ones), and the day's worked seconds (a sum
/// of the rows' floored minutes loses up to a minute a row); without, the columns stay the ones an
/// import already expects.
package enum DailyAttendanceCSV {
    package static let header = [
        "userId", "siteId", "date", "firstIn", "lastOut", "workedMinutes", "late", "lateMinutes", "earlyExit",
        "earlyExitMinutes", "attendedShift", "shiftStart", "shiftEnd", "sessionIds",
    ]
    package static let localTimesHeader = ["timezone", "firstInLocal", "lastOutLocal", "workedSeconds"]

    /// `localTimesIn`: the site's time zone, to add the local-time columns in it.
    package static func render(_ rows: [DailyAttendance], localTimesIn timezone: String? = nil) -> String {
        let local = ISO8601DateFormatter()
        local.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        local.timeZone = timezone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(secondsFromGMT: 0)!
        var lines = [(header + (timezone == nil ? [] : localTimesHeader)).map(field).joined(separator: ",")]
        for row in rows {
            var fields: [String] = [
                row.userId, row.siteId, row.date.description, row.firstIn.map(WireTimestamp.string(from:)) ?? "",
                row.lastOut.map(WireTimestamp.string(from:)) ?? "", String(row.workedMinutes), String(row.late),
                String(row.lateMinutes), String(row.earlyExit), String(row.earlyExitMinutes), String(row.attendedShift),
                WireTimestamp.string(from: row.shiftStart), WireTimestamp.string(from: row.shiftEnd),
                row.sessionIds.joined(separator: " "),
            ]
            if let timezone {
                fields += [
                    timezone, row.firstIn.map(local.string(from:)) ?? "", row.lastOut.map(local.string(from:)) ?? "",
                    String(row.workedSeconds),
                ]
            }
            lines.append(fields.map(field).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// One field, quoted when it must be.
    package static func field(_ value: String) -> String {
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func response(_ rows: [DailyAttendance], localTimesIn timezone: String?, filename: String) -> Response {
        let safeName = String(filename.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" })
        let headers: HTTPFields = [
            .contentType: "text/csv; charset=utf-8",
            .contentDisposition: "attachment; filename=\"\(safeName)\"",
        ]
        return Response(
            status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: render(rows, localTimesIn: timezone))))
    }
}
