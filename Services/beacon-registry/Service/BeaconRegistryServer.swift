import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import KafkaClient
import RegistryFeed
import ServiceRuntime

/// What `beacon-registry` runs (`ServiceKit`): its migrations, the GATT key backfill, the optional
/// admin key bootstrap and the feed repair, then the producer, the broker watch, the change-feed
/// publisher, the lookup cache, the sightings collector and the HTTP server. Its own settings:
/// `RegistryConfiguration` and the device token keys.
package enum BeaconRegistryServer {
    package static let descriptor = ServiceDescriptor(name: "beacon-registry", defaultHTTPPort: 8083, migrations: .registry)

    package static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let (kit, settings) = try await ServiceKit.start(descriptor, RegistryConfiguration.self, environment: env)
        let signer = try DeviceTokenSigner.load(from: env)
        let client = kit.postgres, logger = kit.logger, kafka = kit.configuration.kafka, topics = kit.configuration.topics
        let repository = PostgresRegistryRepository(
            client: client, logger: logger, tokenSigner: signer, beaconKeySealer: settings.beaconKeySealer)
        // Every write lands in change_outbox in its own transaction; the publisher moves it
        // to the compacted registry.changes topic, from which gateways, policy and the fleet rebuild.
        let producer = try kit.makeProducer()
        // The registry reads its own feed back for the lookup routes, exactly as other services do.
        let lookups = RegistryCache()
        let lookupLoader = try RegistryCacheLoader(
            cache: lookups,
            configuration: RegistryCacheLoaderConfiguration(
                kafka: kafka, groupIdPrefix: "registry-lookups", topic: topics[.registryChanges]),
            logger: logger)
        try await kit.run(
            [
                producer,
                try kit.brokerStateWatch(
                    producer: producer, topics: [topics[.deviceTelemetry], topics[.rawEvents]],
                    forgetPositions: { await RegistryFeedRepair.queueRefillAfterLoss(client: client, logger: logger) }),
                RegistryChangePublisher(client: client, producer: producer, topic: topics[.registryChanges], logger: logger),
                lookupLoader,
                try BeaconSightingCollector(kafka: kafka, repository: repository, configuration: .init(topics: topics), logger: logger),
                buildApplication(
                    configuration: kit.configuration, repository: repository, devices: DeviceAuthentication(signer: signer),
                    lookups: lookups,
                    readiness: [
                        PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer),
                        RegistryFeedReadinessCheck(loader: lookupLoader),
                    ],
                    metrics: kit.metrics, logger: logger),
            ],
        ) { client in
            try await prepare(
                repository: repository, settings: settings, kafka: kafka, feed: topics[.registryChanges], client: client, logger: kit.logger
            )
        }
    }
}
