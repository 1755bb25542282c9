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
        // One scan per outcome, each on a partial index led by the user, each reading at most a page: refused
        // events through `events_rejected_user_idx` (user, event time, key); accepted ones through
        // `events_timeline_idx` (user, site, event time), one site at a time (the user's timelines name
        // them), so each site's events come in time order and a page reads a page of each, however many
        // months the user has (read for the whole user, they were all sorted on every page: seconds at two
        // years of heartbeats). No index of its own for the accepted ones: the merger's inserts would pay
        // for it on every event. The cursor's time is also a plain bound, which the index can start from.
        let afterTime = afterMicros.map { Date(timeIntervalSince1970: Double($0) / 1_000_000) }
        let rows = try await client.query(
            """
            WITH accepted AS (
                SELECT a.* FROM timelines t
                CROSS JOIN LATERAL (
                    SELECT idempotency_key, device_id, site_id, event_type, event_time, received_at, recorded_at, outcome,
                           reasons, action, session_id, policy_version, risk_score
                    FROM events WHERE outcome = 'accepted' AND user_id = \(userId) AND site_id = t.site_id
                      AND (\(from)::timestamptz IS NULL OR event_time >= \(from)::timestamptz)
                      AND (\(to)::timestamptz IS NULL OR event_time < \(to)::timestamptz)
                      AND (\(afterTime)::timestamptz IS NULL OR event_time >= \(afterTime)::timestamptz - interval '1 microsecond')
                      AND (\(afterMicros)::int8 IS NULL OR (event_time, idempotency_key)
                           > ('epoch'::timestamptz + \(afterMicros)::int8 * interval '1 microsecond', \(afterKey)::text))
                    ORDER BY event_time, idempotency_key LIMIT \(limit)
                ) a
                WHERE t.user_id = \(userId)
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
