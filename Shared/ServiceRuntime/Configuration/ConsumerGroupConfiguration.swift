import KafkaClient

/// How a service reads its consumer group: the group and how many records a polled batch holds. Every
/// consuming service names them alike, `<PREFIX>_GROUP_ID` and `<PREFIX>_MAX_BATCH`
/// (docs/CONFIGURATION.md).
public struct ConsumerGroupConfiguration: Sendable, Hashable {
    public var groupId: String
    /// At most this many records per polled batch.
    public var maxBatchSize: Int
    /// How long one poll waits for records.
    public var pollTimeoutMs: Int

    public init(groupId: String, maxBatchSize: Int, pollTimeoutMs: Int = 100) {
        self.groupId = groupId
        self.maxBatchSize = maxBatchSize
        self.pollTimeoutMs = pollTimeoutMs
    }

    /// The variables `overridden(prefix:from:)` reads.
    public static func variableNames(prefix: String) -> (groupId: String, maxBatch: String) {
        ("\(prefix)_GROUP_ID", "\(prefix)_MAX_BATCH")
    }

    /// This configuration with `<prefix>_GROUP_ID` and `<prefix>_MAX_BATCH` (1-10,000) applied where set.
    public func overridden(prefix: String, from env: EnvironmentReader) throws(ConfigurationError) -> ConsumerGroupConfiguration {
        let names = Self.variableNames(prefix: prefix)
        var configuration = self
        configuration.groupId = env.string(names.groupId, default: groupId)
        configuration.maxBatchSize = try env.int(names.maxBatch, default: maxBatchSize, in: 1...10_000)
        return configuration
    }
}

extension KafkaConsumerConfiguration {
    /// A consumer of `topics` in `group`, with its batch size and poll wait.
    /// - Parameter background: off the request path (`background(client:groupId:topics:)`).
    public init(client: KafkaConfiguration, group: ConsumerGroupConfiguration, topics: [String], background: Bool = false) {
        self =
            background
            ? .background(client: client, groupId: group.groupId, topics: topics)
            : KafkaConsumerConfiguration(client: client, groupId: group.groupId, topics: topics)
        maxBatchSize = group.maxBatchSize
        pollTimeoutMs = group.pollTimeoutMs
    }
}
