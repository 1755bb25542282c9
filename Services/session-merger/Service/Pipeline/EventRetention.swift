import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import ServiceRuntime

/// Deletes recorded events older than the retention (`MERGER_EVENT_RETENTION_DAYS`) once an hour, a
/// chunk per statement, so the events table (each row an audit copy of what a phone sent: RSSI series,
/// motion, location) does not grow for ever. Sessions and daily attendance stay: they are the record.
///
/// An event goes only when nothing can need it again:
/// - it reached the gateway before the cutoff, and its event time is before the cutoff too;
/// - an accepted event lies before its timeline's watermark (the timeline has forgotten it and never
///   reads it back). A timeline with no watermark yet, or stored in the older whole-state format, keeps
///   all of its events: they are how it is rebuilt. A refused event joins no timeline.
/// `merger.session_keys` stays (a row per session; a session open for months still needs its key's site).
package final class EventRetention: Service, Sendable {
    private let client: PostgresClient
    private let retention: Duration
    private let logger: Logger
    private let clock: @Sendable () -> Date
    /// Rows per DELETE statement (its own transaction), so no statement holds locks for long.
    package static let chunk = 5_000
    package static let interval: Duration = .seconds(3_600)

    /// - Parameter retention: how long events are kept; `nil` keeps them for ever (the service then
    ///   waits for the shutdown and does nothing).
    package init(client: PostgresClient, retention: Duration?, logger: Logger, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.client = client
        self.retention = retention ?? .zero
        self.logger = logger
        self.clock = clock
    }

    package func run() async throws {
        guard retention > .zero else {
            try? await gracefulShutdown()
            return
        }
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                let events = try await prune(now: clock())
                if events > 0 { logger.info("deleted events past the retention", metadata: ["events": "\(events)"]) }
            } catch {
                logger.error(
                    "deleting events past the retention failed; trying again next hour",
                    metadata: ["error": .string(PostgresFailure.description(of: error))])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.interval) }
        }
    }

    /// Deletes the events past the retention at `now`, a chunk at a time. - Returns: how many.
    @discardableResult
    package func prune(now: Date) async throws -> Int {
        let cutoff = now.addingTimeInterval(-TimeInterval(retention.components.seconds))
        var events = 0
        while !Task.isCancelled {
            let deleted = try await PostgresFailure.unwrapping {
                try await client.query(
                    """
                    WITH marks AS (
                        SELECT user_id, site_id,
                               to_timestamp(((state::json -> 'header' ->> 'watermark')::int8) / 1000.0) AS watermark
                        FROM timelines
                        WHERE state LIKE '{"format":%'
                    ), doomed AS (
                        SELECT e.idempotency_key
                        FROM events e
                        LEFT JOIN marks m ON m.user_id = e.user_id AND m.site_id = e.site_id
                        WHERE e.received_at < \(cutoff) AND e.event_time < \(cutoff)
                          AND (e.outcome = 'rejected' OR e.event_time < m.watermark)
                        LIMIT \(Self.chunk)
                    )
                    DELETE FROM events WHERE idempotency_key IN (SELECT idempotency_key FROM doomed)
                    RETURNING 1
                    """,
                    logger: logger
                ).collect().count
            }
            events += deleted
            if deleted < Self.chunk { break }
        }
        return events
    }
}
