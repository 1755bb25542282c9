import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayCore
import KafkaClient
import LocalStackTesting
import PostgresNIO
import Prometheus
import RegistryFeed
import ServiceRuntime
import Synchronization
import Testing

@testable import IngestGatewayService

/// The gateway against the real broker and PostgreSQL, with a fake policy+merger on the raw topic.
@Suite("Gateway on the real broker and PostgreSQL", .serialized)
struct LiveTests {
    @Test("201 through the broker, replay from memory, and a forgotten key answered duplicate by the merger")
    func acceptedReplayDuplicate() async throws {
        try await LiveHarness.run { live in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let receiptBox = Mutex<String?>(nil)
            try await live.gateway { _, listener, client in
                #expect(listener.isAssigned)
                let created = try await client.postEvent(event, as: device).decode(AcceptedResponse.self, status: 201)
                #expect(created.status == .accepted)
                #expect(created.sessionId == "ses_\(device.userId)")
                receiptBox.withLock { $0 = created.serverReceiptId }
                let receipt = created.serverReceiptId
                let replay = try await client.postEvent(event, as: device)
                #expect(try replay.decode(AcceptedResponse.self, status: 200).serverReceiptId == receipt)
                #expect(replay.header(HTTPHeader.idempotentReplayed) == "true")

                let stationary = { () -> AttendanceEvent in
                    var e = Sample.event(for: device)
                    e.motion = .init(state: .stationary, steps2min: 0)
                    return e
                }()
                let refused = try await client.postEvent(stationary, as: device).problem(409, .policyConflict)
                #expect(refused.action == .walkToGate)
                #expect(refused.reasons == ["not walking: motion gating"])
            }
            // Another instance (or this one after a restart) knows nothing of the key: the event is
            // produced again and the merger answers from PostgreSQL.
            let receipt = receiptBox.withLock { $0 }
            #expect(receipt != nil)
            try await live.gateway { _, _, client in
                let again = try await client.postEvent(event, as: device)
                let body = try again.decode(AcceptedResponse.self, status: 200)
                #expect(body.status == .duplicate)
                #expect(body.serverReceiptId == receipt)
                #expect(again.header(HTTPHeader.idempotentReplayed) == "true")

                var changed = event
                changed.rssiSeries = [-50]
                try await client.postEvent(changed, as: device).problem(422, .payloadMismatch)

                // The status endpoint reads the merger's table.
                let status = try await client.device(.get, APIPath.event(idempotencyKey: event.idempotencyKey), as: device)
                    .decode(EventOutcomeResponse.self, status: 200)
                #expect(status.status == .accepted)
                #expect(status.serverReceiptId == receipt)
                #expect(status.httpStatus == 201)
            }
        }
    }

    @Test("202 after the bounded wait, then the late verdict through the status endpoint and pending")
    func queuedThenVerdict() async throws {
        try await LiveHarness.run { live in
            let device = TestDevice.make()
            let slow = {
                var event = Sample.event(for: device)
                event.siteId = "S_SLOW"
                return event
            }()
            try await live.gateway(wait: .milliseconds(500)) { _, _, client in
                let queued = try await client.postEvent(slow, as: device)
                #expect(
                    try queued.decode(AcceptedResponse.self, status: 202).statusUrl == APIPath.event(idempotencyKey: slow.idempotencyKey))
                let url = try #require(queued.headers[.location])
                var last: EventOutcomeResponse?
                try await eventually("the late verdict") {
                    last = try await client.device(.get, url, as: device).decode(EventOutcomeResponse.self, status: 200)
                    return last?.status == .accepted
                }
                #expect(last?.serverReceiptId != nil)

                // Pending: this device's event and the user's open session.
                try await live.db.query(
                    """
                    INSERT INTO gateway_test_merger.sessions (session_id, user_id, site_id, status, check_in_at, last_seen_at, session_keys, version, updated_at)
                    VALUES (\("ses_\(device.userId)"), \(device.userId), 'S_SLOW', 'open', now(), now(), '["sk_live"]'::jsonb, 1, now())
                    ON CONFLICT (session_id) DO NOTHING
                    """, logger: live.logger)
                let since = WireTimestamp.string(from: Date().addingTimeInterval(-600))
                let pending = try await client.device(.get, "\(APIPath.pending)?since=\(since)", as: device).decode(
                    PendingResponse.self, status: 200)
                #expect(pending.events.map(\.idempotencyKey) == [slow.idempotencyKey])
                #expect(pending.events.first?.status == .accepted)
                #expect(pending.openSessions.map(\.sessionId) == ["ses_\(device.userId)"])
                #expect(pending.openSessions.first?.sessionKey == "sk_live")
                #expect(pending.openSessions.first?.state == .open)
            }
        }
    }

    @Test("telemetry reaches device.telemetry keyed by device")
    func telemetry() async throws {
        try await LiveHarness.run { live in
            let device = TestDevice.make()
            try await live.gateway { _, _, client in
                let upload = TelemetryUploadRequest(
                    appVersion: "1.12.0", deviceModel: "iPhone14,5",
                    events: [TelemetryEvent(eventId: "e1", name: .outboxSent, at: Date(), value: 3)]
                )
                let response = try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(upload))
                #expect(response.status.code == 202)
            }
            let reader = KafkaPartitionReader(configuration: live.kafka, logger: live.logger)
            let messages = try await reader.read(
                TopicPartition(topic: live.topics.deviceTelemetry, partition: 0), from: 0, maxMessages: 1, timeoutMs: 10_000)
            let message = try #require(messages.first)
            #expect(message.keyString == device.deviceId)
            let batch = try ProtocolCodec.wire.decode(DeviceTelemetryBatch.self, from: message.value ?? [])
            #expect(batch.deviceId == device.deviceId)
            #expect(batch.userId == device.userId)
        }
    }

    @Test(
        "the verdict reader is not ready before its partitions are assigned, and no request is taken before it is positioned or after it lost them"
    )
    func readiness() async throws {
        try LocalStack.ensureStarted()
        let logger = LocalStack.logger(label: "gateway-live-tests")
        let kafka = KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)
        let topic = LocalStack.uniqueName("gw.verdicts.ready")
        _ = try await KafkaAdmin(configuration: kafka, logger: logger).createTopics([KafkaTopicSpec(name: topic, partitions: 2)])
        let fake = FakePipeline()
        var settings = GatewayConfiguration()
        settings.verdictWait = .milliseconds(100)
        let pipeline = IngestPipeline(
            instanceId: "gw-ready", settings: settings, publisher: fake, cache: .init(), logger: logger, verdictsRead: false)
        fake.attach(pipeline)
        let listener = try VerdictListener(kafka: kafka, topic: topic, pipeline: pipeline, logger: logger)
        let notReady = await #expect(throws: FlagReadinessCheck.NotReady.self) { try await listener.readiness.check() }
        #expect(notReady?.description == "verdict partitions are not assigned yet")
        let device = TestDevice.make()
        func submit() async -> IngestPipeline.Answer {
            let event = Sample.event(for: device)
            return await pipeline.submit(
                .init(
                    idempotencyKey: event.idempotencyKey, payload: .event(event),
                    device: AuthenticatedDevice(deviceId: device.deviceId, userId: device.userId, tokenExpiresAt: .distantFuture),
                    appVersion: nil, requestId: "req-ready"))
        }
        // Before the reader is positioned: 503, nothing produced, nothing remembered.
        let early = await submit()
        #expect(early.status == 503 && fake.envelopes.isEmpty && pipeline.table.count == 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            defer { group.cancelAll() }
            #expect(await listener.waitUntilAssigned(timeout: .seconds(30)))
            try await listener.readiness.check()
            #expect(await poll(timeout: .seconds(10)) { await submit().status != 503 })
            #expect(!fake.envelopes.isEmpty)
            // Its partitions revoked (a group session lost while the broker was away; here the reader stops):
            // a verdict produced before its next assignment would never be read, so requests are 503 again.
            group.cancelAll()
            try? await group.waitForAll()
            let produced = fake.envelopes.count
            #expect(await submit().status == 503)
            #expect(fake.envelopes.count == produced)
        }
    }
}

@Suite("Gateway application over real HTTP", .serialized)
struct LiveApplicationTests {
    @Test(
        "ready once the verdicts are assigned and the registry feed caught up; a revocation on registry.changes is refused within seconds")
    func liveApplication() async throws {
        try await LiveHarness.run { live in
            let instance = "gw-app-\(UUID().uuidString.prefix(6))"
            var settings = GatewayConfiguration()
            settings.topics = live.topics
            let configuration = ServiceConfiguration(
                serviceName: IngestGatewayServer.descriptor.name, instanceId: instance, httpHost: "127.0.0.1", httpPort: 0,
                logFormat: .text, logLevel: .warning, kafka: live.kafka, postgres: try LocalStack.postgres
            )
            let publisher = KafkaGatewayPublisher(producer: live.producer, topics: live.topics)
            let cache = RegistryCache()
            let pipeline = IngestPipeline(instanceId: instance, settings: settings, publisher: publisher, cache: cache, logger: live.logger)
            let verdicts = try VerdictListener(kafka: live.kafka, topic: live.topics.verdicts, pipeline: pipeline, logger: live.logger)
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: RegistryCacheLoaderConfiguration(kafka: live.kafka, topic: live.topics.registryChanges),
                logger: live.logger
            )
            let dependencies = GatewayDependencies(
                pipeline: pipeline, publisher: publisher, repository: live.repository, signer: TestKeys.signer, cache: cache
            )
            let app = buildApplication(
                configuration: configuration, dependencies: dependencies,
                readiness: [
                    verdicts.readiness,
                    FlagReadinessCheck(name: "registry-feed") { loader.isCaughtUp ? nil : "not caught up" },
                ],
                metrics: PrometheusCollectorRegistry(), logger: live.logger
            )
            let device = TestDevice.make()
            try await app.test(.live) { client in
                let early = try await client.execute(uri: "/health/ready", method: .get)
                #expect(early.status == .serviceUnavailable)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await verdicts.run() }
                    group.addTask { try await loader.run() }
                    defer { group.cancelAll() }
                    try await eventually("ready", timeout: .seconds(30)) {
                        try await client.execute(uri: "/health/ready", method: .get).status == .ok
                    }
                    let created = try await client.postEvent(Sample.event(for: device), as: device)
                    #expect(try created.decode(AcceptedResponse.self, status: 201).serverReceiptId != nil)
                    // Dated (IMF-fixdate): the device learns the server's clock from its answers.
                    #expect(created.headers[.date]?.hasSuffix(" GMT") == true)

                    // The registry revokes the device: refused within seconds, without a restart.
                    let change = RegistryChange(
                        entityType: .device, entityId: device.deviceId, version: 2, changedAt: Date(),
                        payload: .object(["id": .string(device.deviceId), "userId": .string(device.userId), "status": .string("revoked")])
                    )
                    try await live.producer.send(
                        KafkaOutgoingMessage(
                            topic: live.topics.registryChanges, key: change.partitionKey.value, value: try ProtocolCodec.wire.encode(change)
                        ))
                    try await eventually("the revocation", timeout: .seconds(10)) {
                        try await client.postEvent(Sample.event(for: device), as: device).status.code == 403
                    }
                    let metrics = try await client.execute(uri: "/metrics", method: .get)
                    #expect(metrics.status == .ok)
                }
            }
        }
    }
}

@Suite("Gateway settings")
struct GatewaySettingsTests {
    /// The wait for the broker to take an event is a few seconds by default, so a phone gets the 503
    /// before it gives up on the request; a value out of its range is one clear line.
    @Test func theProduceTimeoutIsReadAndChecked() throws {
        #expect(try GatewayConfiguration.load(from: EnvironmentReader([:])).produceTimeout == .seconds(3))
        #expect(try GatewayConfiguration.load(from: EnvironmentReader(["PRODUCE_TIMEOUT_MS": "5000"])).produceTimeout == .seconds(5))
        for bad in ["999", "60001", "soon"] {
            let error = try #require(throws: ConfigurationError.self) {
                try GatewayConfiguration.load(from: EnvironmentReader(["PRODUCE_TIMEOUT_MS": bad]))
            }
            #expect(error.key == "PRODUCE_TIMEOUT_MS")
        }
    }

    /// A body becomes a Kafka record in an envelope, and an undecodable one a dead letter in base64: a
    /// limit that let either pass Kafka's 1 MB would answer 503 to that phone for ever, or stall a
    /// consumer on a dead letter it cannot write.
    @Test func theBodyLimitKeepsRecordsUnderKafkasLimit() throws {
        #expect(try GatewayConfiguration.load(from: EnvironmentReader(["MAX_BODY_BYTES": "524288"])).limits.maxBodyBytes == 524_288)
        let error = try #require(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(from: EnvironmentReader(["MAX_BODY_BYTES": "1048576"]))
        }
        #expect(error.key == "MAX_BODY_BYTES")
    }

    /// An event refused as too old is a final 400 that the phone drops: the accepted age covers the 72 h
    /// a phone may be offline plus its longest retry wait (5 min), and a shorter one is refused at start.
    @Test func theEventAgeCoversTheOfflinePeriod() throws {
        #expect(
            try GatewayConfiguration.load(from: EnvironmentReader(["EVENT_MAX_AGE_SECONDS": "259500"])).limits.maxEventAge
                == .seconds(259_500))
        for bad in ["259499", "86400"] {
            let error = try #require(throws: ConfigurationError.self) {
                try GatewayConfiguration.load(from: EnvironmentReader(["EVENT_MAX_AGE_SECONDS": bad]))
            }
            #expect(error.key == "EVENT_MAX_AGE_SECONDS")
        }
    }
}
