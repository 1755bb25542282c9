import AttendanceProtocol
import Foundation
import KafkaClient
import Logging

/// Where a consumer's undecodable messages go (the DLQ topic in production, a list in tests). The
/// owners send them before their batch's transaction commits, so a crash can duplicate a dead letter
/// but never lose one.
public protocol DeadLetterSink: Sendable {
    func send(_ letters: [DeadLetter]) async throws
}

/// Sends dead letters to the DLQ topic and waits for their delivery reports.
public struct KafkaDeadLetterSink: DeadLetterSink {
    let producer: KafkaProducer
    let topic: String

    public init(producer: KafkaProducer, topic: String) {
        self.producer = producer
        self.topic = topic
    }

    public func send(_ letters: [DeadLetter]) async throws {
        let messages = try letters.map { letter in
            KafkaOutgoingMessage(topic: topic, key: letter.partitionKey.value, value: try ProtocolCodec.wire.encode(letter))
        }
        let reports = try await producer.sendBatch(messages)
        if let failed = reports.first(where: { !$0.isDelivered }) {
            throw failed.error ?? KafkaError(kind: .broker, message: "dead letter not delivered", isFatal: false, isRetriable: true)
        }
    }
}

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

extension DeadLetter {
    /// The dead letter for a polled record that has no value: nothing to decode.
    public init(emptyRecord message: KafkaMessage, consumer: String, failedAt: Date) {
        self.init(
            sourceTopic: message.topic, partition: message.partition, offset: message.offset, key: message.keyString,
            payload: Data(), reason: .decodeFailed, detail: "the record has no value", consumer: consumer, failedAt: failedAt)
    }

    /// The dead letter for a polled record whose value did not decode.
    public init(undecodable message: KafkaMessage, error: ProtocolDecodingError, consumer: String, failedAt: Date) {
        self.init(
            sourceTopic: message.topic, partition: message.partition, offset: message.offset, key: message.keyString,
            payload: Data(message.value ?? []), decodingError: error, consumer: consumer, failedAt: failedAt)
    }
}
