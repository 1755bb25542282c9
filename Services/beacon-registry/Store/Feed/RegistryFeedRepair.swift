import AttendanceProtocol
import BeaconRegistryCore
import KafkaClient
import Logging
import PostgresNIO

/// Refills `registry.changes` when the broker lost it.
///
/// The feed is the only way the gateway, the policy service and the merger learn devices, beacons
/// and sites, and a process that starts reads it from the beginning. If the topic comes back empty
/// (the local stack's Tansu keeps topics in memory and forgets them on restart; a deleted and
/// recreated topic), every process started afterwards would know nothing and refuse every device.
/// The outbox keeps every change ever published, so the latest row of each entity is queued again
/// and the publisher produces it with its original version (the row id): readers that still have
/// it skip it, readers that start afresh rebuild the whole registry.
///
/// "Lost" is read from the topic's high watermark: offsets never go back, so a topic that was ever
/// written has a high watermark above 0 even after compaction. An empty topic while the outbox has
/// published rows can only be a topic that lost its records.
package enum RegistryFeedRepair {
    package static func isLost(highWatermark: Int64, outboxHasPublishedRows: Bool) -> Bool {
        highWatermark == 0 && outboxHasPublishedRows
    }

    /// Checks the feed and, when it is lost, queues it again. Runs once, at the registry's start.
    /// - Returns: the outbox rows queued again (0 when the feed is intact).
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
        let queued = try await requeueLatest(client: client, logger: logger)
        // 0: an earlier start queued them and stopped before the publisher produced the first.
        guard queued > 0 else { return 0 }
        logger.warning(
            "the registry feed topic was empty although changes had been published; the latest change of every entity is queued again",
            metadata: [
                "topic": .string(topic), "rows": "\(queued)",
            ])
        return queued
    }

    /// Marks the latest published outbox row of every entity unpublished (an entity whose latest
    /// row still waits is published anyway).
    /// - Returns: the rows marked.
    static func requeueLatest(client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query(
            """
            WITH latest AS (
                SELECT max(id) AS id FROM change_outbox GROUP BY entity_type, entity_id
            ), marked AS (
                UPDATE change_outbox o SET published_at = NULL
                FROM latest WHERE o.id = latest.id AND o.published_at IS NOT NULL
                RETURNING 1
            )
            SELECT count(*)::int FROM marked
            """,
            logger: logger)
        var marked = 0
        for try await count in rows.decode(Int.self) { marked = count }
        return marked
    }
}
