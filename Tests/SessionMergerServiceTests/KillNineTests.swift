import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import SessionMergerCore
import Testing

@testable import SessionMergerService

#if canImport(Glibc)
import Glibc
#endif

/// The built `session-merger` executable, killed with SIGKILL in the middle of a stream and started
/// again: nothing lost, nothing applied twice in PostgreSQL, every session change published.
/// The executable is the one built beside this test bundle (`swift build --build-tests` builds every
/// product); the test fails, never skips, when it is not there.
enum MergerBinary {
    static let path = LocalStack.builtProduct("session-merger").path
    static var exists: Bool { FileManager.default.isExecutableFile(atPath: path) }
}

extension SessionMergerServiceTests {
    @Suite("kill -9 of the executable", .timeLimit(.minutes(5)))
    struct KillNineTests {
        let logger = LocalStack.logger(label: "merger-kill-tests")

        func start(environment: [String: String], log: String) throws -> Process {
            try #require(MergerBinary.exists, "no session-merger executable at \(MergerBinary.path) (swift build --build-tests builds it)")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: MergerBinary.path)
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            handle.seekToEndOfFile()
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            return process
        }

        @Test func killNineMidStreamLosesAndDuplicatesNothing() async throws {
            try LocalStack.ensureStarted()
            let kafka = KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)
            let vetted = LocalStack.uniqueName("mk.vetted"), sessions = LocalStack.uniqueName("mk.sessions")
            let verdicts = LocalStack.uniqueName("mk.verdicts"), dlq = LocalStack.uniqueName("mk.dlq")
            try await KafkaAdmin(configuration: kafka, logger: logger).createTopics([
                KafkaTopicSpec(name: vetted, partitions: 3), KafkaTopicSpec(name: sessions, partitions: 1),
                KafkaTopicSpec(name: verdicts, partitions: 1), KafkaTopicSpec(name: dlq, partitions: 1),
            ])
            var environment = [
                "HTTP_PORT": "0", "LOG_LEVEL": "warning", "KAFKA_BROKERS": LocalStack.brokers,
                "MERGER_GROUP_ID": LocalStack.uniqueName("merger-kill"), "TOPIC_VETTED_EVENTS": vetted,
                "TOPIC_SESSIONS": sessions, "TOPIC_VERDICTS": verdicts, "TOPIC_DEAD_LETTERS": dlq,
                "MERGER_MAX_BATCH": "20", "MERGER_OUTBOX_POLL_MS": "50", "MERGER_COMMIT_TO_BROKER": "false",
            ]
            let log = "/tmp/session-merger-kill-\(token()).log"

            let site = "site-\(token())", now = Date()
            let users = (0..<30).map { _ in "u-\(token())" }
            var events: [VettedEvent] = []
            for user in users {
                let sk = "sk-\(user)"
                events.append(Make.checkIn(user: user, site: site, at: now.minus(hours: 5), sessionKey: sk))
                for h in stride(from: 4.5, through: 1.5, by: -0.5) {
                    events.append(Make.heartbeat(user: user, at: now.minus(hours: h), sessionKey: sk))
                }
                events.append(Make.checkOut(user: user, at: now.minus(hours: 1), sessionKey: sk))
            }
            // Interleave the users, as a real stream would be.
            let perUser = events.count / users.count
            events = (0..<perUser).flatMap { i in users.indices.map { events[$0 * perUser + i] } }
            let keys = events.map(\.raw.idempotencyKey)
            let stream = events

            try await MergerDB.withSchema { client, schema in
                environment["MERGER_SCHEMA"] = schema
                let db = MergerDBView(client: client)
                let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
                let producing = Task { try await producer.run() }
                let first = try start(environment: environment, log: log)
                let streaming = Task {
                    for chunk in stride(from: 0, to: stream.count, by: 10) {
                        let messages = try stream[chunk..<min(chunk + 10, stream.count)].map { event in
                            KafkaOutgoingMessage(topic: vetted, key: event.partitionKey.value, value: try ProtocolCodec.wire.encode(event))
                        }
                        _ = try await producer.sendBatch(messages)
                        try await Task.sleep(for: .milliseconds(150))
                    }
                }
                // Kill it once part of the stream is stored.
                let deadline = ContinuousClock.now + .seconds(90)
                while try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys))") < 60,
                    ContinuousClock.now < deadline
                {
                    try await Task.sleep(for: .milliseconds(20))
                }
                kill(first.processIdentifier, SIGKILL)
                let storedAtKill = try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys))")
                #expect(storedAtKill >= 60 && storedAtKill < events.count, "killed after \(storedAtKill) of \(events.count)")
                first.waitUntilExit()
                #expect(first.terminationReason == .uncaughtSignal)

                let second = try start(environment: environment, log: log)
                try await streaming.value
                let done = ContinuousClock.now + .seconds(90)
                while ContinuousClock.now < done {
                    let stored = try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys))")
                    let pending = try await db.count("SELECT count(*)::int FROM session_change_outbox WHERE user_id = ANY(\(users))")
                    if stored == events.count && pending == 0 { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                second.terminate()
                second.waitUntilExit()
                let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""

                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE idempotency_key = ANY(\(keys)) AND outcome = 'accepted'")
                        == events.count, "\(output)")
                #expect(try await db.count("SELECT count(*)::int FROM sessions WHERE user_id = ANY(\(users))") == users.count)
                #expect(
                    try await db.count(
                        """
                        SELECT count(*)::int FROM sessions WHERE user_id = ANY(\(users)) AND status = 'closed' AND close_reason = 'check_out' AND event_count = 9
                        """) == users.count)
                #expect(try await db.count("SELECT count(*)::int FROM session_change_outbox WHERE user_id = ANY(\(users))") == 0)

                // Every session's versions reached the topic, in order per user (a change published
                // twice around the kill is allowed: at-least-once, consumers keep the highest version).
                let raw = try await KafkaPartitionReader(configuration: kafka, logger: logger)
                    .read(TopicPartition(topic: sessions, partition: 0), from: 0, maxMessages: 100_000, timeoutMs: 5_000, quietMs: 500)
                let changes = try raw.compactMap { try $0.value.map { try ProtocolCodec.wire.decode(SessionChange.self, from: $0) } }
                let versionsInDB = try await client.query(
                    "SELECT user_id, version FROM sessions WHERE user_id = ANY(\(users))", logger: logger)
                var finalVersion: [String: Int64] = [:]
                for try await (user, version) in versionsInDB.decode((String, Int64).self) { finalVersion[user] = version }
                for user in users {
                    let mine = changes.filter { $0.userId == user }
                    let versions = mine.map(\.version)
                    var seen = Set<Int64>()
                    let firstSeen = versions.filter { seen.insert($0).inserted }
                    #expect(firstSeen == firstSeen.sorted(), "\(user): \(versions)")
                    let final = try #require(finalVersion[user], "\(user) has no session in PostgreSQL")
                    try #require(final >= 1, "\(user): version \(final)")
                    #expect(Set(versions) == Set(1...final), "\(user): \(versions)")
                    #expect(mine.last?.change == .closed)
                }
                producer.beginShutdown()
                try await producing.value
            }
        }
    }
}
