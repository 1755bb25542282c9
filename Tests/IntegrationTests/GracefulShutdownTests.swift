import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// SIGTERM semantics, driven through `ServiceGroup.triggerGracefulShutdown()` (what the signal
/// handler calls): the worker finishes the batch it holds, commits it, the producer flushes what
/// it forwarded, and only then does the consumer leave the group.
@Suite("Graceful shutdown on the local broker", .timeLimit(.minutes(2)))
struct GracefulShutdownTests {
    /// Reads a batch, "works" on it slowly, forwards every message, commits. The pattern of the
    /// policy service: offsets are committed only after the output's delivery reports.
    struct ForwardingWorker: Service {
        let consumer: KafkaConsumer
        let producer: KafkaProducer
        let output: String
        let forwarded: Counts
        let started: Counts

        func run() async throws {
            for await batch in consumer.batches.cancelOnGracefulShutdown() {
                started.values.withLock { $0[0, default: 0] += batch.messages.count }
                try await Task.sleep(for: .milliseconds(300)) // shutdown arrives while we work
                let reports = try await producer.sendBatch(
                    batch.messages.map {
                        KafkaOutgoingMessage(topic: output, key: $0.key, value: $0.value)
                    })
                struct NotDelivered: Error {}
                guard reports.allSatisfy({ $0.isDelivered }) else { throw NotDelivered() }
                try await consumer.commit(batch)
                forwarded.values.withLock { $0[0, default: 0] += batch.messages.count }
            }
        }
    }

    @Test func inFlightBatchIsFinishedCommittedAndFlushed() async throws {
        try LocalStack.ensureStarted()
        let logger = LocalStack.logger
        let input = LocalStack.uniqueName("it.shutdown.in")
        let output = LocalStack.uniqueName("it.shutdown.out")
        let client = KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)
        let admin = try KafkaAdmin(configuration: client, logger: logger)
        try await admin.createTopics([KafkaTopicSpec(name: input, partitions: 1), KafkaTopicSpec(name: output, partitions: 1)])

        let seeder = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger)
        let seeding = Task { try await seeder.run() }
        for chunk in 0..<10 {
            _ = try await seeder.sendBatch(
                (chunk * 50..<(chunk + 1) * 50).map { KafkaOutgoingMessage(topic: input, key: "k", value: Array(String($0).utf8)) })
        }
        seeder.beginShutdown()
        try await seeding.value

        var consumerConfig = KafkaConsumerConfiguration(client: client, groupId: input, topics: [input])
        consumerConfig.maxBatchSize = 50
        let consumer = try KafkaConsumer(configuration: consumerConfig, logger: logger)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: client), logger: logger)
        let forwarded = Counts()
        let started = Counts()
        let worker = ForwardingWorker(consumer: consumer, producer: producer, output: output, forwarded: forwarded, started: started)
        // Start order: producer, consumer, worker; shutdown runs in reverse.
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: producer), .init(service: consumer), .init(service: worker)],
                logger: logger
            ))
        let running = Task { try await group.run() }

        let deadline = ContinuousClock.now + .seconds(60)
        while started.values.withLock({ $0[0, default: 0] }) < 100 {
            guard ContinuousClock.now < deadline else { Issue.record("the worker never got two batches"); break }
            try await Task.sleep(for: .milliseconds(20))
        }
        await group.triggerGracefulShutdown()
        try await running.value

        let startedCount = started.values.withLock { $0[0, default: 0] }
        let forwardedCount = forwarded.values.withLock { $0[0, default: 0] }
        // Every batch the worker took was finished, not abandoned, and it stopped early.
        #expect(forwardedCount == startedCount)
        #expect(forwardedCount < 500)

        // Committed exactly what was forwarded.
        let check = try KafkaConsumer(configuration: KafkaConsumerConfiguration(client: client, groupId: input, topics: []), logger: logger)
        let committed = try await check.committed([TopicPartition(topic: input, partition: 0)])
        #expect(committed[TopicPartition(topic: input, partition: 0)] == Int64(forwardedCount))

        // And the producer flushed all of it before shutting down.
        let reader = KafkaPartitionReader(configuration: client, logger: logger)
        let copied = try await reader.read(
            TopicPartition(topic: output, partition: 0), from: 0, maxMessages: 1_000, timeoutMs: 10_000, quietMs: 500)
        #expect(copied.count == forwardedCount)
    }
}
