import AttendanceProtocol
import KafkaClient
import Logging

/// Creates the platform's topics as the protocol module defines them (names, partitions,
/// compaction, retention). Safe to run from every service at start-up and from the admin CLI.
public enum TopicBootstrap {
    public static func specs(replicationFactor: Int32 = 1) -> [KafkaTopicSpec] {
        Topic.allCases.map { topic in
            KafkaTopicSpec(
                name: topic.name,
                partitions: topic.defaultPartitionCount,
                replicationFactor: replicationFactor,
                config: topic.topicConfig
            )
        }
    }

    /// - Returns: the topics this call created.
    @discardableResult
    public static func ensureTopics(_ admin: KafkaAdmin, replicationFactor: Int32 = 1) async throws(KafkaError) -> [String] {
        try await admin.createTopics(specs(replicationFactor: replicationFactor))
    }
}
