import AttendanceProtocol
import Foundation
import Logging
import PostgresNIO
import SessionMergerCore

/// A session as the admin API shows it (a `merger.sessions` row).
package struct SessionRecordView: Codable, Hashable, Sendable {
    package var sessionId: String
    package var userId: String
    package var siteId: String
    package var status: String
    package var checkInAt: Date
    package var lastSeenAt: Date
    package var checkOutAt: Date?
    package var closeReason: String?
    package var sessionKeys: [String]
    package var version: Int
    package var updatedAt: Date
    /// For a superseded session: the session its events joined.
    package var supersededBy: String?
    package var eventCount: Int

    /// The span daily attendance counts (a soft exit counts as ended at its check-out).
    package var interval: AttendanceInterval {
        let open = status == SessionStatus.open.rawValue
        return AttendanceInterval(
            sessionId: sessionId, userId: userId, siteId: siteId, start: checkInAt,
            end: open ? lastSeenAt : (checkOutAt ?? lastSeenAt), isOpen: open,
            checkedOut: status == SessionStatus.closed.rawValue && closeReason == SessionCloseReason.checkOut.rawValue)
    }
}

/// Which sessions to list. At least one of `userId` / `siteId`.
package struct SessionFilter: Sendable, Hashable {
    package var userId: String?
    package var siteId: String?
    /// Sessions whose check-in is at or after `from` and before `to`.
    package var from: Date?
    package var to: Date?
    package var status: SessionStatus?
    package var includeSuperseded = false
}

/// Keyset position: the last (check-in, session id) of the previous page.
package struct SessionCursor: Sendable, Hashable {
    package var checkInAt: Date
    package var sessionId: String

    /// The check-in as whole milliseconds since 1970, as `check_in_at` holds it.
    package var checkInMillis: Int64 { PositionCursorCoding.sessions.units(checkInAt) }
}

/// The reads of the admin API.
package protocol SessionQueryRepository: Sendable {
    /// Sessions matching `filter`, ordered by (check-in, id), after `cursor`, at most `limit`.
    func sessions(_ filter: SessionFilter, after cursor: SessionCursor?, limit: Int) async throws -> [SessionRecordView]
    /// The sessions of a site (and user) that overlap `[start, end)`, superseded ones left out, at most `limit`.
    func sessionsOverlapping(siteId: String, userId: String?, start: Date, end: Date, limit: Int) async throws -> [SessionRecordView]
    /// The events recorded for `userId` (accepted and refused) whose event time is in `[from, to)`,
    /// ordered by (event time, key), after `cursor`, at most `limit`.
    func events(userId: String, from: Date?, to: Date?, after cursor: RecordedEventCursor?, limit: Int) async throws -> [RecordedEventView]
    /// Stored offsets of `groupId`, the outbox backlog and the timelines due for the idle sweep.
    func pipelineStatus(groupId: String, now: Date) async throws -> PipelineStatus
}

/// The pipeline's progress, for operators.
package struct PipelineStatus: Codable, Hashable, Sendable {
    package struct PartitionOffset: Codable, Hashable, Sendable {
        package var topic: String
        package var partition: Int
        package var nextOffset: Int64
        package var updatedAt: Date
    }

    package var groupId: String
    package var offsets: [PartitionOffset]
    /// Session changes committed but not yet acknowledged by the broker.
    package var outboxBacklog: Int
    /// Timelines the idle sweep has work for now.
    package var dueTimelines: Int
}

/// `SessionQueryRepository` over `merger.sessions`.
package struct PostgresSessionQueryRepository: SessionQueryRepository {
    /// How far before a window's start an ordinary session overlapping it checked in (bounds the index
    /// scan); a longer one is found through `sessions_long_idx`, which holds only those.
    package static let longestSession: TimeInterval = 31 * 86_400

    let client: PostgresClient
    let logger: Logger

    package func sessions(_ filter: SessionFilter, after cursor: SessionCursor?, limit: Int) async throws -> [SessionRecordView] {
        let status = filter.status?.rawValue
        // The cursor's time as whole milliseconds since 1970, as `check_in_at` holds it: a `Date` bound
        // as timestamptz is truncated to the microsecond (…00.074 becomes …00.073999), and the row the
        // cursor names would come back on the next page.
        let afterMillis = cursor?.checkInMillis
        let afterId = cursor?.sessionId
        let rows = try await client.query(
            """
            SELECT session_id, user_id, site_id, status, check_in_at, last_seen_at, check_out_at, close_reason,
                   session_keys::text, version, updated_at, superseded_by, event_count
            FROM sessions
            WHERE (\(filter.userId)::text IS NULL OR user_id = \(filter.userId)::text)
              AND (\(filter.siteId)::text IS NULL OR site_id = \(filter.siteId)::text)
              AND (\(filter.from)::timestamptz IS NULL OR check_in_at >= \(filter.from)::timestamptz)
              AND (\(filter.to)::timestamptz IS NULL OR check_in_at < \(filter.to)::timestamptz)
              AND (\(status)::text IS NULL OR status = \(status)::text)
              AND (\(filter.includeSuperseded) OR close_reason IS DISTINCT FROM 'superseded')
              AND (\(afterMillis)::int8 IS NULL
                   OR (check_in_at, session_id) > ('epoch'::timestamptz + \(afterMillis)::int8 * interval '1 millisecond', \(afterId)::text))
            ORDER BY check_in_at, session_id
            LIMIT \(limit)
            """,
            logger: logger
        )
        return try await Self.decode(rows)
    }

    package func sessionsOverlapping(
        siteId: String, userId: String?, start: Date, end: Date, limit: Int
    ) async throws -> [SessionRecordView] {
        let earliest = start.addingTimeInterval(-Self.longestSession)
        let rows = try await client.query(
            """
            SELECT session_id, user_id, site_id, status, check_in_at, last_seen_at, check_out_at, close_reason,
                   session_keys::text, version, updated_at, superseded_by, event_count
            FROM sessions
            WHERE site_id = \(siteId)
              AND (\(userId)::text IS NULL OR user_id = \(userId)::text)
              AND check_in_at < \(end)
              AND COALESCE(check_out_at, last_seen_at) >= \(start)
              AND (check_in_at >= \(earliest)
                   OR COALESCE(check_out_at, last_seen_at) - check_in_at > interval '31 days')
              AND close_reason IS DISTINCT FROM 'superseded'
            ORDER BY user_id, check_in_at, session_id
            LIMIT \(limit)
            """,
            logger: logger
        )
        return try await Self.decode(rows)
    }

    package func pipelineStatus(groupId: String, now: Date) async throws -> PipelineStatus {
        let rows = try await client.query(
            """
            SELECT topic, partition, min(next_offset), max(updated_at) FROM consumer_offsets WHERE group_id = \(groupId)
            GROUP BY topic, partition ORDER BY topic, partition
            """,
            logger: logger)
        var offsets: [PipelineStatus.PartitionOffset] = []
        for try await (topic, partition, next, updated) in rows.decode((String, Int, Int64, Date).self) {
            offsets.append(PipelineStatus.PartitionOffset(topic: topic, partition: partition, nextOffset: next, updatedAt: updated))
        }
        var backlog = 0, due = 0
        let counts = try await client.query(
            """
            SELECT (SELECT count(*)::int FROM session_change_outbox),
                   (SELECT count(*)::int FROM timelines WHERE next_check_at IS NOT NULL AND next_check_at <= \(now))
            """,
            logger: logger)
        for try await (b, d) in counts.decode((Int, Int).self) {
            backlog = b
            due = d
        }
        return PipelineStatus(groupId: groupId, offsets: offsets, outboxBacklog: backlog, dueTimelines: due)
    }

    static func decode(_ rows: PostgresRowSequence) async throws -> [SessionRecordView] {
        var sessions: [SessionRecordView] = []
        for try await (id, user, site, status, checkIn, lastSeen, checkOut, reason, keys, version, updated, supersededBy, count)
            in rows.decode((String, String, String, String, Date, Date, Date?, String?, String, Int, Date, String?, Int).self)
        {
            sessions.append(
                SessionRecordView(
                    sessionId: id, userId: user, siteId: site, status: status, checkInAt: checkIn, lastSeenAt: lastSeen,
                    checkOutAt: checkOut, closeReason: reason,
                    sessionKeys: (try? JSONDecoder().decode([String].self, from: Data(keys.utf8))) ?? [],
                    version: version, updatedAt: updated, supersededBy: supersededBy, eventCount: count))
        }
        return sessions
    }
}
