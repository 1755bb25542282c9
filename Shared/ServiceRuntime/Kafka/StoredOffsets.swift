import KafkaClient
import Logging
import PostgresNIO
import ServiceLifecycle

/// Seeks every assigned partition to the offset its owner stored in PostgreSQL with its results
/// (the source of truth; the broker's committed offset may be absent or behind). Partitions without
/// a stored offset start from the group's committed offset, else the earliest.
public struct StoredOffsetsListener: KafkaRebalanceListener {
    let storedOffsets: @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    let logger: Logger

    public init(logger: Logger, storedOffsets: @escaping @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]) {
        self.storedOffsets = storedOffsets
        self.logger = logger
    }

    public func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        let stored = try await storedOffsets(partitions)
        logger.info(
            "seeking assigned partitions to their stored offsets",
            metadata: [
                "assigned": "\(partitions.count)",
                "stored": .string(stored.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")),
            ])
        return stored
    }
}

extension KafkaConsumer {
    /// A group consumer of `topics` for an owner that keeps its offsets in its own database, written in
    /// the same transaction as what it stored: it reads from the earliest offset where it has none and
    /// seeks to the stored ones on every assignment (`StoredOffsetsListener`).
    /// - Parameter background: off the request path: long broker waits, few idle fetches.
    public static func resumingFromStoredOffsets(
        client: KafkaConfiguration, topics: [String], group: ConsumerGroupConfiguration, background: Bool = false, logger: Logger,
        storedOffsets: @escaping @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    ) throws(KafkaError) -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(client: client, group: group, topics: topics, background: background)
        configuration.autoOffsetReset = .earliest
        return try KafkaConsumer(
            configuration: configuration, rebalanceListener: StoredOffsetsListener(logger: logger, storedOffsets: storedOffsets),
            logger: logger)
    }
}

extension KafkaConsumer {
    /// Commits `offsets` to the broker for tools and lag metrics only: an owner that stores its
    /// offsets with its results reads those, so a failure here is logged (debug) and otherwise ignored.
    public func commitInformational(_ offsets: [TopicPartition: Int64], logger: Logger) async {
        do {
            try await commit(offsets)
        } catch {
            logger.debug("committing offsets to the broker failed (informational)", metadata: ["error": .string("\(error)")])
        }
    }
}

/// The `consumer_offsets` table in which an owner stores its consumer offsets with its results, in
/// the schema first on the connection's search path: `group_id`, `topic`, `partition`, `next_offset`,
/// `updated_at`, keyed by (`group_id`, `topic`, `partition`). Each owner's migrations create it.
public enum StoredOffsetsTable {
    /// The stored next offsets of `partitions` for `groupId`; a partition without one is absent.
    public static func load(
        groupId: String, partitions: [TopicPartition], on connection: PostgresConnection, logger: Logger
    ) async throws -> [TopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let rows = try await connection.query(
            """
            SELECT o.topic, o.partition, o.next_offset FROM consumer_offsets o
            JOIN unnest(\(partitions.map(\.topic))::text[], \(partitions.map(\.partition))::int4[]) AS q(topic, partition)
              ON o.topic = q.topic AND o.partition = q.partition
            WHERE o.group_id = \(groupId)
            """, logger: logger)
        var found: [TopicPartition: Int64] = [:]
        for try await (topic, partition, offset) in rows.decode((String, Int32, Int64).self) {
            found[TopicPartition(topic: topic, partition: partition)] = offset
        }
        return found
    }

    /// `load` on a connection of `client`'s pool.
    public static func load(
        groupId: String, partitions: [TopicPartition], client: PostgresClient, logger: Logger
    ) async throws -> [TopicPartition: Int64] {
        try await client.withConnection { try await load(groupId: groupId, partitions: partitions, on: $0, logger: logger) }
    }

    /// Stores `offsets` (the next offset to read per partition) for `groupId`, in the caller's
    /// transaction. They replace the stored ones, not a maximum: after a broker that lost its log the
    /// consumer re-reads a partition from its start, and the offsets must follow it back.
    public static func store(
        groupId: String, _ offsets: [TopicPartition: Int64], on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard !offsets.isEmpty else { return }
        let sorted = offsets.sorted { $0.key < $1.key }
        try await connection.query(
            """
            INSERT INTO consumer_offsets (group_id, topic, partition, next_offset, updated_at)
            SELECT \(groupId), u.topic, u.partition, u.next_offset, now()
            FROM unnest(\(sorted.map(\.key.topic))::text[], \(sorted.map(\.key.partition))::int4[], \(sorted.map(\.value))::int8[])
                 AS u(topic, partition, next_offset)
            ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()
            """, logger: logger)
    }

    /// Deletes `groupId`'s offsets: the broker lost its state and they point into topics that no
    /// longer exist. The next assignment reads each partition from its start; the owner's unique keys
    /// make the re-read harmless. A failure is logged only: the process is about to exit, and offsets
    /// past a partition's new end are still caught when it is assigned.
    public static func forget(groupId: String, client: PostgresClient, logger: Logger) async {
        do {
            try await client.query("DELETE FROM consumer_offsets WHERE group_id = \(groupId)", logger: logger)
            logger.notice("stored offsets forgotten: the broker lost its state", metadata: ["group": .string(groupId)])
        } catch {
            logger.error("forgetting the stored offsets failed", metadata: ["error": .string("\(error)")])
        }
    }
}

/// How a consumer whose offsets live with its results stores a batch: until it is stored. A failure
/// (PostgreSQL away, a serialization conflict) is logged and the same messages are stored again after
/// 100 ms, doubling up to 5 s, so nothing is skipped; `nil` when the process shuts down first.
public enum BatchStoreRetry {
    public static func untilStored<Result: Sendable>(
        messages: Int, logger: Logger, onFailure: () -> Void = {}, _ store: () async throws -> Result
    ) async -> Result? {
        var backoff = Duration.milliseconds(100)
        while true {
            do {
                return try await store()
            } catch {
                onFailure()
                logger.error(
                    "storing a batch failed; retrying it",
                    metadata: ["error": .string(String(describing: error)), "messages": "\(messages)", "retryIn": .string("\(backoff)")])
                if Task.isCancelled || Task.isShuttingDownGracefully { return nil }
                try? await Task.sleep(for: backoff)
                if Task.isCancelled { return nil }
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}
