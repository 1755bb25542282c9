import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime

/// Refills `registry.changes` when the broker lost it.
///
/// The feed is the only way the gateway, the policy service and the merger learn devices, beacons
/// and sites, and a process that starts reads it from the beginning. If the topic comes back empty
/// (the local stack's Tansu keeps topics in memory and forgets them on restart; a deleted and
/// recreated topic), every process started afterwards would know nothing and refuse every device.
/// The outbox keeps each entity's latest published change (the relay deletes the earlier ones), so
/// that row is copied as a new row and the publisher produces the copies in order, framed by two markers (`RegistryFeedRefill`):
/// readers that still have an entity apply the same content again, readers that start afresh
/// rebuild the whole registry and know it is whole once they read the end marker.
///
/// "Lost" is read from the topic's high watermark: offsets never go back, so a topic that was ever
/// written has a high watermark above 0 even after compaction. An empty topic while the outbox has
/// published rows can only be a topic that lost its records.
package enum RegistryFeedRepair {
    package static func isLost(highWatermark: Int64, outboxHasPublishedRows: Bool) -> Bool {
        highWatermark == 0 && outboxHasPublishedRows
    }

    /// Checks the feed and, when it is lost, queues it again. Runs once, at the registry's start.
    /// - Returns: the entities queued again (0 when the feed is intact).
    @discardableResult
    package static func repairIfLost(
        admin: KafkaAdmin, client: PostgresClient, topic: String = Topic.registryChanges.name, logger: Logger
    ) async throws -> Int {
        let marks = try await admin.watermarks(TopicPartition(topic: topic, partition: 0))
        let published = try await client.query(
            "SELECT EXISTS (SELECT 1 FROM change_outbox WHERE published_at IS NOT NULL)", logger: logger)
        var hasPublished = false
        for try await exists in published.decode(Bool.self) { hasPublished = exists }
        guard isLost(highWatermark: marks.high, outboxHasPublishedRows: hasPublished) else { return 0 }
        let queued = try await queueRefill(client: client, logger: logger)
        // 0: an earlier start queued a refill and stopped before the publisher produced its first row.
        guard queued > 0 else { return 0 }
        logger.warning(
            "the registry feed topic was empty although changes had been published; the latest change of every entity is queued again",
            metadata: [
                "topic": .string(topic), "entities": "\(queued)",
            ])
        return queued
    }

    /// True when the feed carries a version the outbox has not reached: the database went back in time
    /// (restored from a backup, or replaced) while the topic kept what was published since.
    package static func isRewound(lastPublishedVersion: Int64?, outboxLastId: Int64) -> Bool {
        guard let lastPublishedVersion else { return false }
        return lastPublishedVersion > outboxLastId
    }

    /// The version of the feed's last record (rows are produced in id order onto one partition, and
    /// compaction keeps a partition's last record); nil for an empty topic or one whose last records
    /// are tombstones.
    package static func lastPublishedVersion(admin: KafkaAdmin, reader: KafkaPartitionReader, topic: String) async throws -> Int64? {
        let tp = TopicPartition(topic: topic, partition: 0)
        let marks = try await admin.watermarks(tp)
        guard marks.high > marks.low else { return nil }
        // From the last offset on; a broker whose high watermark is its last batch's base gives the batch.
        let messages = try await reader.read(
            tp, from: max(marks.low, marks.high - 1), maxMessages: 100_000, timeoutMs: 10_000, quietMs: 200)
        var version: Int64?
        for message in messages {
            guard let value = message.value else { continue }
            // Only the version is read: a record of a later registry (a newer schema version, during a
            // rolling upgrade or after a rollback) still has one, and refusing it would stop this start.
            let change = try ProtocolCodec.wire.decode(VersionOfAChange.self, from: value)
            version = max(version ?? change.version, change.version)
        }
        return version
    }

    /// The one member of a feed record the start's check needs.
    private struct VersionOfAChange: Decodable {
        let version: Int64
    }

    /// Checks that the outbox is ahead of the feed and, when the database went back in time, moves the
    /// outbox's ids past the feed's last version and queues the latest change of every entity again. A
    /// consumer keeps the highest version it has seen of an entity, so without this every change made
    /// after the restore (a revoked device, a new beacon) would carry a version its caches hold as stale.
    /// Entities the feed knows and the restored database does not stay in the caches (the runbook says
    /// so). Runs once, at the registry's start.
    /// - Returns: the entities queued again (0 when the outbox is ahead of the feed).
    @discardableResult
    package static func repairIfRewound(
        admin: KafkaAdmin, reader: KafkaPartitionReader, client: PostgresClient, topic: String = Topic.registryChanges.name,
        logger: Logger
    ) async throws -> Int {
        let published = try await lastPublishedVersion(admin: admin, reader: reader, topic: topic)
        let last = try await client.query(Self.lastIdQuery, logger: logger)
        var outboxLastId: Int64 = 0
        for try await value in last.decode(Int64.self) { outboxLastId = value }
        guard let published, isRewound(lastPublishedVersion: published, outboxLastId: outboxLastId) else { return 0 }
        let queued = try await queueRefill(client: client, idsAbove: published, logger: logger)
        logger.warning(
            "the registry feed carries versions the database never reached (restored from a backup?): ids moved past them and the latest change of every entity queued again",
            metadata: ["topic": .string(topic), "feedVersion": "\(published)", "outboxLastId": "\(outboxLastId)", "entities": "\(queued)"])
        return queued
    }

    /// The broker lost its state while this registry ran (its broker watch saw a topic's end go back):
    /// the feed went with it, and what this process still publishes before it exits may reach a topic
    /// another service created again, which the next start's empty-topic check would take for intact.
    /// So the refill is queued now, and the next start's publisher produces it. PostgreSQL away for a
    /// moment (the whole stack restarting) is retried for up to a minute; then the failure is logged
    /// critical (the process is about to exit; the start's check remains).
    package static func queueRefillAfterLoss(client: PostgresClient, logger: Logger, retryFor: Duration = .seconds(60)) async {
        let queued = await retrying("queueing the feed's refill after the broker lost its state", within: retryFor, logger: logger) {
            try await queueRefill(client: client, logger: logger)
        }
        switch queued {
        case .success(let entities):
            logger.warning(
                "the broker lost its state: the latest change of every entity is queued again for the feed",
                metadata: ["entities": "\(entities)"])
        case .failure(let error):
            logger.critical(
                "queueing the feed's refill after the broker lost its state failed; services started later may miss entities",
                metadata: ["error": .string(PostgresFailure.description(of: error))])
        }
    }

    /// In one transaction: the start marker, a copy of the latest row of every entity (a delete
    /// stays a delete; the copy keeps the change's time) in the order they were written, and the end
    /// marker naming the start. Nothing when a refill is already queued and not yet published.
    /// - Returns: the entities queued.
    /// The last id the outbox's sequence gave (0 before the first).
    static let lastIdQuery: PostgresQuery = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM change_outbox_id_seq"

    /// - Parameter idsAbove: the refill's rows (and every later change) get ids above this one.
    package static func queueRefill(client: PostgresClient, idsAbove: Int64? = nil, logger: Logger) async throws -> Int {
        let feed = RegistryFeedRefill.entityType, started = RegistryFeedRefill.startedId, ended = RegistryFeedRefill.endedId
        return try await client.withTransaction(logger: logger) { db in
            // One refill at a time, even with several registry replicas starting together.
            try await db.query("LOCK TABLE change_outbox IN SHARE ROW EXCLUSIVE MODE", logger: logger)
            if let idsAbove {
                // Never backwards (another replica may have moved it already): no writer can take an id
                // while the lock is held.
                try await db.query(
                    "SELECT setval('change_outbox_id_seq', greatest((\(unescaped: Self.lastIdQuery.sql)), \(idsAbove)))", logger: logger)
            }
            let queuedBefore = try await db.query(
                """
                SELECT EXISTS (SELECT 1 FROM change_outbox
                WHERE entity_type = \(feed) AND entity_id = \(started) AND published_at IS NULL)
                """, logger: logger)
            for try await exists in queuedBefore.decode(Bool.self) where exists { return 0 }
            let start = try await db.query(
                "INSERT INTO change_outbox (entity_type, entity_id, op, payload) VALUES (\(feed), \(started), 'upsert', '{}') RETURNING id",
                logger: logger)
            var startId: Int64 = 0
            for try await id in start.decode(Int64.self) { startId = id }
            let copied = try await db.query(
                """
                WITH latest AS (
                    SELECT max(id) AS id FROM change_outbox
                    WHERE entity_type <> \(feed) AND id < \(startId) GROUP BY entity_type, entity_id
                ), copied AS (
                    INSERT INTO change_outbox (entity_type, entity_id, op, payload, created_at)
                    SELECT o.entity_type, o.entity_id, o.op, o.payload, o.created_at FROM change_outbox o JOIN latest USING (id)
                    ORDER BY o.id
                    RETURNING 1
                )
                SELECT count(*)::int FROM copied
                """, logger: logger)
            var count = 0
            for try await rows in copied.decode(Int.self) { count = rows }
            let end = "{\"\(RegistryFeedRefill.startedVersionField)\": \(startId)}"
            try await db.query(
                "INSERT INTO change_outbox (entity_type, entity_id, op, payload) VALUES (\(feed), \(ended), 'upsert', \(end)::jsonb)",
                logger: logger)
            return count
        }
    }
}
