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
        let messages = letters.map { KafkaOutgoingMessage(deadLetter: $0, topic: topic) }
        let reports = try await producer.sendBatch(messages)
        if let failed = reports.first(where: { !$0.isDelivered }) {
            throw failed.error ?? KafkaError(kind: .broker, message: "dead letter not delivered", isFatal: false, isRetriable: true)
        }
    }
}

extension KafkaOutgoingMessage {
    /// A dead letter as the DLQ holds it, keyed by `DeadLetter.partitionKey` (the original key, or the
    /// source partition for a keyless record). A dead letter holds bytes, strings and numbers only, so
    /// it always encodes.
    public init(deadLetter letter: DeadLetter, topic: String) {
        self.init(topic: topic, key: letter.partitionKey.value, value: (try? ProtocolCodec.wire.encode(letter)) ?? [])
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
