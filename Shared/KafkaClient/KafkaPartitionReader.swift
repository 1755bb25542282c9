import CRdKafka
import Dispatch
import Logging

/// Reads a partition from an offset without joining a group: for diagnostics, tooling and the
/// consumer's log-end probe. Each call makes a short-lived handle; not for steady consumption.
public struct KafkaPartitionReader: Sendable {
    let properties: [String: String]
    let logger: Logger

    public init(configuration: KafkaConfiguration, logger: Logger) {
        self.init(properties: configuration.baseProperties.merging(configuration.properties) { _, override in override }, logger: logger)
    }

    init(properties: [String: String], logger: Logger) {
        var props = properties
        // A consumer handle needs a group id, but assign() never joins the group.
        props["group.id"] = props["group.id"] ?? "partition-reader"
        props["enable.auto.commit"] = "false"
        props["enable.partition.eof"] = "false"
        self.properties = props
        self.logger = logger
    }

    /// Up to `maxMessages` messages from `offset` on. Stops when the partition stays quiet for
    /// `quietMs` after the first message, or at `timeoutMs`.
    public func read(
        _ tp: TopicPartition, from offset: Int64, maxMessages: Int = 1, timeoutMs: Int = 5_000, quietMs: Int = 100
    ) async throws(KafkaError) -> [KafkaMessage] {
        let properties = self.properties
        let logger = self.logger
        let result: Result<[KafkaMessage], KafkaError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    returning: Result { () throws(KafkaError) in
                        try Self.readBlocking(
                            tp, from: offset, maxMessages: maxMessages, timeoutMs: timeoutMs, quietMs: quietMs, properties: properties,
                            logger: logger)
                    })
            }
        }
        return try result.get()
    }

    static func readBlocking(
        _ tp: TopicPartition, from offset: Int64, maxMessages: Int, timeoutMs: Int, quietMs: Int,
        properties: [String: String], logger: Logger
    ) throws(KafkaError) -> [KafkaMessage] {
        let handle = try RdKafkaHandle(
            kind: RD_KAFKA_CONSUMER, properties: properties, callbacks: RdKafkaCallbacks(logger: logger), label: "reader")
        defer { rd_kafka_consumer_close(handle.pointer) }
        let list = PartitionList.make([(tp, offset)])
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let err = rd_kafka_assign(handle.pointer, list)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
        var messages: [KafkaMessage] = []
        let deadline = DispatchTime.now() + .milliseconds(timeoutMs)
        while messages.count < maxMessages, DispatchTime.now() < deadline {
            guard let raw = rd_kafka_consumer_poll(handle.pointer, Int32(messages.isEmpty ? 100 : quietMs)) else {
                if !messages.isEmpty { break }
                continue
            }
            defer { rd_kafka_message_destroy(raw) }
            let m = raw.pointee
            guard m.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
            messages.append(
                KafkaMessage(
                    topic: tp.topic, partition: m.partition, offset: m.offset,
                    key: m.key.map { [UInt8](copying: UnsafeRawPointer($0), count: m.key_len) },
                    value: m.payload.map { [UInt8](copying: UnsafeRawPointer($0), count: m.len) }
                ))
        }
        return messages
    }
}
