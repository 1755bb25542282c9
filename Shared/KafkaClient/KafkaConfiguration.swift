/// Settings shared by every client. `properties` are raw librdkafka properties applied last, so
/// anything librdkafka supports can be set without a new Swift field.
public struct KafkaConfiguration: Sendable, Hashable {
    /// Comma-separated `host:port` list.
    public var bootstrapServers: String
    public var clientId: String
    public var properties: [String: String]
    /// Deployment overrides of `KafkaProducerConfiguration.lingerMs` and of the hot-path consumers'
    /// `fetchWaitMaxMs` (`KAFKA_LINGER_MS`, `KAFKA_FETCH_WAIT_MAX_MS`): the right values depend on the
    /// broker's cost per request, which differs between Tansu on a laptop and a Kafka cluster.
    public var lingerMs: Int?
    public var fetchWaitMaxMs: Int?
    /// What the broker does differently from Apache Kafka (`KAFKA_BROKER_QUIRKS`); none by default.
    public var brokerQuirks: BrokerQuirks

    public init(
        bootstrapServers: String, brokerQuirks: BrokerQuirks = [], clientId: String = "beacon-attendance",
        properties: [String: String] = [:],
        lingerMs: Int? = nil, fetchWaitMaxMs: Int? = nil
    ) {
        self.bootstrapServers = bootstrapServers
        self.brokerQuirks = brokerQuirks
        self.clientId = clientId
        self.properties = properties
        self.lingerMs = lingerMs
        self.fetchWaitMaxMs = fetchWaitMaxMs
    }

    var baseProperties: [String: String] {
        [
            "bootstrap.servers": bootstrapServers,
            "client.id": clientId,
            // Small clusters and the local broker: learn about new topics and leaders quickly.
            "topic.metadata.refresh.interval.ms": "10000",
            "socket.keepalive.enable": "true",
            // Topics are created by their owners with their partitions and settings (the platform's by
            // `TopicBootstrap`); a producer's metadata request must never create one with the broker's
            // defaults (after a local broker restart it did: attendance.events.raw came back with 4
            // partitions instead of 6).
            "allow.auto.create.topics": "false",
        ]
    }
}

public struct KafkaProducerConfiguration: Sendable, Hashable {
    public var client: KafkaConfiguration
    /// Idempotent production (acks=all, bounded in-flight, sequence numbers): a retried send
    /// never duplicates or reorders within a partition.
    public var idempotent: Bool = true
    /// How long librdkafka may batch messages before sending. Measured with Tansu (see the
    /// README's "Performance"): the broker's cost is per request and per record batch, not per message;
    /// 1,000 messages/s cost it 9 % of a core at 5 ms and 2.4 % at 20 ms, and every record batch
    /// produced is another fetch for each consumer. 10 ms keeps a hop's added latency small.
    public var lingerMs: Int = 10
    /// Upper bound for a send to succeed or fail, including librdkafka's internal retries.
    public var deliveryTimeoutMs: Int = 30_000
    /// How long shutdown waits for outstanding messages to be delivered.
    public var flushTimeoutMs: Int = 10_000
    public var compression: String = "none"

    public init(client: KafkaConfiguration) {
        self.client = client
        if let lingerMs = client.lingerMs { self.lingerMs = lingerMs }
    }

    var properties: [String: String] {
        var p = client.baseProperties
        p["enable.idempotence"] = idempotent ? "true" : "false"
        p["acks"] = "all"
        p["linger.ms"] = String(lingerMs)
        p["delivery.timeout.ms"] = String(deliveryTimeoutMs)
        p["compression.codec"] = compression
        p["queue.buffering.max.messages"] = "500000"
        p.merge(client.properties) { _, override in override }
        return p
    }
}

public struct KafkaConsumerConfiguration: Sendable, Hashable {
    public enum OffsetReset: String, Sendable, Hashable {
        case earliest, latest
    }

    public var client: KafkaConfiguration
    public var groupId: String
    public var topics: [String]
    /// At most this many messages per batch handed to the owner.
    public var maxBatchSize: Int = 500
    /// How long one poll waits for the first message of a batch. A batch is handed over as soon as
    /// its first message is there, with whatever else is already fetched (never waiting to fill it).
    public var pollTimeoutMs: Int = 100
    /// `fetch.wait.max.ms`: how long the broker may hold a fetch that finds nothing new. librdkafka's
    /// 500 ms default put up to half a second on every hop of the pipeline when the broker did not
    /// answer early; 20 ms keeps a hop's wait small. Each empty fetch costs the broker CPU (Tansu:
    /// about 4 % of a core per idle consumer at 20 ms), so consumers off the request path use
    /// `backgroundFetchWaitMaxMs`.
    public var fetchWaitMaxMs: Int = 20
    /// For consumers whose latency nobody waits on (registry feed caches, sightings): 250 ms.
    public static let backgroundFetchWaitMaxMs = 250
    /// Where to start when the group has no committed offset and the owner supplies none.
    public var autoOffsetReset: OffsetReset = .earliest
    /// Measured with Tansu: the default 45 s session made a group's first join take ~23 s;
    /// 6 s / 500 ms heartbeats makes it ~3 s.
    public var sessionTimeoutMs: Int = 6_000
    public var heartbeatIntervalMs: Int = 500
    /// How long shutdown waits for the owner to finish the batch it is processing.
    public var drainTimeoutMs: Int = 30_000
    /// How often the consumer publishes its lag (`kafka_consumer_lag`); 0 turns it off.
    public var lagReportIntervalMs: Int = 5_000

    public init(client: KafkaConfiguration, groupId: String, topics: [String]) {
        self.client = client
        self.groupId = groupId
        self.topics = topics
        if let fetchWaitMaxMs = client.fetchWaitMaxMs { self.fetchWaitMaxMs = fetchWaitMaxMs }
    }

    /// A consumer off the request path: long broker waits, few idle fetches.
    public static func background(client: KafkaConfiguration, groupId: String, topics: [String]) -> KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(client: client, groupId: groupId, topics: topics)
        configuration.fetchWaitMaxMs = backgroundFetchWaitMaxMs
        return configuration
    }

    var properties: [String: String] {
        var p = client.baseProperties
        p["group.id"] = groupId
        // Offsets are committed explicitly by the owner after its work is durable.
        p["enable.auto.commit"] = "false"
        p["enable.auto.offset.store"] = "false"
        p["auto.offset.reset"] = autoOffsetReset.rawValue
        p["session.timeout.ms"] = String(sessionTimeoutMs)
        p["heartbeat.interval.ms"] = String(heartbeatIntervalMs)
        p["enable.partition.eof"] = "false"
        p["fetch.wait.max.ms"] = String(fetchWaitMaxMs)
        p.merge(client.properties) { _, override in override }
        return p
    }
}

/// A topic to create: partitions, replication and topic-level config (e.g. `cleanup.policy=compact`).
public struct KafkaTopicSpec: Sendable, Hashable {
    public var name: String
    public var partitions: Int32
    public var replicationFactor: Int32
    public var config: [String: String]

    public init(name: String, partitions: Int32, replicationFactor: Int32 = 1, config: [String: String] = [:]) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
        self.config = config
    }

    public static func compacted(_ name: String, partitions: Int32, replicationFactor: Int32 = 1) -> KafkaTopicSpec {
        KafkaTopicSpec(name: name, partitions: partitions, replicationFactor: replicationFactor, config: ["cleanup.policy": "compact"])
    }
}
