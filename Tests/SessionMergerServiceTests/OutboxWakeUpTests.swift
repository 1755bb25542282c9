import AttendanceProtocol
import KafkaClient
import LocalStackTesting
import PostgresNIO
import ServiceLifecycle
import ServiceRuntime
import Testing

@testable import SessionMergerService

@Suite("Session change outbox on the local PostgreSQL and broker")
struct OutboxWakeUpTests {
    @Test("a commit wakes the publisher: with a 60 s fallback poll, a new row is delivered within 15 s")
    func aCommitWakesThePublisher() async throws {
        try await MergerDB.withSchema { client, _ in
            let kafka = KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)
            let topic = LocalStack.uniqueName("mt.sessions")
            try await KafkaAdmin(configuration: kafka, logger: MergerDB.logger).createTopics([KafkaTopicSpec(name: topic, partitions: 1)])
            var configuration = SessionMergerConfiguration()
            configuration.outboxPollInterval = .seconds(60)
            configuration.topics[.sessions] = topic
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: MergerDB.logger)
            let publisher = SessionChangePublisher(
                client: client, producer: producer, configuration: configuration, logger: MergerDB.logger)
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [producer, publisher], gracefulShutdownSignals: [], logger: MergerDB.logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                // Its first round finds the outbox empty: from then on only a wake-up (or the poll a minute
                // later) makes another round.
                try await eventually("the publisher's first round") { publisher.completedRounds >= 1 }
                try await client.query(
                    "INSERT INTO session_change_outbox (session_id, user_id, version, payload) VALUES ('s-wake', 'u-wake', 1, '{}')",
                    logger: MergerDB.logger)
                // Delivered to the topic (not only gone from the outbox) well before the poll.
                let reader = KafkaPartitionReader(configuration: kafka, logger: MergerDB.logger)
                try await eventually("the row is on the topic", timeout: .seconds(15)) {
                    let messages = try await reader.read(
                        TopicPartition(topic: topic, partition: 0), from: 0, maxMessages: 10, timeoutMs: 1_000, quietMs: 100)
                    return messages.contains { $0.keyString == PartitionKey.session(userId: "u-wake").value }
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }
}
