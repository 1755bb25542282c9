import AttendanceProtocol
import KafkaClient

/// Where the gateway hands accepted input: `attendance.events.raw` and `device.telemetry`. Each
/// call returns once the message is durable (the broker's delivery report) and throws otherwise,
/// in which case the device is answered 503 and keeps the event.
package protocol GatewayPublisher: Sendable {
    /// `payload` is the envelope's payload already encoded (for its fingerprint): produced as is.
    func publish(_ envelope: RawEventEnvelope, payload: PreEncoded<RawEventPayload>) async throws
    func publish(_ batch: DeviceTelemetryBatch) async throws
}

/// The idempotent `KafkaProducer` (acks=all) onto the configured topics, keyed as the protocol
/// says (raw events by user id, telemetry by device id).
package struct KafkaGatewayPublisher: GatewayPublisher {
    let producer: KafkaProducer
    let topics: GatewayTopics

    package func publish(_ envelope: RawEventEnvelope, payload: PreEncoded<RawEventPayload>) async throws {
        let value = try envelope.wireBytes(payload: payload)
        try await producer.send(KafkaOutgoingMessage(topic: topics.rawEvents, key: envelope.partitionKey.value, value: value))
    }

    package func publish(_ batch: DeviceTelemetryBatch) async throws {
        try await send(batch, topic: topics.deviceTelemetry)
    }

    private func send<M: TopicMessage>(_ message: M, topic: String) async throws {
        let value = try ProtocolCodec.wire.encode(message)
        try await producer.send(KafkaOutgoingMessage(topic: topic, key: message.partitionKey.value, value: value))
    }
}
