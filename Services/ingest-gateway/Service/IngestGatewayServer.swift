import AccessControl
import AttendanceProtocol
import IngestGatewayCore
import KafkaClient
import RegistryFeed
import ServiceRuntime

/// What `ingest-gateway` runs (`ServiceKit`): the producer, the broker watch, the registry feed, the
/// verdict reader, the idempotency janitor and the HTTP server. PostgreSQL is read only (outcomes and
/// sessions the merger wrote). Its own settings: `GatewayConfiguration.load`, the device token keys
/// (`DEVICE_TOKEN_KEYS`, `DEVICE_TOKEN_ACTIVE_KEY`) and the GATT challenge (`GattNonceCodec.fromEnvironment`).
///
/// `/health/ready` needs the broker (a metadata request), the verdict partitions assigned and the
/// registry feed caught up. PostgreSQL is not part of it: without the database only the status and
/// pending endpoints fail (503), events still flow.
package enum IngestGatewayServer {
    package static let descriptor = ServiceDescriptor(name: "ingest-gateway", defaultHTTPPort: 8080)

    package static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let (kit, settings) = try await ServiceKit.start(descriptor, GatewayConfiguration.self, environment: env)
        let signer = try DeviceTokenSigner.load(from: env)
        let challenges = try GattNonceCodec.fromEnvironment(env)
        let logger = kit.logger, kafka = kit.configuration.kafka

        let producer = try kit.makeProducer(deliveryTimeout: settings.produceTimeout)
        let publisher = KafkaGatewayPublisher(producer: producer, topics: settings.topics)
        let cache = RegistryCache()
        let loader = try RegistryCacheLoader(
            cache: cache,
            configuration: RegistryCacheLoaderConfiguration(
                kafka: kafka, groupIdPrefix: "ingest-gateway-registry", topic: settings.topics.registryChanges),
            logger: logger)
        let pipeline = IngestPipeline(
            instanceId: kit.configuration.instanceId, settings: settings, publisher: publisher, cache: cache, logger: logger,
            verdictsRead: false)
        let verdicts = try VerdictListener(kafka: kafka, topic: settings.topics.verdicts, pipeline: pipeline, logger: logger)
        let dependencies = GatewayDependencies(
            pipeline: pipeline, publisher: publisher, repository: PostgresAttendanceReadRepository(client: kit.postgres, logger: logger),
            signer: signer, cache: cache, challenges: challenges)
        let readiness: [any ReadinessCheck] = [
            KafkaReadinessCheck(producer: producer),
            verdicts.readiness,
            FlagReadinessCheck(name: "registry-feed") { loader.isCaughtUp ? nil : "the registry feed is not caught up yet" },
        ]
        try await kit.run([
            producer,
            try kit.brokerStateWatch(
                producer: producer, topics: [settings.topics.rawEvents, settings.topics.verdicts, settings.topics.deviceTelemetry],
                feed: settings.topics.registryChanges),
            loader, verdicts, IdempotencyJanitor(pipeline: pipeline),
            buildApplication(
                configuration: kit.configuration, dependencies: dependencies, readiness: readiness, metrics: kit.metrics, logger: logger),
        ])
    }
}
