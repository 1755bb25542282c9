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
                // Its first round finds the outbox empty, and it starts listening.
                try await Task.sleep(for: .seconds(1))
                try await client.query(
                    "INSERT INTO session_change_outbox (session_id, user_id, version, payload) VALUES ('s-wake', 'u-wake', 1, '{}')",
                    logger: MergerDB.logger)
                let waited = try await eventually("the row is delivered", timeout: .seconds(15)) {
                    var left = 0
                    for try await count in try await client.query(
                        "SELECT count(*)::int FROM session_change_outbox", logger: MergerDB.logger
                    )
                    .decode(Int.self) {
                        left = count
                    }
                    return left == 0
                }
                #expect(waited < .seconds(15))
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }
}
