import AccessControl
import AttendanceProtocol
import BeaconRegistryStore
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PolicyService
import PolicyServiceCore
import RegistryFeed
import RegistryTestFixtures
import ServiceLifecycle
import ServiceRuntime
import Testing

/// A registry view that is behind (here: the feed lost, nothing refilled yet) is never decided from:
/// the batch waits, graceful shutdown ends the wait with nothing decided or committed, and the next
/// owner of the partition decides the event once the registry has refilled the feed.
@Suite("Policy pipeline: a registry view that is behind")
struct RegistryWaitTests {
    typealias H = PipelineHarness

    /// One policy process on the test's topics: its registry loader, consumer and pipeline in a service
    /// group, as the service runs them (the producer, shared by both processes, runs beside).
    /// `registryLagWait` is short so that the wait's loop turns.
    struct Process {
        let group: ServiceGroup
        let pipeline: PolicyPipeline

        init(_ h: PipelineHarness, feed: String, producer: KafkaProducer) throws {
            let loader = try RegistryCacheLoader(
                cache: RegistryCache(), configuration: RegistryCacheLoaderConfiguration(kafka: H.kafka, topic: feed), logger: H.logger)
            var configuration = PolicyPipelineConfiguration()
            configuration.consumer.groupId = h.groupId
            configuration.rawTopic = h.rawTopic
            configuration.vettedTopic = h.vettedTopic
            configuration.deadLetterTopic = h.deadLetterTopic
            configuration.registryLagWait = .seconds(1)
            let consumer = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(client: H.kafka, groupId: h.groupId, topics: [h.rawTopic]), logger: H.logger)
            pipeline = PolicyPipeline(
                consumer: consumer, producer: producer, book: PolicyBook(), registry: RegistryCacheView(cache: loader.cache),
                registryLoader: loader, configuration: configuration, logger: H.logger)
            group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [loader, consumer, pipeline], gracefulShutdownSignals: [], logger: H.logger))
        }
    }

    /// Its registry feed never read (the loader not running, as when the broker is down at start), the
    /// pipeline waits for the catch-up (60 s); a graceful shutdown ends that wait at once.
    /// The view is waited for as of the receipt plus the publish margin. A gateway whose clock runs a
    /// second behind this host stamped receipts already past the margin, so a phone enrolled a moment
    /// before its first check-in could be refused from a view read without its enrollment.
    @Test func aReceiptFromAGatewayWhoseClockRunsBehindCountsAsNow() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let margin = Duration.milliseconds(150)
        #expect(PolicyPipeline.registryAsOf(newestReceipt: now.addingTimeInterval(-1), now: now, margin: margin) == now + 0.15)
        #expect(PolicyPipeline.registryAsOf(newestReceipt: now.addingTimeInterval(30), now: now, margin: margin) == now + 0.15)
        // A receipt from before the allowance (a backlog being read) keeps its own time.
        let old = now.addingTimeInterval(-PolicyPipeline.receiptSkewAllowance - 60)
        #expect(PolicyPipeline.registryAsOf(newestReceipt: old, now: now, margin: margin) == old + 0.15)
    }

    @Test func aGracefulShutdownEndsTheWaitForTheRegistryCatchUp() async throws {
        try LocalStack.ensureStarted()
        let raw = LocalStack.uniqueName("raw"), groupId = LocalStack.uniqueName("policy-start")
        let loader = try RegistryCacheLoader(
            cache: RegistryCache(),
            configuration: RegistryCacheLoaderConfiguration(kafka: H.kafka, topic: LocalStack.uniqueName("feed")), logger: H.logger)
        var configuration = PolicyPipelineConfiguration()
        configuration.consumer.groupId = groupId
        configuration.rawTopic = raw
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(client: H.kafka, groupId: groupId, topics: [raw]), logger: H.logger)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: H.kafka), logger: H.logger)
        let pipeline = PolicyPipeline(
            consumer: consumer, producer: producer, book: PolicyBook(), registry: RegistryCacheView(cache: loader.cache),
            registryLoader: loader, configuration: configuration, logger: H.logger)
        #expect(configuration.registryCatchUpTimeout >= .seconds(60))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [consumer, pipeline], gracefulShutdownSignals: [], logger: H.logger))
        let run = Task { try await group.run() }
        try await Task.sleep(for: .seconds(1))
        let stopping = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await run.value
        #expect(ContinuousClock.now - stopping < .seconds(15))
        #expect(pipeline.processedCount == 0)
    }

    @Test func aBatchWaitsForAnEmptyViewEndsWithTheServiceAndIsDecidedByTheNextOwner() async throws {
        try LocalStack.ensureStarted()
        let admin = try KafkaAdmin(configuration: H.kafka, logger: H.logger)
        _ = try await TopicBootstrap.ensureTopics(admin)
        let raw = LocalStack.uniqueName("raw"), vetted = LocalStack.uniqueName("vetted"), dlq = LocalStack.uniqueName("dlq")
        try await admin.createTopics([
            KafkaTopicSpec(name: raw, partitions: 3), KafkaTopicSpec(name: vetted, partitions: 3), KafkaTopicSpec(name: dlq, partitions: 1),
        ])
        let feed = try await LocalStack.newRegistryFeedTopic()
        let signer = try DeviceTokenSigner(activeKey: DeviceSigningKey(id: "policy-wait", secret: Array(repeating: 6, count: 32)))
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_policy_wait") { client, _ in
            let repository = PostgresRegistryRepository(client: client, logger: H.logger, tokenSigner: signer)
            // The registry holds the site, beacon, user and device; its feed is still empty.
            let fixture = try await PipelineFixture.make(repository)
            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: H.kafka), logger: H.logger)
            let h = PipelineHarness(
                repository: repository, fixture: fixture, cache: RegistryCache(), producer: producer,
                publisher: RegistryChangePublisher(client: client, producer: producer, topic: feed, logger: H.logger),
                rawTopic: raw, vettedTopic: vetted, deadLetterTopic: dlq, groupId: LocalStack.uniqueName("policy-wait"))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await producer.run() }
                defer { tasks.cancelAll() }
                try await h.produceRaw([h.event(key: "k_waits", time: Date().addingTimeInterval(-1))])

                // The first owner reads the event and waits: several turns of the wait, nothing decided.
                let first = try Process(h, feed: feed, producer: producer)
                let firstRun = Task { try await first.group.run() }
                try await eventually("the batch's wait turns twice", timeout: .seconds(60)) { first.pipeline.registryBehindCount >= 2 }
                #expect(first.pipeline.processedCount == 0)
                // Graceful shutdown ends the wait at once, without an error, and nothing is committed.
                let stopping = ContinuousClock.now
                await first.group.triggerGracefulShutdown()
                try await firstRun.value
                #expect(ContinuousClock.now - stopping < .seconds(15))
                #expect(try await h.committedRawOffset() == 0)

                // The registry refills the feed; the next owner reads the event again and accepts it.
                let second = try Process(h, feed: feed, producer: producer)
                let secondRun = Task { try await second.group.run() }
                try await h.publishRegistryChanges()
                let decisions = try await h.readVetted(count: 1)
                #expect(decisions.map(\.raw.idempotencyKey) == ["k_waits"])
                #expect(decisions.first?.decision.outcome == .accept, "\(String(describing: decisions.first?.decision.reasons))")
                try await eventually("the event's offset committed") { try await h.committedRawOffset() == 1 }
                await second.group.triggerGracefulShutdown()
                try await secondRun.value
            }
        }
    }
}
