import AccessControl
import Foundation
import IngestGatewayCore
import KafkaClient
import Logging
import PolicyServiceCore
import PostgresNIO
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime

/// What `ingest-gateway` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// PostgreSQL pool (read-only: outcomes and sessions the merger wrote), the topics, then the
/// producer, the registry feed, the verdict reader and the HTTP server until SIGTERM/SIGINT.
///
/// Environment besides the shared one (`HTTP_*`, `INSTANCE_ID`, `KAFKA_BROKERS`,
/// `PG*`/`DATABASE_URL`, `LOG_*`):
/// - `DEVICE_TOKEN_KEYS`, `DEVICE_TOKEN_ACTIVE_KEY`: the device token keys (`DeviceTokenSigner.load`);
/// - `GATT_NONCE_KEY` (base64, at least 16 bytes, the policy service's value) and
///   `GATT_NONCE_TTL_SECONDS` (default 60): the GATT challenge endpoint, off without the key;
/// - the gateway's own settings, see `GatewaySettings.load`.
///
/// `/health/ready` needs the broker (a metadata request), the verdict partitions assigned and the
/// registry feed caught up. PostgreSQL is not part of it: without the database only the status and
/// pending endpoints fail (503), events still flow.
public enum IngestGatewayServer {
    public static let serviceName = "ingest-gateway"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: ingestGatewayDefaultHTTPPort, from: env)
        let settings = try GatewaySettings.load(from: env)
        let signer = try DeviceTokenSigner.load(from: env)
        let challenges = try Self.challengeNonces(from: env)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        var logger = Logger(label: serviceName)
        logger[metadataKey: "instance"] = .string(configuration.instanceId)
        let metrics = MetricsSetup.bootstrap()
        let client = configuration.postgres.makeClient(logger: logger)

        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let publisher = KafkaGatewayPublisher(producer: producer, topics: settings.topics)
        let cache = RegistryCache()
        let loader = try RegistryCacheLoader(
            cache: cache,
            configuration: RegistryCacheLoaderConfiguration(kafka: configuration.kafka, groupIdPrefix: "ingest-gateway-registry", topic: settings.topics.registryChanges),
            logger: logger
        )
        let pipeline = IngestPipeline(instanceId: configuration.instanceId, settings: settings, publisher: publisher, cache: cache, logger: logger)
        let verdicts = try VerdictListener(kafka: configuration.kafka, topic: settings.topics.verdicts, pipeline: pipeline, logger: logger)
        let watch = try configuration.brokerStateWatch(
            producer: producer, topics: [settings.topics.rawEvents, settings.topics.verdicts, settings.topics.deviceTelemetry],
            feed: settings.topics.registryChanges, logger: logger)
        let dependencies = GatewayDependencies(
            pipeline: pipeline, publisher: publisher, repository: PostgresAttendanceReadRepository(client: client, logger: logger),
            signer: signer, cache: cache, challenges: challenges
        )
        let readiness: [any ReadinessCheck] = [
            KafkaReadinessCheck(producer: producer),
            verdicts.readiness,
            FlagReadinessCheck(name: "registry-feed") { loader.isCaughtUp ? nil : "the registry feed is not caught up yet" },
        ]
        let app = buildApplication(configuration: configuration, dependencies: dependencies, readiness: readiness, metrics: metrics, logger: logger)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            try await configuration.ensureTopics(logger: logger)
            // Shutdown runs in reverse: the server stops taking requests, then the readers stop, then
            // the producer flushes what the last requests produced.
            try await ServiceMain.runServices(
                [producer, watch, loader, verdicts, IdempotencyJanitor(pipeline: pipeline), app], logger: logger
            )
            group.cancelAll()
        }
    }

    /// The GATT nonce signer, when `GATT_NONCE_KEY` is set.
    static func challengeNonces(from env: EnvironmentReader) throws(ConfigurationError) -> GattNonceCodec? {
        guard let text = env.optionalString("GATT_NONCE_KEY"), !text.isEmpty else { return nil }
        guard let key = Data(base64Encoded: text), key.count >= 16 else {
            throw ConfigurationError(key: "GATT_NONCE_KEY", value: "<redacted>", expected: "base64 of at least 16 random bytes")
        }
        let ttl = try env.int("GATT_NONCE_TTL_SECONDS", default: 60, in: 5...600)
        return GattNonceCodec(key: Array(key), lifetime: TimeInterval(ttl))
    }
}
