import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import ServiceRuntime
import SessionMergerCore

/// Deletes recorded events older than the retention (`MERGER_EVENT_RETENTION_DAYS`) once an hour, a
/// chunk per statement, so the events table (each row an audit copy of what a phone sent: RSSI series,
/// motion, location) does not grow for ever. Sessions and daily attendance stay: they are the record.
///
/// An event goes only when nothing can need it again:
/// - it reached the gateway before the cutoff, and its event time is before the cutoff too;
/// - an accepted event lies before its timeline's watermark (the timeline has forgotten it and never
///   reads it back); a timeline that still holds such old events is compacted first, which moves its
///   watermark past what no later event can change. A session still open (a phone left in range for
///   months) keeps its events. A refused event joins no timeline.
/// `merger.session_keys` stays (a row per session; a session open for months still needs its key's site).
package final class EventRetention: Service, Sendable {
    private let client: PostgresClient
    private let configuration: SessionMergerConfiguration
    private let retention: Duration
    private let logger: Logger
    private let clock: @Sendable () -> Date
    /// Rows per DELETE statement (its own transaction), so no statement holds locks for long.
    package static let chunk = 5_000
    package static let interval: Duration = .seconds(3_600)

    /// Timelines compacted per run, and per transaction, so that their events can go.
    package static let timelinesPerRun = 2_000
    package static let timelinesPerTransaction = 100

    /// `configuration.eventRetention` is how long events are kept; `nil` keeps them for ever (the service
    /// then waits for the shutdown and does nothing).
    package init(
        client: PostgresClient, configuration: SessionMergerConfiguration, logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = client
        self.configuration = configuration
        self.retention = configuration.eventRetention ?? .zero
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
        guard retention > .zero else { return 0 }
        let cutoff = now.addingTimeInterval(-TimeInterval(retention.components.seconds))
        try await compactTimelinesHolding(before: cutoff, now: now)
        var events = 0
        while !Task.isCancelled {
            let deleted = try await PostgresFailure.unwrapping {
                try await client.query(
                    """
                    WITH \(unescaped: Self.watermarks), doomed AS (
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

    /// Each timeline's watermark (`marks`): events before it are never read back. A row in the older
    /// whole-state format has none here.
    static let watermarks = """
        marks AS (
            SELECT user_id, site_id, to_timestamp(((state::json -> 'header' ->> 'watermark')::int8) / 1000.0) AS watermark
            FROM timelines
            WHERE state LIKE '{"format":%'
        )
        """

    /// A timeline is compacted when it is written with more than `compactionThreshold` events, so one that
    /// stays small (a part-timer, a site visited now and then) or is no longer written (someone who left)
    /// would keep its oldest events for ever. The timelines still holding accepted events older than the
    /// cutoff are compacted here first (`compact(now:)`: what no later event can change is forgotten),
    /// up to `timelinesPerRun` of them a run, `timelinesPerTransaction` at a time, so their events can go.
    private func compactTimelinesHolding(before cutoff: Date, now: Date) async throws {
        let policy = configuration.policy
        let logger = self.logger
        // A timeline no longer written is measured from at most this long ago, so that its events before
        // the cutoff are forgotten (its horizon ends by the cutoff) rather than kept up to the longest
        // pipeline wait longer than the retention promises.
        let longestWait = min(SessionPolicy.longestPipelineWait, now.timeIntervalSince(cutoff) - policy.horizon)
        let rows = try await PostgresFailure.unwrapping {
            try await client.query(
                """
                WITH \(unescaped: Self.watermarks)
                SELECT DISTINCT e.user_id, e.site_id
                FROM events e
                LEFT JOIN marks m ON m.user_id = e.user_id AND m.site_id = e.site_id
                WHERE e.outcome = 'accepted' AND e.received_at < \(cutoff) AND e.event_time < \(cutoff)
                  AND (m.watermark IS NULL OR e.event_time >= m.watermark)
                LIMIT \(Self.timelinesPerRun)
                """,
                logger: logger
            ).collect()
        }
        var keys: [MergerStore.TimelineKey] = []
        for row in rows {
            let (user, site) = try row.decode((String, String).self)
            keys.append(MergerStore.TimelineKey(userId: user, siteId: site))
        }
        for start in stride(from: 0, to: keys.count, by: Self.timelinesPerTransaction) where !Task.isCancelled {
            let chunk = Array(keys[start..<min(keys.count, start + Self.timelinesPerTransaction)])
            try await PostgresFailure.unwrapping {
                try await client.withTransaction(logger: logger) { connection in
                    var timelines = try await MergerStore.lockTimelines(chunk, policy: policy, on: connection, logger: logger)
                    var changes: [SessionDelta] = []
                    var moved: [MergerStore.TimelineKey: LoadedTimeline] = [:]
                    for key in timelines.keys.sorted() {
                        let before = timelines[key]!.timeline.watermark
                        let compacted = timelines[key]!.timeline.compact(now: now, longestWait: longestWait).changes
                        changes += compacted
                        // Saved when anything changed: the timeline records the version each session was
                        // published at, so changes published here without it would be published again,
                        // under the same versions, by the next batch. A session still open that holds the
                        // watermark, with nothing else to report, leaves nothing to write.
                        if timelines[key]!.timeline.watermark != before || !compacted.isEmpty { moved[key] = timelines[key]! }
                    }
                    try await MergerStore.saveTimelines(moved, on: connection, logger: logger)
                    try await MergerStore.applySessionChanges(changes, changedAt: now, on: connection, logger: logger)
                }
            }
        }
    }
}
