import Logging

/// What a Kafka-compatible broker does differently from Apache Kafka, and what the client does about
/// it. Every workaround for a particular broker lives here and is off unless the deployment names
/// that broker (`KAFKA_BROKER_QUIRKS`, `BrokerQuirks.named`): against Apache Kafka none applies.
///
/// What is not here is not a quirk: a stored offset past the end of a partition (a topic deleted and
/// re-created, a broker that lost its data) or a compacted feed that lost its records are faults any
/// broker can have, and the consumer and the registry handle them everywhere.
public struct BrokerQuirks: OptionSet, Sendable, Hashable {
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// The reported high watermark is the base offset of the partition's last record batch + 1, not
    /// the log end (Tansu 0.6). A stored offset above it may still be inside the log: before the
    /// consumer declares the partition lost, `LogEndProbe` reads the last batch to find the real end.
    public static let highWatermarkIsLastBatchBase = BrokerQuirks(rawValue: 1 << 0)

    /// Tansu, the local stack's broker.
    public static let tansu: BrokerQuirks = [.highWatermarkIsLastBatchBase]

    /// The names `KAFKA_BROKER_QUIRKS` takes: `none` (Apache Kafka and compatible brokers) or `tansu`.
    public static let names: [String: BrokerQuirks] = ["none": [], "tansu": .tansu]

    public static func named(_ name: String) -> BrokerQuirks? {
        names[name.lowercased()]
    }
}

/// Finds where a partition's log really ends by reading its last record batch, for a broker with
/// `BrokerQuirks.highWatermarkIsLastBatchBase`. Used only when a stored offset is above the reported
/// high watermark.
enum LogEndProbe {
    static func trueEnd(of tp: TopicPartition, lastBatchBase: Int64, properties: [String: String], logger: Logger) -> Int64? {
        var props = properties
        props["group.id"] = "log-end-probe"
        let messages = try? KafkaPartitionReader.readBlocking(
            tp, from: lastBatchBase, maxMessages: 1_000_000, timeoutMs: 5_000, quietMs: 100, properties: props, logger: logger
        )
        return messages?.last.map { $0.offset + 1 }
    }
}
