import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PolicyServiceCore
import PostgresNIO
import RegistryFeed
import RegistryTestFixtures
import ServiceRuntime
import Testing

@testable import PolicyService

/// The policy pipeline on the real local stack: a registry fixture published through the real
/// change feed, raw events produced to a topic of the test's own, vetted events and dead letters
/// read back, offsets committed only after delivery. Each test has topics, a group and a registry
/// schema of its own, so they run side by side.
@Suite("Policy pipeline")
struct PolicyPipelineTests {
    @Test func decidesFromTheRegistryFeedAndCommitsAfterDelivery() async throws {
        try await PipelineHarness.run { h in
            let honest = h.event(key: "k_honest")
            let unknownBeacon = h.event(key: "k_unknown", minor: 65_000)
            let banned = h.event(key: "k_banned", uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
            try await h.produceRaw([honest, unknownBeacon, banned])
            try await h.produceRawBytes(Array("{not json".utf8), key: h.fixture.user.id)
            try await h.produceRawBytes(Array("{not json either".utf8), key: nil)

            let vetted = try await h.readVetted(count: 3)
            try #require(vetted.count == 3)
            let byKey = byIdempotencyKey(vetted) { $0 }
            #expect(byKey["k_honest"]?.decision.outcome == .accept)
            #expect(byKey["k_unknown"]?.decision.outcome == .reject)
            #expect(byKey["k_unknown"]?.decision.ruleResults.contains { $0.ruleId == .beaconValidity && $0.fired } == true)
            #expect(byKey["k_banned"]?.decision.outcome == .reject)
            #expect(byKey["k_banned"]?.decision.reasons.joined().contains("E2C56DB5") == true)

            let records = try await h.read(topic: h.deadLetterTopic, count: 2)
            let letters = try records.map { try ProtocolCodec.wire.decode(DeadLetter.self, from: $0.value ?? []) }
            try #require(letters.count == 2)
            #expect(letters.allSatisfy { $0.reason == .decodeFailed && $0.consumer == h.groupId })
            // Keyed as every consumer keys its dead letters: the original key, else the source partition.
            #expect(records.map(\.keyString) == letters.map(\.partitionKey.value))
            #expect(Set(letters.map(\.key)) == [h.fixture.user.id, nil])

            // Committed only after delivery: the group's committed offset reaches the end.
            try await eventually("offsets committed") { try await h.committedRawOffset() == 5 }
        }
    }

    @Test("the pipeline forgets users idle past the history's retention, and keeps the ones it just saw")
    func theHistoryForgetsIdleUsers() async throws {
        let history = PolicyHistory()
        try await PipelineHarness.run(history: history) { h in
            let old = h.event(key: "k_old", time: Date().addingTimeInterval(-PolicyPipeline.historyRetention - 3_600), user: "u_idle")
            history.record(PunchRecord(event: old, registry: RegistryCacheView(cache: h.cache)))
            #expect(history.userCount == 1)
            try await h.produceRaw([h.event(key: "k_now")])
            let nowVetted = try await h.readVetted(count: 1)
            try #require(nowVetted.count == 1)
            #expect(nowVetted.first?.decision.outcome == .accept)
            try await eventually("the idle user pruned") { history.lastPunch(userId: "u_idle") == nil }
            #expect(history.lastPunch(userId: h.fixture.user.id)?.idempotencyKey == "k_now")
        }
    }

    /// A restart (or a rebalance) does not reset the history rules: the punches an earlier instance
    /// accepted are read from the policy's database, and what this one accepts is stored there.
    @Test func aRestartedPolicyRemembersThePunchesAcceptedBeforeIt() async throws {
        try await PipelineHarness.run(storingPunches: true) { h in
            let store = try #require(h.punchStore)
            let view = RegistryCacheView(cache: h.cache)
            // Accepted and stored by the instance before the restart, 100 s ago, at this gate.
            let before = h.event(key: "k_before_restart", time: Date().addingTimeInterval(-100))
            try await store.append([PunchRecord(event: before, registry: view)])

            try await h.produceRaw([h.event(key: "k_repeat", time: Date().addingTimeInterval(-90))])
            let repeatVetted = try await h.readVetted(count: 1)
            try #require(repeatVetted.count == 1)
            let repeated = repeatVetted.first?.decision
            #expect(repeated?.outcome == .reject, "\(String(describing: repeated?.reasons))")
            #expect(repeated?.ruleResults.contains { $0.ruleId == .rateLimit && $0.fired } == true)

            try await h.produceRaw([h.event(key: "k_now")])
            let accepted = try await h.readVetted(count: 2).first { $0.raw.idempotencyKey == "k_now" }?.decision
            #expect(accepted?.outcome == .accept, "\(String(describing: accepted?.reasons))")
            try await eventually("the accepted check-in stored") {
                try await store.punches(userIds: [h.fixture.user.id], since: .distantPast).map(\.idempotencyKey) == [
                    "k_before_restart", "k_now",
                ]
            }
        }
    }

    @Test func revokedDeviceIsRefusedOnceTheFeedCarriesIt() async throws {
        try await PipelineHarness.run { h in
            try await h.produceRaw([h.event(key: "k_before")])
            let beforeVetted = try await h.readVetted(count: 1)
            try #require(beforeVetted.count == 1)
            #expect(beforeVetted.first?.decision.outcome == .accept)

            _ = try await h.repository.revokeDevice(id: h.fixture.device.id)
            try await h.publishRegistryChanges()
            try await eventually("revocation in the cache") { h.cache.device(id: h.fixture.device.id)?.isActive == false }

            try await h.produceRaw([h.event(key: "k_after", time: Date().addingTimeInterval(-1))])
            let after = try await h.readVetted(count: 2).first { $0.raw.idempotencyKey == "k_after" }
            #expect(after?.decision.outcome == .reject)
            #expect(after?.decision.ruleResults.contains { $0.ruleId == .deviceBinding && $0.fired } == true)
        }
    }

    /// A phone enrolled at the door and walked in: its check-in reaches the policy before the
    /// registry has published the device. No final refusal from that stale view: the batch waits
    /// for the feed as of the event's receipt, and the check-in is accepted.
    @Test func aCheckInRightAfterEnrollmentIsAcceptedNotRefusedFromAStaleView() async throws {
        try await PipelineHarness.run { h in
            let (user, credentials) = try await h.repository.enrolledUser(name: "Newcomer", siteIds: [h.fixture.site.id])
            let device = credentials.device
            #expect(h.cache.device(id: device.id) == nil)
            try await h.produceRaw([h.event(key: "k_newcomer", time: Date().addingTimeInterval(-0.3), user: user.id, device: device.id)])
            // The registry's publisher, woken by the commit, puts the new user and device on the feed a
            // moment later: here, once the batch is waiting for the view (so it was not decided before).
            let pipeline = try #require(h.pipeline)
            try await eventually("the batch waits for the registry view") { pipeline.registryWaitCount >= 1 }
            try await h.publishRegistryChanges()
            let firstVetted = try await h.readVetted(count: 1)
            try #require(firstVetted.count == 1)
            let decision = firstVetted.first?.decision
            #expect(decision?.outcome == .accept, "\(String(describing: decision?.reasons))")
            // And a device nobody enrolled is still refused once the view is current.
            try await h.produceRaw([h.event(key: "k_forged", device: "dev_never_enrolled")])
            let refused = try await h.readVetted(count: 2).first { $0.raw.idempotencyKey == "k_forged" }?.decision
            #expect(refused?.outcome == .reject)
            #expect(refused?.ruleResults.contains { $0.ruleId == .deviceBinding && $0.fired } == true)
        }
    }

    /// A beacon registered (or found again) a moment before the first check-in naming it: the view
    /// lacks it, so the batch waits for the feed as of the event and the check-in is accepted. A
    /// beacon nobody registered is still refused once the view is current, and so is one reported lost.
    @Test func aCheckInAtABeaconRegisteredAMomentAgoIsAcceptedAndAMadeUpOneRefused() async throws {
        try await PipelineHarness.run { h in
            let gate = try await h.repository.createGate(NewGate(siteId: h.fixture.site.id, name: "Side door"))
            let minor = try await h.repository.allocateMinor(gateId: gate.id)
            let beacon = try await h.repository.registerBeacon(
                NewBeacon(
                    uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor, serial: "CP28-\(minor.minor)",
                    mac: nil, txPower: -59, advIntervalMs: 350, gateId: gate.id
                ))
            try await h.produceRaw([h.event(key: "k_new_beacon", minor: beacon.minor, time: Date().addingTimeInterval(-0.3))])
            let pipeline = try #require(h.pipeline)
            try await eventually("the batch waits for the registry view") { pipeline.registryWaitCount >= 1 }
            try await h.publishRegistryChanges()
            let firstVetted = try await h.readVetted(count: 1)
            try #require(firstVetted.count == 1)
            let decision = firstVetted.first?.decision
            #expect(decision?.outcome == .accept, "\(String(describing: decision?.reasons))")

            _ = try await h.repository.updateBeaconStatus(beaconId: beacon.id, status: .lost)
            try await h.publishRegistryChanges()
            try await eventually("the lost beacon in the cache") {
                h.cache.beacon(id: beacon.id)?.status == .lost
            }
            try await h.produceRaw([h.event(key: "k_made_up", minor: 65_000), h.event(key: "k_lost", minor: beacon.minor)])
            let vetted = byIdempotencyKey(try await h.readVetted(count: 3)) { $0.decision }
            for key in ["k_made_up", "k_lost"] {
                #expect(vetted[key]?.outcome == .reject, "\(key)")
                #expect(vetted[key]?.ruleResults.contains { $0.ruleId == .beaconValidity && $0.fired } == true, "\(key)")
            }
        }
    }

    /// A gateway whose clock runs an hour ahead stamps receipts in this host's future: the wait for the
    /// registry view as of that receipt is bounded by this host's clock (the event was received before it
    /// is read), so the batch is decided, not held for the hour with its partition behind it.
    @Test func aReceiptStampedAheadOfThisHostsClockIsDecidedNotHeld() async throws {
        try await PipelineHarness.run { h in
            let started = ContinuousClock.now
            try await h.produceRaw([h.event(key: "k_ahead", minor: 65_001, time: Date().addingTimeInterval(3_600))])
            let vetted = try await h.readVetted(count: 1)
            #expect(vetted.map(\.raw.idempotencyKey) == ["k_ahead"])
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }

    @Test func anotherOrganizationsUserIsRefusedAtThisSite() async throws {
        try await PipelineHarness.run { h in
            // A user of another organization, assigned to that organization's site, enrolled.
            let other = try await h.repository.createOrganization(NewOrganization(name: "Tenant \(UUID().uuidString.prefix(8))"))
            let otherSite = try await h.repository.createSite(NewSite.dayShift(organizationId: other.id, name: "Elsewhere"))
            let (stranger, credentials) = try await h.repository.enrolledUser(name: "Stranger", siteIds: [otherSite.id])
            let device = credentials.device
            try await h.publishRegistryChanges()
            try await eventually("the stranger in the cache") {
                h.cache.device(id: device.id) != nil && h.cache.user(id: stranger.id) != nil
            }

            // This organization's site and beacon, the stranger's genuine device.
            try await h.produceRaw([h.event(key: "k_stranger", user: stranger.id, device: device.id), h.event(key: "k_member")])
            let vetted = byIdempotencyKey(try await h.readVetted(count: 2)) { $0.decision }
            #expect(vetted["k_stranger"]?.outcome == .reject)
            #expect(vetted["k_stranger"]?.ruleResults.contains { $0.ruleId == .siteAssignment && $0.fired } == true)
            #expect(vetted["k_member"]?.outcome == .accept)
        }
    }

    @Test func policyBookFileIsValidatedWithAClearMessage() throws {
        let engine = PolicyEngine.standard
        #expect(throws: ConfigurationError.self) {
            try PolicyBookLoader.parse(Data("{\"sites\": [{\"version\": 1}]".utf8), source: "book.json", engine: engine)
        }
        do {
            _ = try PolicyBookLoader.parse(
                Data("{\"sites\": [{\"version\": 1, \"automaticAttendance\": true, \"rules\": {}}]}".utf8), source: "book.json",
                engine: engine)
            Issue.record("a site policy without siteId was accepted")
        } catch {
            #expect(error.description.contains("siteId"))
        }
        let book = try PolicyBookLoader.parse(Data("{\"globalKillSwitch\": true}".utf8), source: "book.json", engine: engine)
        #expect(book.policy(forSite: "any").automaticAttendance == false)
    }
}

/// Vetted events by idempotency key. A key vetted twice (the at-least-once defect worth catching) fails
/// the test, not the whole test process.
func byIdempotencyKey<Value>(_ vetted: [VettedEvent], _ value: (VettedEvent) -> Value) -> [String: Value] {
    #expect(Set(vetted.map(\.raw.idempotencyKey)).count == vetted.count, "a key vetted twice: \(vetted.map(\.raw.idempotencyKey))")
    return Dictionary(vetted.map { ($0.raw.idempotencyKey, value($0)) }, uniquingKeysWith: { first, _ in first })
}

/// One pipeline over topics of its own and the shared registry feed.
struct PipelineHarness: Sendable {
    let repository: PostgresRegistryRepository
    let fixture: PipelineFixture
    let cache: RegistryCache
    let producer: KafkaProducer
    let publisher: RegistryChangePublisher
    let rawTopic: String
    let vettedTopic: String
    let deadLetterTopic: String
    let groupId: String
    /// The pipeline's stored punches (`run(storingPunches: true)`).
    var punchStore: PostgresPunchStore? = nil
    /// The pipeline under test (nil for a harness that builds none).
    var pipeline: PolicyPipeline? = nil

    static let logger: Logger = LocalStack.logger(label: "policy-pipeline-tests")
    static var kafka: KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks, clientId: "policy-pipeline-tests")
    }

    /// - Parameter storingPunches: the pipeline keeps its accepted punches in a policy schema of the
    ///   test's own, as the service does.
    static func run(
        history: PolicyHistory = PolicyHistory(), storingPunches: Bool = false,
        _ body: @escaping @Sendable (PipelineHarness) async throws -> Void
    ) async throws {
        guard storingPunches else { return try await run(history: history, punchStore: nil, body) }
        try await LocalStack.withMigratedSchema(.policy, prefix: "policy_pipeline") { client, _ in
            try await run(history: history, punchStore: PostgresPunchStore(client: client, logger: logger), body)
        }
    }

    private static func run(
        history: PolicyHistory, punchStore: PostgresPunchStore?, _ body: @escaping @Sendable (PipelineHarness) async throws -> Void
    ) async throws {
        try LocalStack.ensureStarted()
        let admin = try KafkaAdmin(configuration: kafka, logger: logger)
        _ = try await TopicBootstrap.ensureTopics(admin)
        let rawTopic = LocalStack.uniqueName("raw"), vettedTopic = LocalStack.uniqueName("vetted"), dlq = LocalStack.uniqueName("dlq")
        try await admin.createTopics([
            KafkaTopicSpec(name: rawTopic, partitions: 3), KafkaTopicSpec(name: vettedTopic, partitions: 3),
            KafkaTopicSpec(name: dlq, partitions: 1),
        ])
        let signer = try DeviceTokenSigner(activeKey: DeviceSigningKey(id: "policy-test", secret: Array(repeating: 5, count: 32)))
        let feed = try await LocalStack.newRegistryFeedTopic()
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_policy") { client, _ in
            let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer)
            let fixture = try await PipelineFixture.make(repository)
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
            let publisher = RegistryChangePublisher(client: client, producer: producer, topic: feed, logger: logger)
            let cache = RegistryCache()
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: RegistryCacheLoaderConfiguration(kafka: kafka, topic: feed), logger: logger)
            var pipelineConfiguration = PolicyPipelineConfiguration()
            pipelineConfiguration.consumer.groupId = LocalStack.uniqueName("policy")
            pipelineConfiguration.rawTopic = rawTopic
            pipelineConfiguration.vettedTopic = vettedTopic
            pipelineConfiguration.deadLetterTopic = dlq
            // The tests publish registry changes by hand after producing the event; with every suite
            // running side by side that can take longer than a real publisher's 150 ms, so the
            // pipeline here waits for the feed as of receipt plus 3 s.
            pipelineConfiguration.registryPublishMargin = .seconds(3)
            let punchLedger = punchStore.map { PunchLedger(store: $0, retention: PolicyPipeline.historyRetention) }
            let consumer = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(
                    client: kafka, groupId: pipelineConfiguration.consumer.groupId, topics: [rawTopic]),
                rebalanceListener: punchLedger, logger: logger
            )
            let pipeline = PolicyPipeline(
                consumer: consumer, producer: producer, book: PolicyBook(), registry: RegistryCacheView(cache: cache),
                registryLoader: loader, history: history, punchLedger: punchLedger, configuration: pipelineConfiguration, logger: logger
            )
            let harness = PipelineHarness(
                repository: repository, fixture: fixture, cache: cache, producer: producer, publisher: publisher,
                rawTopic: rawTopic, vettedTopic: vettedTopic, deadLetterTopic: dlq, groupId: pipelineConfiguration.consumer.groupId,
                punchStore: punchStore, pipeline: pipeline
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                try await harness.publishRegistryChanges()
                group.addTask { try await loader.run() }
                group.addTask { try await consumer.run() }
                group.addTask { try await pipeline.run() }
                defer { group.cancelAll() }
                #expect(await loader.waitUntilCaughtUp(timeout: .seconds(60)))
                try await eventually("fixture in the cache") { cache.device(id: fixture.device.id) != nil }
                try await body(harness)
            }
        }
    }

    func publishRegistryChanges() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let round = try await publisher.publishRound()
            if round.published == 0, !round.lockedElsewhere { return }
            if round.lockedElsewhere { try await Task.sleep(for: .milliseconds(100)) }
        }
    }

    /// An honest check-in at the fixture's gate, now (by the fixture's user and device unless others are named).
    func event(
        key: String, uuid: String? = nil, minor: Int? = nil, time: Date = Date(), user: String? = nil, device: String? = nil
    ) -> RawEventEnvelope {
        let user = user ?? fixture.user.id, device = device ?? fixture.device.id
        let beacon = BeaconIdentity(
            uuid: uuid ?? fixture.beacon.uuid.uuidString, major: fixture.beacon.major, minor: minor ?? fixture.beacon.minor)
        let body = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: user, deviceId: device,
            timestamp: time, type: .checkin, siteId: fixture.site.id, beacon: beacon,
            rssiSeries: [-75, -71, -68, -66, -70], txPower: -59, motion: .init(state: .walking, steps2min: 42),
            geofence: .init(inside: true, radius: 200), handshake: nil, network: .init(online: true, latencyMs: 120),
            app: .init(version: "1.12.0", build: 345), device: .init(model: "Pixel 8", os: "Android 15"), tEnd: nil, queuedOffline: nil,
            location: .init(lat: 10.7772, lon: 106.7012, accuracyM: 15), attestation: .init(jailbroken: false, simulatedLocation: false)
        )
        return RawEventEnvelope(
            requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: fixture.site.id,
            appVersion: "1.12.0", gatewayInstance: "gateway-test", receivedAt: time.addingTimeInterval(0.3),
            payloadFingerprint: String(repeating: "a", count: 64), payload: .event(body)
        )
    }

    func produceRaw(_ events: [RawEventEnvelope]) async throws {
        let messages = try events.map { event in
            let record = try ProtocolCodec.wire.record(for: event)
            return KafkaOutgoingMessage(topic: rawTopic, key: record.key, value: record.value)
        }
        let reports = try await producer.sendBatch(messages)
        #expect(reports.allSatisfy { $0.isDelivered })
    }

    func produceRawBytes(_ bytes: [UInt8], key: String?) async throws {
        let report = try await producer.send(KafkaOutgoingMessage(topic: rawTopic, key: key.map { Array($0.utf8) }, value: bytes))
        #expect(report.isDelivered)
    }

    func readVetted(count: Int) async throws -> [VettedEvent] {
        try await read(topic: vettedTopic, count: count).map { try ProtocolCodec.wire.decode(VettedEvent.self, from: $0.value ?? []) }
    }

    /// Reads `topic` from the beginning until `count` messages arrived (or 60 s).
    func read(topic: String, count: Int) async throws -> [KafkaMessage] {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(client: Self.kafka, groupId: LocalStack.uniqueName("reader"), topics: [topic]),
            logger: Self.logger
        )
        return try await withThrowingTaskGroup(of: [KafkaMessage]?.self) { group in
            group.addTask {
                try await consumer.run(); return nil
            }
            group.addTask {
                var messages: [KafkaMessage] = []
                for await batch in consumer.batches {
                    messages += batch.messages
                    if messages.count >= count { break }
                }
                return messages
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60)); return nil
            }
            defer { consumer.triggerShutdown(); group.cancelAll() }
            while let result = try await group.next() {
                if let messages = result { return messages }
                throw TimedOut("\(count) messages on \(topic)")
            }
            return []
        }
    }

    func committedRawOffset() async throws -> Int64 {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(client: Self.kafka, groupId: groupId, topics: [rawTopic]), logger: Self.logger
        )
        var total: Int64 = 0
        let committed = try await consumer.committed((0..<3).map { TopicPartition(topic: rawTopic, partition: $0) })
        for (_, offset) in committed where offset > 0 { total += offset }
        return total
    }
}

/// A site with a gate and an active beacon, and a user with an enrolled device, made by the real
/// registry repository (so they reach the policy through the real change feed).
struct PipelineFixture: Sendable {
    let site: Site
    let beacon: Beacon
    let user: User
    let device: Device

    static func make(_ repository: PostgresRegistryRepository) async throws -> PipelineFixture {
        let place = try await BeaconedSite.make(repository, name: "Policy \(UUID().uuidString.prefix(8))")
        let (user, credentials) = try await repository.enrolledUser(name: "Policy tester", siteIds: [place.site.id])
        return PipelineFixture(site: place.site, beacon: place.beacon, user: user, device: credentials.device)
    }
}
