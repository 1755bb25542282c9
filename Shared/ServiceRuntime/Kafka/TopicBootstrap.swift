import AttendanceProtocol
import KafkaClient
import Logging

/// Creates the platform's topics as the protocol module defines them (names, partitions,
/// compaction, retention). Safe to run from every service at start-up and from the admin CLI.
///
/// `partitions` overrides the count of every partitioned topic (those the protocol gives more than
/// one; single-partition topics such as the registry feed stay single): a deployment sizes its
/// topics to its consumers. On one small machine with Tansu, whose cost is per record batch, fewer
/// partitions mean fewer, fuller batches (`TOPIC_PARTITIONS`; the README's "Performance").
///
/// `replicationFactor` (`TOPIC_REPLICATION_FACTOR`) is 1 on the local single broker. With 3 or more
/// replicas a topic also gets `min.insync.replicas` 2: the producers' `acks=all` then means two copies
/// before an event counts as queued, so one broker lost loses nothing.
public enum TopicBootstrap {
    public static func specs(replicationFactor: Int32 = 1, partitions: Int32? = nil, names: TopicNames = TopicNames()) -> [KafkaTopicSpec] {
        Topic.allCases.map { topic in
            KafkaTopicSpec(
                name: names[topic],
                partitions: partitionCount(of: topic, override: partitions),
                replicationFactor: replicationFactor,
                config: replicationFactor >= 3 ? topic.topicConfig.merging(["min.insync.replicas": "2"]) { $1 } : topic.topicConfig
            )
        }
    }

    public static func partitionCount(of topic: Topic, override: Int32?) -> Int32 {
        guard let override, topic.defaultPartitionCount > 1 else { return topic.defaultPartitionCount }
        return override
    }

    /// - Returns: the topics this call created.
    @discardableResult
    public static func ensureTopics(
        _ admin: KafkaAdmin, replicationFactor: Int32 = 1, partitions: Int32? = nil, names: TopicNames = TopicNames()
    ) async throws(KafkaError) -> [String] {
        try await admin.createTopics(specs(replicationFactor: replicationFactor, partitions: partitions, names: names))
    }
}
