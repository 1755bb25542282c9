import AttendanceProtocol
import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// What the gateway reads from the session merger's tables (read-only; the merger owns and
/// migrates `merger.events` and `merger.sessions`).
package protocol AttendanceReadRepository: Sendable {
    /// The recorded outcome of the first of `idempotencyKeys` that `deviceId` sent (one read for a
    /// key that may be a contract header or the event's own).
    func outcome(idempotencyKeys: [String], deviceId: String) async throws -> EventOutcomeResponse?
    /// The device's recorded events received at or after `since`, oldest first, at most `limit`.
    func events(deviceId: String, since: Date, limit: Int) async throws -> [EventOutcomeResponse]
    /// The user's sessions that are open or in soft exit, oldest check-in first.
    func openSessions(userId: String) async throws -> [SessionSummary]
}

/// `AttendanceReadRepository` over PostgreSQL. Reads only the columns of the contract with the
/// merger, so columns the merger adds do not matter.
package struct PostgresAttendanceReadRepository: AttendanceReadRepository {
    let client: PostgresClient
    let logger: Logger
    /// The schema holding `events` and `sessions`: `merger`, or a test schema of the same shape.
    let schema: String

    /// - Parameter schema: a name `ServiceMigrations.isValidSchemaName` accepts (it is spliced into SQL).
    package init(client: PostgresClient, logger: Logger, schema: String = "merger") {
        precondition(ServiceMigrations.isValidSchemaName(schema), "invalid schema name \(schema)")
        self.client = client
        self.logger = logger
        self.schema = schema
    }

    private typealias EventRow = (String, String, Int64, String, String?, String, String, Date, Date, Date)

    package func outcome(idempotencyKeys: [String], deviceId: String) async throws -> EventOutcomeResponse? {
        let rows = try await client.query(
            """
            SELECT idempotency_key, outcome, http_status::int8, server_receipt_id, session_id, reasons::text, action,
                   event_time, received_at, decided_at
            FROM \(unescaped: schema).events WHERE idempotency_key = ANY(\(idempotencyKeys)) AND device_id = \(deviceId)
            """, logger: logger)
        var found: [EventOutcomeResponse] = []
        for try await row in rows.decode(EventRow.self) { found.append(Self.response(row)) }
        return idempotencyKeys.lazy.compactMap { key in found.first { $0.idempotencyKey == key } }.first
    }

    package func events(deviceId: String, since: Date, limit: Int) async throws -> [EventOutcomeResponse] {
        let rows = try await client.query(
            """
            SELECT idempotency_key, outcome, http_status::int8, server_receipt_id, session_id, reasons::text, action,
                   event_time, received_at, decided_at
            FROM \(unescaped: schema).events WHERE device_id = \(deviceId) AND received_at >= \(since)
            ORDER BY received_at, idempotency_key LIMIT \(limit)
            """, logger: logger)
        var result: [EventOutcomeResponse] = []
        for try await row in rows.decode(EventRow.self) { result.append(Self.response(row)) }
        return result
    }

    package func openSessions(userId: String) async throws -> [SessionSummary] {
        let rows = try await client.query(
            """
            SELECT session_id, site_id, status, check_in_at, last_seen_at, check_out_at, session_keys::text
            FROM \(unescaped: schema).sessions WHERE user_id = \(userId) AND status IN ('open', 'soft_exit')
            ORDER BY check_in_at, session_id LIMIT 100
            """, logger: logger)
        var result: [SessionSummary] = []
        for try await (sessionId, siteId, status, checkInAt, lastSeenAt, checkOutAt, keys) in rows.decode(
            (String, String, String, Date, Date, Date?, String).self)
        {
            result.append(
                SessionSummary(
                    sessionId: sessionId, siteId: siteId, sessionKey: Self.strings(keys).first,
                    state: SessionState(rawValue: status) ?? .open, checkInAt: checkInAt, checkOutAt: checkOutAt, lastSeenAt: lastSeenAt
                ))
        }
        return result
    }

    private static func response(_ row: EventRow) -> EventOutcomeResponse {
        let (key, outcome, httpStatus, receipt, sessionId, reasons, action, eventTime, receivedAt, decidedAt) = row
        let status = EventOutcomeStatus(rawValue: outcome) ?? .accepted
        return EventOutcomeResponse(
            idempotencyKey: key, status: status, httpStatus: Int(httpStatus), serverReceiptId: receipt, sessionId: sessionId,
            reasons: status == .rejected ? strings(reasons) : nil,
            action: status == .rejected ? AppAction(rawValue: action) : nil,
            eventTime: eventTime, receivedAt: receivedAt, decidedAt: decidedAt
        )
    }

    /// A jsonb array of strings, as text.
    static func strings(_ json: String) -> [String] {
        (try? JSONDecoder().decode([String].self, from: Data(json.utf8))) ?? []
    }
}
