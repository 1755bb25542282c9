import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import ServiceRuntime
import SessionMergerCore
import Synchronization
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// The whole pipeline against the real local broker and PostgreSQL: topics of its own per test.
    @Suite("Pipeline on the local broker", .serialized, .timeLimit(.minutes(5)))
    struct PipelineTests {
        let logger = LocalStack.logger(label: "merger-pipeline-tests")

        struct Topics {
            let vetted = LocalStack.uniqueName("mt.vetted")
            let verdicts = LocalStack.uniqueName("mt.verdicts")
            let sessions = LocalStack.uniqueName("mt.sessions")
            let dlq = LocalStack.uniqueName("mt.dlq")
        }

        func kafka() -> KafkaConfiguration {
            KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)
        }

        func createTopics(_ topics: Topics) async throws {
            let admin = try KafkaAdmin(configuration: kafka(), logger: logger)
            try await admin.createTopics([
                KafkaTopicSpec(name: topics.vetted, partitions: 3), KafkaTopicSpec(name: topics.verdicts, partitions: 1),
                KafkaTopicSpec(name: topics.sessions, partitions: 1), KafkaTopicSpec(name: topics.dlq, partitions: 1),
            ])
        }

        func configuration(_ topics: Topics, group: String) -> SessionMergerConfiguration {
            var configuration = SessionMergerConfiguration(
                consumer: ConsumerGroupConfiguration(groupId: group, maxBatchSize: 7), outboxPollInterval: .milliseconds(50),
                // The broker's committed offsets stay absent: only merger.consumer_offsets can resume.
                commitOffsetsToBroker: false)
            configuration.topics[.vettedEvents] = topics.vetted
            configuration.topics[.verdicts] = topics.verdicts
            configuration.topics[.sessions] = topics.sessions
            configuration.topics[.deadLetters] = topics.dlq
            return configuration
        }

        func readAll<M: TopicMessage>(
            _ type: M.Type, topic: String, expecting count: Int, timeout: Duration = .seconds(30)
        ) async throws -> [M] {
            let reader = KafkaPartitionReader(configuration: kafka(), logger: logger)
            let deadline = ContinuousClock.now + timeout
            var messages: [M] = []
            repeat {
                let raw = try await reader.read(
                    TopicPartition(topic: topic, partition: 0), from: 0, maxMessages: 100_000, timeoutMs: 3_000, quietMs: 300)
                messages = try raw.compactMap { try $0.value.map { try ProtocolCodec.wire.decode(M.self, from: $0) } }
                if messages.count >= count { break }
                try await Task.sleep(for: .milliseconds(200))
            } while ContinuousClock.now < deadline
            return messages
        }

        func produce(_ events: [VettedEvent], to topic: String, producer: KafkaProducer) async throws {
            let messages = try events.map { event in
                KafkaOutgoingMessage(topic: topic, key: event.partitionKey.value, value: try ProtocolCodec.wire.encode(event))
            }
            let reports = try await producer.sendBatch(messages)
            #expect(reports.allSatisfy { $0.isDelivered })
        }

        /// A user's day: check-in, heartbeats, check-out, several users.
        func workload(users: [String], site: String, now: Date) -> [VettedEvent] {
            var events: [VettedEvent] = []
            for user in users {
                let sk = "sk-\(user)"
                events.append(Make.checkIn(user: user, site: site, at: now.minus(hours: 4), sessionKey: sk))
                for h in stride(from: 3.5, through: 1.0, by: -0.5) {
                    events.append(Make.heartbeat(user: user, at: now.minus(hours: h), sessionKey: sk))
                }
                events.append(Make.checkOut(user: user, at: now.minus(hours: 0.5), sessionKey: sk))
            }
            return events
        }

        @Test func aRestartedMergerResumesFromItsStoredOffsetsWithNothingLostOrDuplicated() async throws {
            try LocalStack.ensureStarted()
            let topics = Topics()
            try await createTopics(topics)
            let group = LocalStack.uniqueName("merger-restart")
            let config = configuration(topics, group: group)
            let site = "site-\(token())"
            let users = (0..<6).map { _ in "u-\(token())" }
            let now = Date()
            let firstHalf = workload(users: Array(users[..<3]), site: site, now: now)
            let secondHalf = workload(users: Array(users[3...]), site: site, now: now)

            try await MergerDB.withSchema { client, _ in
                let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka()), logger: logger)
                let producing = Task { try await producer.run() }
                defer { producer.beginShutdown() }
                let sink = KafkaDeadLetterSink(producer: producer, topic: topics.dlq)

                // Instance A dies right after its second commit (before producing that batch's verdicts).
                let commits = Atomic(0)
                let processorA = VettedBatchProcessor(client: client, configuration: config, deadLetters: sink, logger: logger)
                let a = try MergerPipeline(
                    kafka: kafka(), configuration: config, processor: processorA, producer: producer, logger: logger,
                    afterCommit: { _ in
                        if commits.add(1, ordering: .relaxed).newValue == 2 { try await Task.sleep(for: .seconds(3_600)) }
                    })
                let runningA = Task { try await a.run() }
                try await produce(firstHalf, to: topics.vetted, producer: producer)
                let deadline = ContinuousClock.now + .seconds(60)
                while commits.load(ordering: .relaxed) < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
                #expect(commits.load(ordering: .relaxed) >= 2)
                runningA.cancel()
                _ = try? await runningA.value

                // Instance B, same group: the broker has no committed offsets for it.
                let processorB = VettedBatchProcessor(client: client, configuration: config, deadLetters: sink, logger: logger)
                let b = try MergerPipeline(kafka: kafka(), configuration: config, processor: processorB, producer: producer, logger: logger)
                let runningB = Task { try await b.run() }
                try await produce(secondHalf, to: topics.vetted, producer: producer)

                let db = MergerDBView(client: client)
                let all = firstHalf + secondHalf
                let keys = all.map(\.raw.idempotencyKey)
                let waitUntil = ContinuousClock.now + .seconds(60)
                while try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys))") < all.count,
                    ContinuousClock.now < waitUntil
                {
                    try await Task.sleep(for: .milliseconds(100))
                }
                b.stop()
                try await runningB.value

                // Every event exactly once, every user one closed session.
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys))") == all.count)
                #expect(
                    try await db.count(
                        "SELECT count(DISTINCT idempotency_key)::int FROM events WHERE idempotency_key = ANY(\(keys)) AND outcome = 'accepted'"
                    ) == all.count)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM sessions WHERE user_id = ANY(\(users)) AND status = 'closed' AND close_reason = 'check_out'"
                    ) == users.count)
                let stored = try await processorB.storedOffsets(for: (0..<3).map { TopicPartition(topic: topics.vetted, partition: $0) })
                #expect(stored.values.reduce(0, +) == Int64(all.count))

                // B resumed where A's transactions ended: it answered nothing twice (no `duplicate`).
                let verdicts = try await readAll(AttendanceVerdict.self, topic: topics.verdicts, expecting: all.count - 7)
                // At most the batch A committed without producing its verdicts (7 events) is unanswered.
                try #require(verdicts.count >= all.count - 7, "only \(verdicts.count) verdicts of \(all.count) events came back")
                #expect(!verdicts.contains { $0.outcome != .accepted })
                #expect(Set(verdicts.map(\.idempotencyKey)).count == verdicts.count)

                // Session changes: the outbox drains to the sessions topic, ending closed for every user.
                let publisher = SessionChangePublisher(client: client, producer: producer, configuration: config, logger: logger)
                while try await publisher.publishRound().published > 0 {}
                #expect(try await db.count("SELECT count(*)::int FROM session_change_outbox WHERE user_id = ANY(\(users))") == 0)
                let changes = try await readAll(SessionChange.self, topic: topics.sessions, expecting: users.count * 2)
                for user in users {
                    let mine = changes.filter { $0.userId == user }
                    try #require(!mine.isEmpty, "no session change read for \(user)")
                    #expect(mine.first?.change == .opened)
                    #expect(mine.last?.change == .closed)
                    #expect(mine.map(\.version) == Array(1...Int64(mine.count)))
                }
                producer.beginShutdown()
                try await producing.value
            }
        }

        @Test func undecodableMessagesGoToTheDeadLetterTopic() async throws {
            try LocalStack.ensureStarted()
            let topics = Topics()
            try await createTopics(topics)
            let config = configuration(topics, group: LocalStack.uniqueName("merger-dlq"))
            try await MergerDB.withSchema { client, _ in
                let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka()), logger: logger)
                let producing = Task { try await producer.run() }
                let processor = VettedBatchProcessor(
                    client: client, configuration: config, deadLetters: KafkaDeadLetterSink(producer: producer, topic: topics.dlq),
                    logger: logger)
                let pipeline = try MergerPipeline(
                    kafka: kafka(), configuration: config, processor: processor, producer: producer, logger: logger)
                let running = Task { try await pipeline.run() }
                let user = "u-\(token())"
                let good = Make.checkIn(user: user, site: "site-\(token())", at: Date().minus(minutes: 5), sessionKey: "sk-\(token())")
                _ = try await producer.sendBatch([
                    KafkaOutgoingMessage(topic: topics.vetted, key: user, value: Array("garbage".utf8), partition: 0),
                    KafkaOutgoingMessage(topic: topics.vetted, key: user, value: try ProtocolCodec.wire.encode(good), partition: 0),
                ])
                let letters = try await readAll(DeadLetter.self, topic: topics.dlq, expecting: 1)
                #expect(letters.count == 1)
                #expect(letters.first?.key == user)
                #expect(letters.first?.payload == Data("garbage".utf8))
                let verdicts = try await readAll(AttendanceVerdict.self, topic: topics.verdicts, expecting: 1)
                #expect(verdicts.map(\.idempotencyKey) == [good.raw.idempotencyKey])
                let deadline = ContinuousClock.now + .seconds(10)
                var stored: Int64?
                repeat {
                    stored = try await processor.storedOffsets(for: [TopicPartition(topic: topics.vetted, partition: 0)]).values.first
                    if stored == 2 { break }
                    try await Task.sleep(for: .milliseconds(100))
                } while ContinuousClock.now < deadline
                #expect(stored == 2)
                pipeline.stop()
                try await running.value
                producer.beginShutdown()
                try await producing.value
            }
        }
    }
}

/// Count queries on a running client.
struct MergerDBView {
    let client: PostgresClient

    func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await client.query(query, logger: LocalStack.logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
