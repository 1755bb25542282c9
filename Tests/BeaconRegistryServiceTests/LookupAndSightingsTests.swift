import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import RegistryFeed
import RegistryTestFixtures
import ServiceLifecycle
import ServiceRuntime
import Testing

extension RegistryServiceTests {
    /// The lookup routes answered from the registry feed's cache, and broadcast verification fed by
    /// the sightings collector from device telemetry and raw events, on the real broker.
    @Suite("Lookups and sightings", .serialized)
    struct LookupAndSightingsTests {
        @Test func lookupsAnswerFromTheFeedCache() async throws {
            try await FeedHarness.run { h, client, beacon, organization in
                struct Lookup: Decodable {
                    var beaconId: String; var gateId: String; var siteId: String?; var organizationId: String?; var status: String
                }
                struct Business: Decodable { var organizationId: String; var organizationName: String? }
                struct ByUUID: Decodable { var beacons: [Lookup] }
                let uuid = beacon.uuid.uuidString
                let found = try await client.send(
                    .get, "/v1/admin/lookup/beacon?uuid=\(uuid.lowercased())&major=\(beacon.major)&minor=\(beacon.minor)", key: h.viewer
                )
                .decode(Lookup.self)
                #expect(found.beaconId == beacon.id && found.gateId == beacon.gateId && found.organizationId == organization.id)
                #expect(found.status == "active")
                let business = try await client.send(.get, "/v1/admin/lookup/business?uuid=\(uuid)&major=\(beacon.major)", key: h.viewer)
                    .decode(Business.self)
                #expect(business.organizationId == organization.id && business.organizationName == organization.name)
                let byUUID = try await client.send(.get, "/v1/admin/lookup/uuid/\(uuid)", key: h.viewer).decode(ByUUID.self)
                #expect(byUUID.beacons.contains { $0.beaconId == beacon.id })
                // The lookups read a UUID as registration does: dashes optional, any case.
                let undashed = uuid.replacingOccurrences(of: "-", with: "").lowercased()
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/uuid/\(undashed)", key: h.viewer).decode(ByUUID.self).beacons.contains {
                        $0.beaconId == beacon.id
                    })
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/business?uuid=\(undashed)&major=\(beacon.major)", key: h.viewer)
                        .decode(Business.self).organizationId == organization.id)
                let mac = try #require(beacon.mac)
                let byMAC = try await client.send(
                    .get, "/v1/admin/lookup/mac/\(mac.replacingOccurrences(of: ":", with: "-").lowercased())", key: h.viewer
                )
                .decode(Lookup.self)
                #expect(byMAC.beaconId == beacon.id)
                // Path parameters are percent-decoded: the MAC as the document writes it, colons encoded.
                let encoded = mac.replacingOccurrences(of: ":", with: "%3A")
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/mac/\(encoded)", key: h.viewer).decode(Lookup.self).beaconId == beacon.id)

                // Unknown: 404. Malformed: 400 naming the parameter. No key: 401.
                try await client.send(.get, "/v1/admin/lookup/beacon?uuid=\(uuid)&major=\(beacon.major)&minor=65535", key: h.viewer)
                    .problem(.notFound)
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/beacon?uuid=nope&major=1&minor=1", key: h.viewer).problem(.badRequest)
                        .errors?.first?.field == "uuid")
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/beacon?uuid=\(uuid)&minor=1", key: h.viewer).problem(.badRequest).errors?
                        .first?.field == "major")
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/beacon?uuid=\(uuid)&major=70000&minor=1", key: h.viewer).problem(
                        .badRequest
                    ).errors?.first?.field == "major")
                #expect(
                    try await client.send(.get, "/v1/admin/lookup/mac/zz:zz", key: h.viewer).problem(.badRequest).errors?.first?.field
                        == "mac")
                try await client.send(.get, "/v1/admin/lookup/uuid/\(uuid)", key: nil).problem(.unauthorized)
            }
        }

        @Test func sightingsFromTelemetryAndRawEventsVerifyABeacon() async throws {
            try await FeedHarness.run { h, client, beacon, _ in
                struct Verification: Decodable { var verified: Bool; var deviceCount: Int; var lastSeen: Date? }
                let before = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/verification", key: h.viewer).decode(
                    Verification.self)
                #expect(!before.verified && before.deviceCount == 0)

                let telemetryTopic = LocalStack.uniqueName("telemetry"), rawTopic = LocalStack.uniqueName("raw")
                let admin = try KafkaAdmin(configuration: FeedHarness.kafka, logger: FeedHarness.logger)
                _ = try await admin.createTopics([
                    KafkaTopicSpec(name: telemetryTopic, partitions: 2), KafkaTopicSpec(name: rawTopic, partitions: 2),
                ])
                let identity = BeaconIdentity(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor)
                let now = Date()
                let telemetry = DeviceTelemetryBatch(
                    batchId: "b_\(token())", deviceId: "dev-a-\(token())", appVersion: "1.12.0", deviceModel: "Pixel 8", receivedAt: now,
                    events: [
                        TelemetryEvent(
                            eventId: "e1", name: .regionEnter, at: now.addingTimeInterval(-30),
                            attributes: TelemetryEvent.attributes(for: identity)),
                        TelemetryEvent(eventId: "e2", name: .battery, at: now, value: 0.8),
                        // Malformed beacon attributes are not a sighting.
                        TelemetryEvent(
                            eventId: "e3", name: .rangingStart, at: now,
                            attributes: ["beaconUuid": "nope", "beaconMajor": "1", "beaconMinor": "2"]),
                    ]
                )
                let rawDevice = "dev-b-\(token())"
                let raw = RawEventEnvelope(
                    requestId: "r1", idempotencyKey: "k_\(token())", userId: "u1", deviceId: rawDevice, siteId: nil, appVersion: "1.12.0",
                    gatewayInstance: "gw", receivedAt: now, payloadFingerprint: String(repeating: "b", count: 64),
                    payload: .event(
                        AttendanceEvent(
                            id: UUID().uuidString, idempotencyKey: "k", userId: "u1", deviceId: rawDevice,
                            timestamp: now.addingTimeInterval(-5),
                            type: .checkin, siteId: "s", beacon: identity, rssiSeries: [-70], txPower: -59, motion: nil, geofence: nil,
                            handshake: nil,
                            network: .init(online: true, latencyMs: 50), app: .init(version: "1.12.0", build: 1),
                            device: .init(model: "Pixel 8", os: "Android 15"),
                            tEnd: nil, queuedOffline: nil, location: nil, attestation: nil
                        ))
                )
                let producer = try KafkaProducer(
                    configuration: KafkaProducerConfiguration(client: FeedHarness.kafka), logger: FeedHarness.logger)
                var configuration = BeaconSightingCollector.Configuration()
                configuration.groupId = LocalStack.uniqueName("sightings")
                configuration.telemetryTopic = telemetryTopic
                configuration.rawEventsTopic = rawTopic
                let collector = try BeaconSightingCollector(
                    kafka: FeedHarness.kafka, repository: h.repository, configuration: configuration, logger: FeedHarness.logger)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await producer.run() }
                    group.addTask { try await collector.run() }
                    defer { group.cancelAll() }
                    let t = try ProtocolCodec.wire.record(for: telemetry), r = try ProtocolCodec.wire.record(for: raw)
                    let reports = try await producer.sendBatch([
                        KafkaOutgoingMessage(topic: telemetryTopic, key: t.key, value: t.value),
                        KafkaOutgoingMessage(topic: rawTopic, key: r.key, value: r.value),
                        KafkaOutgoingMessage(topic: rawTopic, key: "junk", value: Array("not json".utf8)),
                    ])
                    #expect(reports.allSatisfy { $0.isDelivered })
                    let deadline = ContinuousClock.now + .seconds(60)
                    var verification = before
                    while ContinuousClock.now < deadline {
                        verification = try await client.send(
                            .get, "/v1/admin/beacons/\(beacon.id)/verification?withinMinutes=5", key: h.viewer
                        )
                        .decode(Verification.self)
                        if verification.deviceCount >= 2 { break }
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    #expect(verification.verified && verification.deviceCount == 2)
                    #expect(abs((verification.lastSeen ?? .distantPast).timeIntervalSince(now.addingTimeInterval(-5))) < 0.01)
                }
            }
        }
    }
}

extension RegistryServiceTests.LookupAndSightingsTests {
    /// A database that refuses every sighting does not hold the service up at shutdown: the retries
    /// end, and the batch, uncommitted, is read again at the next start.
    @Test(.timeLimit(.minutes(1))) func aShutdownEndsTheRetriesOfSightingsTheDatabaseRefuses() async throws {
        try LocalStack.ensureStarted()
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_sightings_down") { db, schema in
            // Every insert is refused, and counted outside the refused transaction (a sequence).
            for statement: PostgresQuery in [
                "CREATE SEQUENCE \(unescaped: schema).refused_inserts",
                """
                CREATE FUNCTION \(unescaped: schema).refuse_sightings() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM nextval('\(unescaped: schema).refused_inserts'); RAISE EXCEPTION 'disk full, say'; END $$
                """,
                """
                CREATE TRIGGER refuse BEFORE INSERT ON \(unescaped: schema).beacon_sightings
                FOR EACH ROW EXECUTE FUNCTION \(unescaped: schema).refuse_sightings()
                """,
            ] {
                try await db.query(statement)
            }
            func refusedInserts() async throws -> Int {
                let rows = try await db.query(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \(unescaped: schema).refused_inserts")
                for try await count in rows.decode(Int.self) { return count }
                return 0
            }
            let repository = PostgresRegistryRepository(client: db, logger: FeedHarness.logger, tokenSigner: ServiceTestDatabase.signer)
            let telemetryTopic = LocalStack.uniqueName("telemetry"), rawTopic = LocalStack.uniqueName("raw")
            let admin = try KafkaAdmin(configuration: FeedHarness.kafka, logger: FeedHarness.logger)
            _ = try await admin.createTopics([
                KafkaTopicSpec(name: telemetryTopic, partitions: 1), KafkaTopicSpec(name: rawTopic, partitions: 1),
            ])
            var configuration = BeaconSightingCollector.Configuration()
            configuration.groupId = LocalStack.uniqueName("sightings")
            configuration.telemetryTopic = telemetryTopic
            configuration.rawEventsTopic = rawTopic
            let collector = try BeaconSightingCollector(
                kafka: FeedHarness.kafka, repository: repository, configuration: configuration, logger: FeedHarness.logger)
            let identity = BeaconIdentity(uuid: "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34", major: 7, minor: 9)
            let telemetry = DeviceTelemetryBatch(
                batchId: "b_\(token())", deviceId: "dev-\(token())", appVersion: "1.12.0", deviceModel: "Pixel 8", receivedAt: Date(),
                events: [
                    TelemetryEvent(
                        eventId: "e1", name: .regionEnter, at: Date().addingTimeInterval(-30),
                        attributes: TelemetryEvent.attributes(for: identity))
                ])
            let producer = try KafkaProducer(
                configuration: KafkaProducerConfiguration(client: FeedHarness.kafka), logger: FeedHarness.logger)
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(services: [.init(service: collector)], logger: FeedHarness.logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await producer.run() }
                defer { tasks.cancelAll() }
                let record = try ProtocolCodec.wire.record(for: telemetry)
                let reports = try await producer.sendBatch([
                    KafkaOutgoingMessage(topic: telemetryTopic, key: record.key, value: record.value)
                ])
                #expect(reports.allSatisfy { $0.isDelivered })
                let running = Task { try await group.run() }
                // Two attempts refused: the collector is retrying the batch.
                try await eventually("two refused attempts", timeout: .seconds(40)) { try await refusedInserts() >= 2 }
                let stopping = ContinuousClock.now
                await group.triggerGracefulShutdown()
                try await running.value
                #expect(ContinuousClock.now - stopping < .seconds(20), "the retries held the shutdown up")
                // Nothing committed: the batch is read again at the next start.
                let probe = try KafkaConsumer(
                    configuration: KafkaConsumerConfiguration(
                        client: FeedHarness.kafka, groupId: configuration.groupId, topics: [telemetryTopic]),
                    logger: FeedHarness.logger)
                let committed = try await probe.committed([TopicPartition(topic: telemetryTopic, partition: 0)])
                #expect(committed.values.allSatisfy { $0 <= 0 }, "\(committed)")
            }
        }
    }
}

/// A registry fixture (organization, namespace, site, gate, beacon with a MAC) published on the
/// real `registry.changes`, read back by a `RegistryCacheLoader` into the cache the router answers
/// lookups from.
enum FeedHarness {
    static let logger = LocalStack.logger(label: "registry-lookup-tests")
    static var kafka: KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks, clientId: "registry-lookup-tests")
    }

    static func run(_ body: @escaping @Sendable (Harness, any TestClientProtocol, Beacon, Organization) async throws -> Void) async throws {
        try LocalStack.ensureStarted()
        _ = try await TopicBootstrap.ensureTopics(KafkaAdmin(configuration: kafka, logger: logger))
        let feed = try await LocalStack.newRegistryFeedTopic()
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_lookup") { client, _ in
            let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: ServiceTestDatabase.signer)
            let harness = Harness(
                repository: repository, db: client,
                admin: try await repository.createAPIKey(name: "lookup admin", role: .admin).secret,
                installer: try await repository.createAPIKey(name: "lookup installer", role: .installer).secret,
                viewer: try await repository.createAPIKey(name: "lookup viewer", role: .viewer).secret
            )
            let fixture = try await RegistryFixture.make(repository)
            _ = try await repository.allocateNamespace(organizationId: fixture.organization.id)
            let minor = try await repository.allocateMinor(gateId: fixture.gate.id)
            let mac = (0..<6).map { _ in String(format: "%02X", UInt8.random(in: 0...255)) }.joined(separator: ":")
            let beacon = try await repository.registerBeacon(
                NewBeacon(
                    uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor, serial: "CP28-\(minor.minor)",
                    mac: mac, txPower: -59, advIntervalMs: 350, gateId: fixture.gate.id
                ))
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
            let publisher = RegistryChangePublisher(client: client, producer: producer, topic: feed, logger: logger)
            let cache = RegistryCache()
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: RegistryCacheLoaderConfiguration(kafka: kafka, topic: feed), logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                group.addTask { try await loader.run() }
                defer { group.cancelAll() }
                let deadline = ContinuousClock.now + .seconds(60)
                while ContinuousClock.now < deadline, cache.beacon(id: beacon.id) == nil {
                    _ = try await publisher.publishRound()
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(cache.beacon(id: beacon.id) != nil, "the beacon reached the cache through the feed")
                let app = Application(router: buildRouter(repository: repository, devices: ServiceTestDatabase.devices, lookups: cache))
                try await app.test(.router) { testClient in
                    try await body(harness, testClient, beacon, fixture.organization)
                }
            }
        }
    }
}
