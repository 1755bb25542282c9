import Foundation
import Logging
import Synchronization
import Testing

@testable import KafkaClient

/// Producer, consumer and admin against librdkafka's in-process mock cluster: real protocol,
/// no broker process.
@Suite("Kafka client on the mock cluster", .timeLimit(.minutes(2)))
struct MockClusterTests {
    let logger: Logger = {
        var logger = Logger(label: "kafka-test")
        logger.logLevel = .warning
        return logger
    }()

    func makeProducer(_ cluster: KafkaMockCluster) throws -> KafkaProducer {
        var config = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers))
        config.lingerMs = 1
        return try KafkaProducer(configuration: config, logger: logger)
    }

    func makeConsumer(
        _ cluster: KafkaMockCluster, group: String, topic: String, listener: (any KafkaRebalanceListener)? = nil
    ) throws -> KafkaConsumer {
        let config = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), groupId: group, topics: [topic]
        )
        return try KafkaConsumer(configuration: config, rebalanceListener: listener, logger: logger)
    }

    /// Runs `body` with the services running, then shuts them down and waits for them.
    func withRunning<T: Sendable>(_ services: [any ServiceRunnable], _ body: () async throws -> T) async throws -> T {
        let tasks = services.map { service in Task { try await service.run() } }
        do {
            let result = try await body()
            for service in services { service.stop() }
            for task in tasks { try await task.value }
            return result
        } catch {
            for service in services { service.stop() }
            for task in tasks { _ = try? await task.value }
            throw error
        }
    }

    @Test("a commit that fails is thrown by commit and only logged by commitOrWarn")
    func aFailedCommitIsLoggedNotThrown() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("events", partitions: 1)
        let consumer = try makeConsumer(cluster, group: "g-commit", topic: "events")
        // As a broker answers the commits of a member whose group is rebalancing.
        cluster.failNextOffsetCommits(count: 2, with: 22) // ILLEGAL_GENERATION
        let batch = KafkaMessageBatch(messages: [
            KafkaMessage(topic: "events", partition: 0, offset: 0, key: nil, value: [1])
        ])
        await #expect(throws: KafkaError.self) { try await consumer.commit(batch) }
        await consumer.commitOrWarn(batch, logger: logger)
    }

    @Test func batchSendReturnsOrderedReportsAndConsumerReadsEverythingInKeyOrder() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("events", partitions: 3)
        let producer = try makeProducer(cluster)
        let consumer = try makeConsumer(cluster, group: "g1", topic: "events")

        let messages = (0..<1_000).map { i in
            KafkaOutgoingMessage(topic: "events", key: "user-\(i % 7)", value: Array("\(i)".utf8))
        }
        try await withRunning([producer, consumer]) {
            let reports = try await producer.sendBatch(messages)
            #expect(reports.count == 1_000)
            #expect(reports.allSatisfy { $0.isDelivered })
            // Reports come back in input order; within a partition offsets increase.
            var lastOffset: [Int32: Int64] = [:]
            for report in reports {
                #expect(report.offset > lastOffset[report.partition, default: -1])
                lastOffset[report.partition] = report.offset
            }

            var seenPerKey: [String: [Int]] = [:]
            var count = 0
            for await batch in consumer.batches {
                for message in batch.messages {
                    let value = try #require(Int(String(decoding: message.value ?? [], as: UTF8.self)))
                    seenPerKey[try #require(message.keyString), default: []].append(value)
                }
                count += batch.messages.count
                try await consumer.commit(batch)
                if count >= 1_000 { break }
            }
            #expect(count == 1_000)
            for (key, values) in seenPerKey {
                #expect(values == values.sorted(), "per-key order for \(key)")
            }
        }
    }

    /// `kafka_consumer_lag` comes from `currentLag()`: the records behind while the owner is slow, none
    /// once it has read everything.
    @Test func lagCountsTheRecordsNotYetHandedToTheOwner() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("lagging", partitions: 1)
        let producer = try makeProducer(cluster)
        var config = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), groupId: "lag", topics: ["lagging"]
        )
        config.maxBatchSize = 100
        let consumer = try KafkaConsumer(configuration: config, logger: logger)
        let tp = TopicPartition(topic: "lagging", partition: 0)
        try await withRunning([producer, consumer]) {
            let reports = try await producer.sendBatch(
                (0..<1_000).map { KafkaOutgoingMessage(topic: "lagging", key: "k", value: Array("\($0)".utf8)) })
            #expect(reports.allSatisfy { $0.isDelivered })
            var iterator = consumer.batches.makeAsyncIterator()
            var read = try #require(await iterator.next()).messages.count
            // The owner holds one batch; the consumer has at most one more waiting for it.
            var behind: Int64 = -1
            for _ in 0..<50 {
                behind = consumer.currentLag()[tp] ?? -1
                if behind >= 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(behind >= Int64(1_000 - read - 100) && behind <= Int64(1_000 - read), "lag \(behind) after reading \(read)")
            while read < 1_000, let batch = await iterator.next() { read += batch.messages.count }
            #expect(read == 1_000)
            #expect(consumer.currentLag()[tp] == 0)
        }
    }

    @Test func tombstoneAndEmptyValueStayDistinct() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("compacted", partitions: 1)
        let producer = try makeProducer(cluster)
        let consumer = try makeConsumer(cluster, group: "g-tomb", topic: "compacted")
        try await withRunning([producer, consumer]) {
            try await producer.send(KafkaOutgoingMessage(topic: "compacted", key: "site:1", value: nil))
            try await producer.send(KafkaOutgoingMessage(topic: "compacted", key: "site:2", value: []))
            var received: [KafkaMessage] = []
            for await batch in consumer.batches {
                received += batch.messages
                if received.count >= 2 { break }
            }
            try #require(received.count >= 2)
            #expect(received[0].value == nil)
            #expect(received[1].value == [])
        }
    }

    @Test func rebalanceListenerSeeksToStoredOffsets() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("stored", partitions: 2)
        let producer = try makeProducer(cluster)
        let messages = (0..<100).map { i in
            KafkaOutgoingMessage(topic: "stored", key: nil, value: Array("\(i)".utf8), partition: Int32(i % 2))
        }
        let listener = RecordingListener(stored: [
            TopicPartition(topic: "stored", partition: 0): 40,
            TopicPartition(topic: "stored", partition: 1): 45,
        ])
        let consumer = try makeConsumer(cluster, group: "g-stored", topic: "stored", listener: listener)
        try await withRunning([producer, consumer]) {
            _ = try await producer.sendBatch(messages)
            var first: [Int32: Int64] = [:]
            var count = 0
            for await batch in consumer.batches {
                for message in batch.messages where first[message.partition] == nil {
                    first[message.partition] = message.offset
                }
                count += batch.messages.count
                // 50 per partition: 10 left on partition 0, 5 on partition 1.
                if count >= 15 { break }
            }
            #expect(first[0] == 40)
            #expect(first[1] == 45)
            #expect(count == 15)
            #expect(consumer.assignment == [TopicPartition(topic: "stored", partition: 0), TopicPartition(topic: "stored", partition: 1)])
        }
        #expect(listener.assignedPartitions.count == 2)
        // Leaving the group at shutdown revokes through the listener.
        #expect(listener.revokedPartitions.count == 2)
    }

    /// The owner's revoke hook is its last word on a partition: no batch it receives afterwards holds a
    /// message of it (until it is assigned again), even when the revocation came while the consumer was
    /// taking a batch out of what it had already fetched.
    @Test func noMessageOfARevokedPartitionReachesTheOwnerAfterItsRevokeHook() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("moving", partitions: 4)
        let producer = try makeProducer(cluster)
        let listener = RevocationWatch()
        var config = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), groupId: "g-moving", topics: ["moving"])
        config.maxBatchSize = 20
        let first = try KafkaConsumer(configuration: config, rebalanceListener: listener, logger: logger)
        let second = try KafkaConsumer(configuration: config, logger: logger)
        try await withRunning([producer, first]) {
            let reports = try await producer.sendBatch(
                (0..<20_000).map { KafkaOutgoingMessage(topic: "moving", key: nil, value: Array("\($0)".utf8), partition: Int32($0 % 4)) })
            #expect(reports.allSatisfy { $0.isDelivered })
            var read = 0
            var late: [KafkaMessage] = []
            var secondTask: Task<Void, any Error>?
            for await batch in first.batches {
                let revoked = listener.revoked
                late += batch.messages.filter { revoked.contains(TopicPartition(topic: $0.topic, partition: $0.partition)) }
                read += batch.messages.count
                // A second member joins while the first has fetched far ahead of what it handed over.
                if secondTask == nil && read >= 200 { secondTask = Task { try await second.run() } }
                if listener.rebalances >= 3 || read >= 19_900 { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            second.triggerShutdown()
            try await secondTask?.value
            #expect(listener.rebalances >= 3, "the second member's join revoked and reassigned the first's partitions")
            #expect(late.isEmpty, "messages of revoked partitions after the revoke hook: \(late.prefix(5))")
        }
    }

    /// A revocation waits until the owner gives back the batch it holds (asks for the next one): a batch
    /// the owner has received but not yet taken into its work (the merger's store in flight, say) is
    /// never left behind by a revoke hook that has already run.
    @Test func aRevocationWaitsUntilTheOwnerGivesBackItsBatch() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("held", partitions: 2)
        let producer = try makeProducer(cluster)
        let log = RevocationLog()
        var client = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        // The first member hears of the second's join within a tenth of a second.
        client.properties["heartbeat.interval.ms"] = "100"
        let config = KafkaConsumerConfiguration(client: client, groupId: "g-held", topics: ["held"])
        let first = try KafkaConsumer(configuration: config, rebalanceListener: log, logger: logger)
        let second = try KafkaConsumer(configuration: config, logger: logger)
        try await withRunning([producer, first]) {
            _ = try await producer.sendBatch([KafkaOutgoingMessage(topic: "held", key: nil, value: [1], partition: 0)])
            var batches = first.batches.makeAsyncIterator()
            let batch = try #require(await batches.next())
            #expect(batch.messages.count == 1)
            // The owner holds its batch while a second member joins; the first member's poll thread has
            // nothing more to hand over, so it serves the rebalance at once.
            let secondRun = Task { try await second.run() }
            let holdUntil = ContinuousClock.now + .seconds(4)
            while log.entries.isEmpty, ContinuousClock.now < holdUntil { try await Task.sleep(for: .milliseconds(50)) }
            log.record("batch given back")
            let asking = Task { [batches] in
                var batches = batches
                _ = await batches.next()
            }
            let revokedBy = ContinuousClock.now + .seconds(20)
            while !log.entries.contains("revoked"), ContinuousClock.now < revokedBy { try await Task.sleep(for: .milliseconds(50)) }
            #expect(log.entries.prefix(2) == ["batch given back", "revoked"])
            // A partition given up is its next owner's to commit: a late commit of the first member's is
            // left out, so it cannot move the group back.
            let splitBy = ContinuousClock.now + .seconds(20)
            while first.assignment.count != 1, ContinuousClock.now < splitBy { try await Task.sleep(for: .milliseconds(50)) }
            let partitions = [TopicPartition(topic: "held", partition: 0), TopicPartition(topic: "held", partition: 1)]
            let givenUp = try #require(partitions.first { !first.assignment.contains($0) })
            try await first.commit([givenUp: 1])
            #expect(try await first.committed([givenUp])[givenUp] == nil)
            second.triggerShutdown()
            try await secondRun.value
            first.triggerShutdown()
            await asking.value
        }
    }

    /// With the broker out of reach, a send fails once its delivery timeout has passed, not the 30 s
    /// default: the gateway answers its phones 503 within the few seconds they wait for an answer.
    @Test func aSendToAnUnreachableBrokerFailsWithinItsDeliveryTimeout() async throws {
        var configuration = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: "127.0.0.1:1"))
        configuration.deliveryTimeoutMs = 1_000
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        let started = ContinuousClock.now
        try await withRunning([producer]) {
            await #expect(throws: KafkaError.self) { try await producer.send(KafkaOutgoingMessage(topic: "t", key: "k", value: [1])) }
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    /// A pending delivery is a value: every task holding it gets the reports.
    @Test func everyTaskAwaitingAPendingDeliveryGetsItsReports() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("shared", partitions: 1)
        let producer = try makeProducer(cluster)
        try await withRunning([producer]) {
            let pending = try await producer.enqueue((0..<50).map { KafkaOutgoingMessage(topic: "shared", key: "k", value: [UInt8($0)]) })
            async let first = pending.reports()
            async let second = pending.reports()
            let (a, b) = await (first, second)
            #expect(a.count == 50 && a == b && a.allSatisfy { $0.isDelivered })
            #expect(await pending.reports() == a)
        }
    }

    @Test func storedOffsetPastTheEndStartsFromTheBeginning() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("lost", partitions: 1)
        let producer = try makeProducer(cluster)
        // As after a Tansu restart: the owner stored offset 5000, the partition has 3 messages.
        let listener = RecordingListener(stored: [TopicPartition(topic: "lost", partition: 0): 5_000])
        let consumer = try makeConsumer(cluster, group: "g-lost", topic: "lost", listener: listener)
        try await withRunning([producer, consumer]) {
            _ = try await producer.sendBatch((0..<3).map { KafkaOutgoingMessage(topic: "lost", key: "k", value: [UInt8($0)]) })
            var offsets: [Int64] = []
            for await batch in consumer.batches {
                offsets += batch.messages.map(\.offset)
                if offsets.count >= 3 { break }
            }
            #expect(offsets == [0, 1, 2])
        }
    }

    @Test func committedOffsetsAreReadBack() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("commits", partitions: 1)
        let producer = try makeProducer(cluster)
        let consumer = try makeConsumer(cluster, group: "g-commit", topic: "commits")
        try await withRunning([producer, consumer]) {
            _ = try await producer.sendBatch((0..<10).map { KafkaOutgoingMessage(topic: "commits", key: "k", value: [UInt8($0)]) })
            var count = 0
            for await batch in consumer.batches {
                count += batch.messages.count
                if count >= 10 {
                    try await consumer.commit(batch)
                    break
                }
            }
            let tp = TopicPartition(topic: "commits", partition: 0)
            let committed = try await consumer.committed([tp])
            #expect(committed[tp] == 10)
        }
    }

    @Test func idempotentProducerRetriesTransientBrokerErrors() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("flaky", partitions: 1)
        // NOT_ENOUGH_REPLICAS (19) is retriable: librdkafka retries and the message lands once.
        cluster.failNextProduceRequests(count: 3, with: 19)
        let producer = try makeProducer(cluster)
        let consumer = try makeConsumer(cluster, group: "g-flaky", topic: "flaky")
        try await withRunning([producer, consumer]) {
            let report = try await producer.send(KafkaOutgoingMessage(topic: "flaky", key: "k", value: Array("once".utf8)))
            #expect(report.offset == 0)
            try await producer.send(KafkaOutgoingMessage(topic: "flaky", key: "k", value: Array("twice".utf8)))
            var values: [String] = []
            for await batch in consumer.batches {
                values += batch.messages.map { String(decoding: $0.value ?? [], as: UTF8.self) }
                if values.count >= 2 { break }
            }
            #expect(values == ["once", "twice"])
        }
    }

    /// Shutdown can begin before the producer's `run()` does (a service group cancelled during
    /// start-up): what was queued before is still flushed and reported, so no sender waits forever.
    @Test func aProducerShutDownBeforeItRanStillReportsWhatWasQueued() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("early", partitions: 1)
        let producer = try makeProducer(cluster)
        let pending = try await producer.enqueue([KafkaOutgoingMessage(topic: "early", key: "k", value: [1])])
        producer.beginShutdown()
        try await producer.run()
        let reports = await pending.reports()
        #expect(reports.count == 1 && reports.allSatisfy { $0.error == nil }, "\(reports)")
    }

    @Test func sendAfterShutdownFailsRetriably() async throws {
        let cluster = try KafkaMockCluster()
        try cluster.createTopic("late", partitions: 1)
        let producer = try makeProducer(cluster)
        let runner = Task { try await producer.run() }
        try await producer.send(KafkaOutgoingMessage(topic: "late", key: "k", value: [1]))
        producer.beginShutdown()
        try await runner.value
        await #expect(throws: KafkaError.self) {
            try await producer.send(KafkaOutgoingMessage(topic: "late", key: "k", value: [2]))
        }
        do {
            try await producer.send(KafkaOutgoingMessage(topic: "late", key: "k", value: [2]))
        } catch {
            #expect(error.kind == .shutdown)
            #expect(error.isRetriable)
        }
    }
}

/// Lets tests run and stop producers and consumers the same way.
protocol ServiceRunnable: Sendable {
    func run() async throws
    func stop()
}

extension KafkaProducer: ServiceRunnable {
    func stop() { beginShutdown() }
}

extension KafkaConsumer: ServiceRunnable {
    func stop() { triggerShutdown() }
}

/// Which partitions are revoked and not assigned again, and how many assignments and revocations came.
final class RevocationWatch: KafkaRebalanceListener, Sendable {
    private let state = Mutex<(revoked: Set<TopicPartition>, rebalances: Int)>(([], 0))

    var revoked: Set<TopicPartition> { state.withLock { $0.revoked } }
    var rebalances: Int { state.withLock { $0.rebalances } }

    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        state.withLock {
            $0.revoked.subtract(partitions)
            $0.rebalances += 1
        }
        return [:]
    }

    func partitionsRevoked(_ partitions: [TopicPartition]) async {
        state.withLock {
            $0.revoked.formUnion(partitions)
            $0.rebalances += 1
        }
    }
}

/// What happened, in order: the revocations the listener heard and what the test records beside them.
final class RevocationLog: KafkaRebalanceListener, Sendable {
    private let log = Mutex<[String]>([])

    var entries: [String] { log.withLock { $0 } }

    func record(_ entry: String) { log.withLock { $0.append(entry) } }

    func partitionsRevoked(_ partitions: [TopicPartition]) async { record("revoked") }
}

final class RecordingListener: KafkaRebalanceListener, @unchecked Sendable {
    private let lock = NSLock()
    private let stored: [TopicPartition: Int64]
    private var assigned: [TopicPartition] = []
    private var revoked: [TopicPartition] = []

    init(stored: [TopicPartition: Int64]) { self.stored = stored }

    var assignedPartitions: [TopicPartition] { lock.withLock { assigned } }
    var revokedPartitions: [TopicPartition] { lock.withLock { revoked } }

    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        lock.withLock { assigned += partitions }
        return stored
    }

    func partitionsRevoked(_ partitions: [TopicPartition]) async {
        lock.withLock { revoked += partitions }
    }
}
