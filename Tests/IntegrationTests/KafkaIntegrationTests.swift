import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import ServiceRuntime
import Synchronization
import Testing

/// The Kafka client against the real local broker (Tansu). Serialized: the tests share one broker
/// and measure group behaviour that parallel load would blur.
@Suite("Kafka client on the local broker", .serialized, .timeLimit(.minutes(3)))
struct KafkaIntegrationTests {
    let logger = LocalStack.logger

    init() throws {
        try LocalStack.ensureStarted()
    }

    func createTopic(_ name: String, partitions: Int32) async throws {
        let admin = try KafkaAdmin(
            configuration: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks), logger: logger)
        try await admin.createTopics([KafkaTopicSpec(name: name, partitions: partitions)])
    }

    func producer() throws -> KafkaProducer {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)), logger: logger)
    }

    func consumer(
        group: String, topic: String, listener: (any KafkaRebalanceListener)? = nil, maxBatch: Int = 1_000
    ) throws -> KafkaConsumer {
        var config = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks), groupId: group,
            topics: [topic])
        config.maxBatchSize = maxBatch
        return try KafkaConsumer(configuration: config, rebalanceListener: listener, logger: logger)
    }

    @Test func adminCreatesTopicsIdempotently() async throws {
        let admin = try KafkaAdmin(
            configuration: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks), logger: logger)
        let plain = LocalStack.uniqueName("it.admin")
        let compacted = LocalStack.uniqueName("it.admin.compacted")
        let first = try await admin.createTopics([KafkaTopicSpec(name: plain, partitions: 5), .compacted(compacted, partitions: 1)])
        #expect(Set(first) == [plain, compacted])
        let second = try await admin.createTopics([KafkaTopicSpec(name: plain, partitions: 5)])
        #expect(second.isEmpty)
        let topics = try await admin.topics()
        #expect(topics[plain] == 5)
        #expect(topics[compacted] == 1)
    }

    @Test func tenThousandMessagesRoundTripInPerKeyOrder() async throws {
        let topic = LocalStack.uniqueName("it.roundtrip")
        try await createTopic(topic, partitions: 6)
        let producer = try producer()
        let consumer = try consumer(group: topic, topic: topic)
        let producing = Task { try await producer.run() }
        let consuming = Task { try await consumer.run() }

        let messages = (0..<10_000).map { i in
            KafkaOutgoingMessage(topic: topic, key: "user-\(i % 100)", value: Array(String(i).utf8))
        }
        let reports = try await producer.sendBatch(messages)
        #expect(reports.allSatisfy { $0.isDelivered })

        var perKey: [String: [Int]] = [:]
        var seen = Set<Int>()
        for await batch in consumer.batches {
            for message in batch.messages {
                let bytes = try #require(message.value)
                let value = try #require(Int(String(decoding: bytes, as: UTF8.self)))
                seen.insert(value)
                perKey[try #require(message.keyString), default: []].append(value)
            }
            try await consumer.commit(batch)
            if seen.count == 10_000 { break }
        }
        #expect(seen.count == 10_000)
        #expect(perKey.count == 100)
        #expect(perKey.values.allSatisfy { $0 == $0.sorted() })

        producer.beginShutdown()
        consumer.triggerShutdown()
        try await producing.value
        try await consuming.value
    }

    @Test func twoConsumersInOneGroupSplitThePartitions() async throws {
        let topic = LocalStack.uniqueName("it.rebalance")
        try await createTopic(topic, partitions: 6)
        let producer = try producer()
        let producing = Task { try await producer.run() }
        let seen = Counts()

        func consume(_ consumer: KafkaConsumer) -> Task<Void, any Error> {
            Task {
                for await batch in consumer.batches {
                    seen.values.withLock { counts in
                        for message in batch.messages {
                            guard let bytes = message.value, let value = Int(String(decoding: bytes, as: UTF8.self)) else {
                                Issue.record("unreadable message at offset \(message.offset)")
                                continue
                            }
                            counts[value, default: 0] += 1
                        }
                    }
                    try await consumer.commit(batch)
                }
            }
        }

        let first = try consumer(group: topic, topic: topic)
        let firstRun = Task { try await first.run() }
        let firstWork = consume(first)
        _ = try await producer.sendBatch(
            (0..<1_000).map { KafkaOutgoingMessage(topic: topic, key: "k\($0 % 50)", value: Array(String($0).utf8)) })
        try await waitUntil("the first consumer owns all 6 partitions") { first.assignment.count == 6 }

        let second = try consumer(group: topic, topic: topic)
        let secondRun = Task { try await second.run() }
        let secondWork = consume(second)
        let all = Set((0..<6).map { TopicPartition(topic: topic, partition: $0) })
        try await waitUntil("the group splits the partitions between both members") {
            let a = first.assignment, b = second.assignment
            return !a.isEmpty && !b.isEmpty && a.isDisjoint(with: b) && a.union(b) == all
        }

        _ = try await producer.sendBatch(
            (1_000..<2_000).map { KafkaOutgoingMessage(topic: topic, key: "k\($0 % 50)", value: Array(String($0).utf8)) })
        try await waitUntil("every message is consumed") { seen.values.withLock { $0.count } == 2_000 }
        // At-least-once: a message may be read twice only around the rebalance, never lost.
        let counts = seen.values.withLock { $0 }
        #expect(Set(counts.keys) == Set(0..<2_000))

        first.triggerShutdown()
        second.triggerShutdown()
        producer.beginShutdown()
        for task in [firstRun, secondRun, firstWork, secondWork, producing] { try await task.value }
    }

    @Test func resumesFromOffsetsStoredInPostgres() async throws {
        let topic = LocalStack.uniqueName("it.resume")
        try await createTopic(topic, partitions: 3)
        let table = "it_resume_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            try await db.query(
                PostgresQuery(unsafeSQL: "CREATE TABLE \(table)_values (value int PRIMARY KEY, offset_read bigint)"), logger: logger)
            try await db.query(
                PostgresQuery(
                    unsafeSQL: "CREATE TABLE \(table)_offsets (topic text, part int, next_offset bigint, PRIMARY KEY (topic, part))"),
                logger: logger)
            let store = PostgresOffsetStore(client: db, table: table, logger: logger)

            let producer = try producer()
            let producing = Task { try await producer.run() }
            // Ten separate sends make ten record batches per partition, so the stop point lands
            // inside the log rather than in its last batch (see Tansu's watermark quirk in KafkaConsumer).
            for chunk in 0..<10 {
                _ = try await producer.sendBatch(
                    (chunk * 100..<(chunk + 1) * 100).map {
                        KafkaOutgoingMessage(topic: topic, key: "k\($0 % 30)", value: Array(String($0).utf8))
                    })
            }

            // First incarnation: process about half, each batch's rows and offsets in one transaction.
            var processed = 0
            do {
                let consumer = try consumer(group: topic, topic: topic, listener: store, maxBatch: 50)
                let running = Task { try await consumer.run() }
                for await batch in consumer.batches {
                    processed += try await store.apply(batch)
                    if processed >= 500 { break }
                }
                consumer.triggerShutdown()
                try await running.value
            }
            // Its Kafka commits never happened; only PostgreSQL knows where it stopped.
            // Second incarnation (a "restart") continues exactly there: no duplicate, no gap.
            let consumer = try consumer(group: topic, topic: topic, listener: store, maxBatch: 50)
            let running = Task { try await consumer.run() }
            for await batch in consumer.batches {
                processed += try await store.apply(batch)
                if try await store.rowCount() >= 1_000 { break }
            }
            consumer.triggerShutdown()
            producer.beginShutdown()
            try await running.value
            try await producing.value

            #expect(processed == 1_000)
            #expect(store.duplicates.withLock { $0 } == 0)
            let rows = try await db.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(table)_values"), logger: logger)
            for try await count in rows.decode(Int.self) { #expect(count == 1_000) }
        }
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(60), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now > deadline {
                Issue.record("timed out waiting until \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

final class Counts: Sendable {
    let values = Mutex<[Int: Int]>([:])
}

/// The merger's pattern in miniature: results and offsets in one transaction; on assignment the
/// consumer seeks to what PostgreSQL holds.
final class PostgresOffsetStore: KafkaRebalanceListener, Sendable {
    let client: PostgresClient
    let table: String
    let logger: Logger
    let duplicates = Mutex(0)

    init(client: PostgresClient, table: String, logger: Logger) {
        self.client = client
        self.table = table
        self.logger = logger
    }

    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        var stored: [TopicPartition: Int64] = [:]
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT topic, part, next_offset FROM \(table)_offsets"), logger: logger)
        for try await (topic, part, next) in rows.decode((String, Int, Int64).self) {
            stored[TopicPartition(topic: topic, partition: Int32(part))] = next
        }
        return stored
    }

    func rowCount() async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM \(table)_values"), logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// - Returns: how many messages the batch held.
    func apply(_ batch: KafkaMessageBatch) async throws -> Int {
        let table = self.table
        let logger = self.logger
        let inserted = try await client.withTransaction(logger: logger) { connection -> Int in
            var inserted = 0
            for message in batch.messages {
                guard let bytes = message.value, let value = Int(String(decoding: bytes, as: UTF8.self)) else {
                    Issue.record("unreadable message at offset \(message.offset)")
                    continue
                }
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "INSERT INTO \(table)_values VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING value",
                        binds: try binds(value, message.offset)),
                    logger: logger
                )
                for try await _ in rows { inserted += 1 }
            }
            for (tp, next) in batch.nextOffsets {
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL:
                            "INSERT INTO \(table)_offsets VALUES ($1, $2, $3) ON CONFLICT (topic, part) DO UPDATE SET next_offset = EXCLUDED.next_offset",
                        binds: try binds(tp.topic, Int(tp.partition), next)
                    ),
                    logger: logger
                )
            }
            return inserted
        }
        duplicates.withLock { $0 += batch.messages.count - inserted }
        return batch.messages.count
    }

    private func binds(_ values: any PostgresEncodable...) throws -> PostgresBindings {
        var bindings = PostgresBindings()
        for value in values { try bindings.append(value) }
        return bindings
    }
}
