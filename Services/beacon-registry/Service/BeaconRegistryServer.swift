import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime

/// What `beacon-registry` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// PostgreSQL pool, the registry migrations, the optional admin key bootstrap, the topics, then the
/// HTTP server, the change-feed publisher, the lookup cache and the sightings collector until
/// SIGTERM/SIGINT.
///
/// Environment besides the shared one (`HTTP_*`, `PG*`/`DATABASE_URL`, `LOG_*`):
/// - `DEVICE_TOKEN_KEYS`, `DEVICE_TOKEN_ACTIVE_KEY`: device token signing keys (see `DeviceTokenSigner.load`);
/// - `REGISTRY_BOOTSTRAP=1`: create an admin API key when none exists and write its secret once to
///   `REGISTRY_BOOTSTRAP_KEY_PATH` (required with it; mode 0600; the log names only the key's id);
/// - `BEACON_KEY_SEAL_KEY`: base64 of 32 random bytes, shared with the policy service only. With it
///   the registry creates each beacon's GATT key, stores and publishes it sealed, backfills beacons
///   that have none at start-up, and serves rotation; without it beacons have no GATT key.
public enum BeaconRegistryServer {
    public static let serviceName = "beacon-registry"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: beaconRegistryDefaultHTTPPort, from: env)
        let signer = try DeviceTokenSigner.load(from: env)
        let bootstrap = try env.bool("REGISTRY_BOOTSTRAP", default: false)
        let bootstrapKeyFile = bootstrap
            ? BootstrapKeyFile(path: try env.requiredString(
                "REGISTRY_BOOTSTRAP_KEY_PATH", expected: "with REGISTRY_BOOTSTRAP=1, the file the first admin API key is written to (never the log)"))
            : nil
        let beaconKeySealer = try loadBeaconKeySealer(from: env)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        let logger = Logger(label: serviceName)
        let metrics = MetricsSetup.bootstrap()
        let client = configuration.postgres.makeClient(logger: logger)
        let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer, beaconKeySealer: beaconKeySealer)
        // Every write lands in registry.change_outbox in its own transaction; the publisher moves it
        // to the compacted registry.changes topic, from which gateways, policy and the fleet rebuild.
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let publisher = RegistryChangePublisher(client: client, producer: producer, logger: logger)
        // The registry reads its own feed back for the lookup routes, exactly as other services do.
        let lookups = RegistryCache()
        let lookupLoader = try RegistryCacheLoader(
            cache: lookups, configuration: RegistryCacheLoaderConfiguration(kafka: configuration.kafka, groupIdPrefix: "registry-lookups"),
            logger: logger
        )
        let sightings = try BeaconSightingCollector(kafka: configuration.kafka, repository: repository, logger: logger)

        let watch = try configuration.brokerStateWatch(
            producer: producer, topics: [Topic.deviceTelemetry.name, Topic.rawEvents.name], logger: logger)
        let app = buildApplication(
            configuration: configuration, repository: repository, lookups: lookups,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer), RegistryFeedReadinessCheck(loader: lookupLoader)],
            metrics: metrics, logger: logger
        )
        try await withThrowingDiscardingTaskGroup { group in
            // The pool runs for the migrations and the bootstrap; the service group then owns the server.
            group.addTask { await client.run() }
            let applied = try await RegistryMigrations.apply(client: client, logger: logger)
            logger.info("migrations applied", metadata: ["count": "\(applied.count)"])
            if beaconKeySealer != nil {
                let created = try await repository.backfillBeaconKeys()
                if created > 0 { logger.notice("GATT keys created for beacons that had none", metadata: ["count": "\(created)"]) }
            } else {
                logger.warning("BEACON_KEY_SEAL_KEY is not set: beacons get no GATT key and the policy cannot run gatt_challenge")
            }
            if let bootstrapKeyFile {
                try bootstrapKeyFile.checkWritable()
                if let issued = try await BootstrapAdminKey.ensure(repository: repository) {
                    try bootstrapKeyFile.write(issued.secret)
                    logger.notice("bootstrap admin API key created", metadata: [
                        "apiKey": .string(issued.key.id), "writtenTo": .string(bootstrapKeyFile.path),
                    ])
                }
            }
            try await configuration.ensureTopics(logger: logger)
            // A feed topic the broker lost (Tansu forgets its topics on restart) is refilled from
            // the outbox before anything reads it (see RegistryFeedRepair).
            try await RegistryFeedRepair.repairIfLost(
                admin: KafkaAdmin(configuration: configuration.kafka, logger: logger), client: client, logger: logger)
            // Shutdown runs in reverse: the server stops taking requests, the sightings collector
            // and the lookup cache stop reading, the publisher finishes its round, then the
            // producer flushes.
            try await ServiceMain.runServices([producer, watch, publisher, lookupLoader, sightings, app], logger: logger)
            group.cancelAll()
        }
    }

    /// `BEACON_KEY_SEAL_KEY`: base64 of exactly 32 bytes, or unset. The value is never echoed.
    static func loadBeaconKeySealer(from env: EnvironmentReader) throws(ConfigurationError) -> BeaconKeySealer? {
        guard let text = env.optionalString("BEACON_KEY_SEAL_KEY"), !text.isEmpty else { return nil }
        guard let bytes = Data(base64Encoded: text), let sealer = BeaconKeySealer(sealingKey: Array(bytes)) else {
            throw ConfigurationError(key: "BEACON_KEY_SEAL_KEY", value: "<redacted>", expected: "base64 of 32 random bytes")
        }
        return sealer
    }
}
