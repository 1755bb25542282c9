import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayCore
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime
import SessionMergerService
import Synchronization
import Testing

@testable import IngestGatewayService

/// The session merger's tables, built by its own migrations in a schema of the tests' own (the
/// gateway only reads them): the database may also hold the merger's real schema, which these tests
/// leave alone.
enum MergerSchema {
    static let name = "gateway_test_merger"

    /// The merger's own migrations build the schema (`ServiceMigrations.merger` with this schema
    /// name), so the fake writes and the gateway reads exactly the tables the real merger has. The
    /// migration runner serializes the suites that call it at once.
    static func create(_ client: PostgresClient, logger: Logger) async throws {
        try await ServiceMigrations.merger.apply(client: client, schema: name, logger: logger)
    }
}

/// Plays the policy service and the session merger on the real broker: reads the raw topic, records
/// each event in `merger.events` (unique key; a repeat is a duplicate, or a payload mismatch when
/// the fingerprint differs), and produces the verdict to the verdict topic for the gateway instance
/// that holds the request. An event whose `motion.state` is `stationary` is refused
/// (motion gating, action walk_to_gate); site `S_SLOW` is answered after `slowDelay`.
struct FakeMerger: Service {
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let db: PostgresClient
    let verdictTopic: String
    let slowDelay: Duration
    let logger: Logger

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await consumer.run() }
            for await batch in consumer.batches {
                for message in batch.messages {
                    guard let envelope = try? ProtocolCodec.wire.decode(RawEventEnvelope.self, from: message.value ?? []) else { continue }
                    if envelope.siteId == "S_SLOW" {
                        group.addTask {
                            try? await Task.sleep(for: slowDelay)
                            if !Task.isCancelled { await decideOrRecord(envelope) }
                        }
                    } else {
                        await decideOrRecord(envelope)
                    }
                }
            }
            group.cancelAll()
            try await group.waitForAll()
        }
    }

    func decideOrRecord(_ envelope: RawEventEnvelope) async {
        do {
            try await decide(envelope)
        } catch {
            Issue.record("the fake merger failed: \(String(reflecting: error))")
        }
    }

    func decide(_ envelope: RawEventEnvelope) async throws {
        var rejected = false
        if case .event(let event) = envelope.payload, event.motion?.state == .stationary { rejected = true }
        let receipt = "rcpt_\(UUID().uuidString.prefix(12).lowercased())"
        let sessionId = rejected ? nil : "ses_\(envelope.userId)"
        let reasons = rejected ? ["not walking: motion gating"] : []
        let action: AppAction = rejected ? .walkToGate : .noAction
        let now = Date()
        let envelopeJSON = try ProtocolCodec.wire.encodeToString(envelope)
        let reasonsJSON = String(decoding: try JSONEncoder().encode(reasons), as: UTF8.self)
        let inserted = try await db.query(
            """
            INSERT INTO gateway_test_merger.events (idempotency_key, request_id, user_id, device_id, site_id, kind, event_type, session_key,
                event_time, received_at, recorded_at, payload_fingerprint, outcome, http_status, server_receipt_id, session_id,
                reasons, action, retry_after_seconds, policy_version, risk_score, decided_at, envelope, gateway_instance)
            VALUES (\(envelope.idempotencyKey), \(envelope.requestId), \(envelope.userId), \(envelope.deviceId), \(envelope.siteId),
                \(envelope.payload.kind.rawValue), \(envelope.payload.eventType.rawValue), \(envelope.payload.sessionKey),
                \(envelope.payload.eventTime), \(envelope.receivedAt), \(now), \(envelope.payloadFingerprint),
                \(rejected ? "rejected" : "accepted"), \(rejected ? 409 : 201), \(receipt), \(sessionId),
                \(reasonsJSON)::jsonb, \(action.rawValue), NULL, 1, NULL, \(now), \(envelopeJSON)::json, \(envelope.gatewayInstance))
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING idempotency_key
            """, logger: logger
        ).collect()
        var outcome: VerdictOutcome = rejected ? .rejected : .accepted
        var finalReceipt: String? = rejected ? nil : receipt
        var finalSession = sessionId
        if inserted.isEmpty {
            let rows = try await db.query(
                "SELECT payload_fingerprint, server_receipt_id, session_id FROM gateway_test_merger.events WHERE idempotency_key = \(envelope.idempotencyKey)",
                logger: logger
            )
            for try await (fingerprint, storedReceipt, storedSession) in rows.decode((String, String, String?).self) {
                outcome = fingerprint == envelope.payloadFingerprint ? .duplicate : .payloadMismatch
                finalReceipt = storedReceipt
                finalSession = storedSession
            }
        }
        let verdict = AttendanceVerdict(
            requestId: envelope.requestId, idempotencyKey: envelope.idempotencyKey, userId: envelope.userId,
            deviceId: envelope.deviceId, siteId: envelope.siteId, outcome: outcome, serverReceiptId: finalReceipt,
            sessionId: finalSession, reasons: outcome == .rejected ? reasons : [], action: outcome == .rejected ? action : .noAction,
            policyVersion: 1, eventTime: envelope.payload.eventTime, decidedAt: now, gatewayInstance: envelope.gatewayInstance
        )
        try await producer.send(
            KafkaOutgoingMessage(
                topic: verdictTopic, key: verdict.partitionKey.value, value: try ProtocolCodec.wire.encode(verdict)
            ))
    }
}

/// The real local stack: topics of the test's own, the gateway's producer and verdict reader, the
/// fake merger, PostgreSQL with the merger's tables.
struct LiveHarness: Sendable {
    let topics: GatewayTopics
    let kafka: KafkaConfiguration
    let producer: KafkaProducer
    let db: PostgresClient
    let repository: PostgresAttendanceReadRepository
    let logger: Logger

    static func run(_ body: @escaping @Sendable (LiveHarness) async throws -> Void) async throws {
        try LocalStack.ensureStarted()
        let logger = LocalStack.logger(label: "gateway-live-tests")
        let kafka = KafkaConfiguration(
            bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks, clientId: "gateway-live-tests")
        let topics = GatewayTopics(
            rawEvents: LocalStack.uniqueName("gw.raw"), verdicts: LocalStack.uniqueName("gw.verdicts"),
            deviceTelemetry: LocalStack.uniqueName("gw.telemetry"), registryChanges: LocalStack.uniqueName("gw.registry")
        )
        let admin = try KafkaAdmin(configuration: kafka, logger: logger)
        _ = try await admin.createTopics([
            KafkaTopicSpec(name: topics.rawEvents, partitions: 3), KafkaTopicSpec(name: topics.verdicts, partitions: 3),
            KafkaTopicSpec(name: topics.deviceTelemetry, partitions: 1), .compacted(topics.registryChanges, partitions: 1),
        ])
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
        var mergerConfiguration = KafkaConsumerConfiguration(
            client: kafka, groupId: LocalStack.uniqueName("gw-fake-merger"), topics: [topics.rawEvents])
        mergerConfiguration.pollTimeoutMs = 20
        let mergerConsumer = try KafkaConsumer(configuration: mergerConfiguration, logger: logger)
        try await LocalStack.withPostgres { db in
            try await MergerSchema.create(db, logger: logger)
            let merger = FakeMerger(
                consumer: mergerConsumer, producer: producer, db: db, verdictTopic: topics.verdicts, slowDelay: .milliseconds(1_500),
                logger: logger
            )
            let harness = LiveHarness(
                topics: topics, kafka: kafka, producer: producer, db: db,
                repository: PostgresAttendanceReadRepository(client: db, logger: logger, schema: MergerSchema.name), logger: logger
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                group.addTask { try await merger.run() }
                defer {
                    mergerConsumer.triggerShutdown()
                    group.cancelAll()
                }
                // The fake merger answers only once the group gave it the raw topic's partitions: with
                // every suite joining groups at once, that took longer than a gateway's verdict wait,
                // and a first event was answered 202 instead of 201.
                try #require(
                    await poll(timeout: .seconds(30)) { mergerConsumer.assignment.count == 3 },
                    "the fake merger's partitions assigned")
                try await body(harness)
            }
        }
    }

    /// A gateway instance (pipeline, verdict reader) on these topics, its router under test.
    func gateway(
        instanceId: String = "gw-live-\(UUID().uuidString.prefix(6))", wait: Duration = .seconds(5),
        _ body: @escaping @Sendable (IngestPipeline, VerdictListener, any TestClientProtocol) async throws -> Void
    ) async throws {
        var settings = GatewayConfiguration()
        settings.verdictWait = wait
        settings.topics = topics
        settings.rateLimit = TokenBucketConfiguration(ratePerSecond: 1_000, burst: 1_000)
        let publisher = KafkaGatewayPublisher(producer: producer, topics: topics)
        let pipeline = IngestPipeline(
            instanceId: instanceId, settings: settings, publisher: publisher, cache: RegistryCache(), logger: logger)
        let listener = try VerdictListener(kafka: kafka, topic: topics.verdicts, pipeline: pipeline, logger: logger)
        let dependencies = GatewayDependencies(
            pipeline: pipeline, publisher: publisher, repository: repository, signer: TestKeys.signer, cache: pipeline.cache)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            defer { group.cancelAll() }
            #expect(await listener.waitUntilAssigned(timeout: .seconds(30)), "verdict partitions assigned")
            let app = Application(router: buildRouter(dependencies: dependencies))
            try await app.test(.router) { client in
                try await body(pipeline, listener, client)
            }
        }
    }
}
