import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import RegistryFeed
import RegistryTestFixtures
import ServiceRuntime

/// The real local stack (started by `deploy/local/stack.sh start`, as the other integration tests
/// do): PostgreSQL with the registry migrations, and the broker with the platform's topics.
enum FeedTestStack {
    static let logger = LocalStack.logger(label: "registry-feed-tests")

    static var brokers: String { LocalStack.brokers }

    static var kafka: KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: brokers, brokerQuirks: LocalStack.brokerQuirks, clientId: "registry-feed-tests")
    }

    static let signer: DeviceTokenSigner = {
        let key = try! DeviceSigningKey(id: "test-2025", secret: Array(repeating: 7, count: 32))
        return try! DeviceTokenSigner(activeKey: key)
    }()

    /// The registry feed topic of the running test (`withRepository` creates one per test).
    @TaskLocal static var topic = Topic.registryChanges.name

    /// A producer on the local broker and the registry's relay on `client` to the test's feed topic,
    /// polling every `pollInterval`.
    static func publisher(
        client: PostgresClient, pollInterval: Duration = .milliseconds(200)
    ) throws -> (KafkaProducer, RegistryChangePublisher) {
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
        return (
            producer, RegistryChangePublisher(client: client, producer: producer, topic: topic, pollInterval: pollInterval, logger: logger)
        )
    }

    /// A cache loader's configuration on the test's feed topic.
    static func loaderConfiguration(groupIdPrefix: String) -> RegistryCacheLoaderConfiguration {
        RegistryCacheLoaderConfiguration(kafka: kafka, groupIdPrefix: groupIdPrefix, topic: topic)
    }

    /// A repository over a schema of its own (migrations applied) and a feed topic of its own
    /// (`topic`) for the duration of `body`.
    static func withRepository<T: Sendable>(
        _ body: (PostgresRegistryRepository, PostgresClient) async throws -> T
    ) async throws -> T {
        try LocalStack.ensureStarted()
        let admin = try KafkaAdmin(configuration: kafka, logger: logger)
        _ = try await TopicBootstrap.ensureTopics(admin)
        let feed = try await LocalStack.newRegistryFeedTopic()
        return try await $topic.withValue(feed) {
            try await LocalStack.withMigratedSchema(.registry, prefix: "registry_feed") { client, _ in
                try await body(PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer), client)
            }
        }
    }

    /// A producer running for the duration of `body`.
    static func withProducer<T: Sendable>(
        _ configure: (inout KafkaProducerConfiguration) -> Void = { _ in },
        _ body: (KafkaProducer) async throws -> T
    ) async throws -> T {
        var configuration = KafkaProducerConfiguration(client: kafka)
        configure(&configuration)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await producer.run() }
            defer { group.cancelAll() }
            return try await body(producer)
        }
    }

    /// Runs publishing rounds until the outbox has nothing left (or `timeout`).
    static func drainOutbox(_ publisher: RegistryChangePublisher, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let round = try await publisher.publishRound()
            if round.published == 0, !round.lockedElsewhere { return }
            if round.lockedElsewhere { try await Task.sleep(for: .milliseconds(100)) }
        }
        throw TimedOut("draining the outbox")
    }
}

/// An organization with a namespace, a site, a gate, a beacon on an allocated minor (with a MAC),
/// and a user with an enrolled device, all new, made by the real repository.
struct FeedFixture {
    let organization: Organization
    let namespace: BusinessNamespace
    let site: Site
    let gate: Gate
    let minor: MinorAllocation
    let beacon: Beacon
    let user: User
    let device: Device

    static func make(_ repository: some RegistryRepository) async throws -> FeedFixture {
        let mac = (0..<6).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined(separator: ":")
        let place = try await BeaconedSite.make(repository, name: "Feed \(UUID().uuidString.prefix(8))", mac: mac)
        let (user, credentials) = try await repository.enrolledUser(name: "Trần Thị Bình", siteIds: [place.site.id])
        return FeedFixture(
            organization: place.organization, namespace: place.namespace, site: place.site, gate: place.gate, minor: place.minor,
            beacon: place.beacon, user: user, device: credentials.device
        )
    }
}
