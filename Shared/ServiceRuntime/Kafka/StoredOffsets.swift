import KafkaClient
import Logging

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
    /// A group consumer for an owner that keeps its offsets in its own database, written in the same
    /// transaction as what it stored: it reads from the earliest offset where it has none and seeks to
    /// the stored ones on every assignment (`StoredOffsetsListener`).
    public static func resumingFromStoredOffsets(
        _ configuration: KafkaConsumerConfiguration, maxBatchSize: Int, pollTimeoutMs: Int, logger: Logger,
        storedOffsets: @escaping @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    ) throws(KafkaError) -> KafkaConsumer {
        var configuration = configuration
        configuration.maxBatchSize = maxBatchSize
        configuration.pollTimeoutMs = pollTimeoutMs
        configuration.autoOffsetReset = .earliest
        return try KafkaConsumer(
            configuration: configuration, rebalanceListener: StoredOffsetsListener(logger: logger, storedOffsets: storedOffsets),
            logger: logger)
    }
}
