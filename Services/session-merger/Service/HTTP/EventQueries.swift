import AttendanceProtocol
import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// An event as the admin API shows it (a `merger.events` row without its envelope): what a phone sent,
/// when the gateway took it, what the policy decided and why, and the session it is in.
package struct RecordedEventView: Codable, Hashable, Sendable {
    package var idempotencyKey: String
    package var deviceId: String
    package var siteId: String?
    /// `checkin`, `checkout` or `heartbeat`.
    package var type: String
    package var eventTime: Date
    /// The gateway's receipt.
    package var receivedAt: Date
    /// When the merger recorded it.
    package var recordedAt: Date
    /// `accepted` or `rejected`.
    package var outcome: String
    /// Why it was refused (empty when accepted).
    package var reasons: [String]
    package var action: String
    /// The session it is in; absent for a refused event, or one in no session (an orphan heartbeat, or
    /// an event older than its timeline's history).
    package var sessionId: String?
    package var policyVersion: Int?
    package var riskScore: Double?
}

/// A page of recorded events.
package struct RecordedEventPage: Codable, Sendable {
    package var items: [RecordedEventView]
    /// Pass as `?cursor=` for the next page; absent on the last page.
    package var nextCursor: String?
}

/// Keyset position: the last (event time, idempotency key) of the previous page.
package struct RecordedEventCursor: Sendable, Hashable {
    package var eventTime: Date
    package var idempotencyKey: String

    /// The event time in whole microseconds since 1970, as `event_time` holds it.
    package var eventMicros: Int64 { PositionCursorCoding.events.units(eventTime) }
}

extension PostgresSessionQueryRepository {
    package func events(
        userId: String, from: Date?, to: Date?, after cursor: RecordedEventCursor?, limit: Int
    ) async throws -> [RecordedEventView] {
        let afterMicros = cursor?.eventMicros
        let afterKey = cursor?.idempotencyKey
        // One scan per outcome, each on a partial index led by the user: accepted events through
        // `events_timeline_idx` (user, site, event time: every accepted event of the user is read from
        // the index and the range filtered there, a few thousand entries a month), refused ones through
        // `events_rejected_user_idx` (user, event time, key). No index of its own for the accepted ones:
        // the merger's inserts would pay for it on every event.
        let rows = try await client.query(
            """
            WITH accepted AS (
                SELECT idempotency_key, device_id, site_id, event_type, event_time, received_at, recorded_at, outcome,
                       reasons, action, session_id, policy_version, risk_score
                FROM events WHERE outcome = 'accepted' AND user_id = \(userId)
                  AND (\(from)::timestamptz IS NULL OR event_time >= \(from)::timestamptz)
                  AND (\(to)::timestamptz IS NULL OR event_time < \(to)::timestamptz)
                  AND (\(afterMicros)::int8 IS NULL OR (event_time, idempotency_key)
                       > ('epoch'::timestamptz + \(afterMicros)::int8 * interval '1 microsecond', \(afterKey)::text))
                ORDER BY event_time, idempotency_key LIMIT \(limit)
            ), rejected AS (
                SELECT idempotency_key, device_id, site_id, event_type, event_time, received_at, recorded_at, outcome,
                       reasons, action, session_id, policy_version, risk_score
                FROM events WHERE outcome = 'rejected' AND user_id = \(userId)
                  AND (\(from)::timestamptz IS NULL OR event_time >= \(from)::timestamptz)
                  AND (\(to)::timestamptz IS NULL OR event_time < \(to)::timestamptz)
                  AND (\(afterMicros)::int8 IS NULL OR (event_time, idempotency_key)
                       > ('epoch'::timestamptz + \(afterMicros)::int8 * interval '1 microsecond', \(afterKey)::text))
                ORDER BY event_time, idempotency_key LIMIT \(limit)
            )
            SELECT idempotency_key, device_id, site_id, event_type, event_time, received_at, recorded_at, outcome,
                   reasons::text, action, session_id, policy_version, risk_score
            FROM (SELECT * FROM accepted UNION ALL SELECT * FROM rejected) e
            ORDER BY event_time, idempotency_key
            LIMIT \(limit)
            """,
            logger: logger
        )
        var events: [RecordedEventView] = []
        for try await (key, device, site, type, eventTime, receivedAt, recordedAt, outcome, reasons, action, session, version, risk)
            in rows.decode((String, String, String?, String, Date, Date, Date, String, String, String, String?, Int?, Double?).self)
        {
            events.append(
                RecordedEventView(
                    idempotencyKey: key, deviceId: device, siteId: site, type: type, eventTime: eventTime, receivedAt: receivedAt,
                    recordedAt: recordedAt, outcome: outcome,
                    reasons: (try? JSONDecoder().decode([String].self, from: Data(reasons.utf8))) ?? [], action: action,
                    sessionId: session, policyVersion: version, riskScore: risk))
        }
        return events
    }
}
