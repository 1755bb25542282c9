import AccessControl
import Foundation
import Hummingbird
import KafkaClient
import Logging
import PolicyServiceCore
import PostgresNIO
import RegistryFeed
import ServiceRuntime

public let policyServiceDefaultHTTPPort = 8081

/// What `policy-service` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// PostgreSQL pool and the policy migrations, the topics, the registry feed's cache, the raw →
/// vetted pipeline, the policy-book refresher, and `/health` + `/metrics` + policy administration
/// (`PolicyAdminController`), until SIGTERM/SIGINT.
///
/// Environment besides the shared one (`HTTP_*`, `PG*`/`DATABASE_URL`, `KAFKA_BROKERS`, `LOG_*`, `INSTANCE_ID`):
/// - `POLICY_BOOK_FILE`: the base per-site rule configuration (see `PolicyBookLoader`); versions
///   stored through admin REST override it;
/// - `POLICY_MAX_BATCH`: records per poll (default 500);
/// - `POLICY_REFRESH_MS`: how often the stored policies are re-read (default 2000);
/// - `POLICY_DB_SCHEMA`: the PostgreSQL schema of the stored policies (default `policy`);
/// - `GATT_NONCE_KEY`, `BEACON_KEY_SEAL_KEY`: host `gatt_challenge` (see `GattConfiguration`); spent
///   nonces are then kept in `<POLICY_DB_SCHEMA>.spent_gatt_nonces`, shared by every instance.
public enum PolicyServer {
    public static let serviceName = "policy-service"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: policyServiceDefaultHTTPPort, from: env)
        // The registry feed's cache: the rules' registry view, and the source of the beacons' GATT keys.
        let cache = RegistryCache()
        let gatt = try GattConfiguration.load(from: env, registry: cache)
        let engine = PolicyEngine.withGatt(gatt)
        let book = try PolicyBookLoader.load(from: env, engine: engine)
        let maxBatch = try env.int("POLICY_MAX_BATCH", default: 500, in: 1...10_000)
        let refreshInterval = try env.milliseconds("POLICY_REFRESH_MS", default: 2_000, in: 100...600_000)
        let schema = env.string("POLICY_DB_SCHEMA", default: PolicyMigrations.defaultSchema)
        guard PolicyMigrations.isValidSchemaName(schema) else {
            throw ConfigurationError(key: "POLICY_DB_SCHEMA", value: schema, expected: "a lower-case schema name (letters, digits, _)")
        }
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        let logger = Logger(label: serviceName)
        let metrics = MetricsSetup.bootstrap()
        let client = configuration.postgres.makeClient(logger: logger)

        let pipelineConfiguration = PolicyPipelineConfiguration()
        var consumerConfiguration = KafkaConsumerConfiguration(
            client: configuration.kafka, groupId: pipelineConfiguration.groupId, topics: [pipelineConfiguration.rawTopic]
        )
        consumerConfiguration.maxBatchSize = maxBatch
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let loader = try RegistryCacheLoader(
            cache: cache, configuration: RegistryCacheLoaderConfiguration(kafka: configuration.kafka, groupIdPrefix: "policy-registry-cache"),
            logger: logger
        )
        let pipeline = PolicyPipeline(
            consumer: consumer, producer: producer, engine: engine, book: book,
            registry: RegistryCacheView(cache: cache), registryLoader: loader,
            nonceLedger: gatt.map { GattNonceLedger(store: PostgresSpentNonceStore(client: client, schema: schema, logger: logger), nonces: $0.nonces) },
            configuration: pipelineConfiguration, logger: logger
        )
        let watch = try configuration.brokerStateWatch(
            producer: producer, topics: [pipelineConfiguration.rawTopic, pipelineConfiguration.vettedTopic], logger: logger)
        let repository = PostgresPolicyRepository(client: client, schema: schema, logger: logger)
        let refresher = PolicyBookRefresher(
            base: book, repository: repository, hostedRules: engine.ruleIDs, interval: refreshInterval, logger: logger
        ) { pipeline.setPolicyBook($0) }
        let app = ServiceApplication.build(
            configuration: configuration, registry: metrics,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer), RegistryFeedReadinessCheck(loader: loader)],
            context: PolicyRequestContext.self, logger: logger, openAPI: .policy
        ) { router in
            addPolicyAdminRoutes(
                to: router, controller: PolicyAdminController(repository: repository, refresher: refresher, hostedRules: engine.ruleIDs),
                keyVerifier: PostgresAdminKeyVerifier(client: client, logger: logger)
            )
        }
        logger.info("policy book loaded", metadata: [
            "sites": "\(book.sites.count)", "defaultVersion": "\(book.defaultPolicy.version)", "globalKillSwitch": "\(book.globalKillSwitch)",
            "rules": .string(engine.ruleIDs.map(\.rawValue).joined(separator: ",")),
        ])
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            let applied = try await PolicyMigrations.apply(client: client, schema: schema, logger: logger)
            logger.info("migrations applied", metadata: ["count": "\(applied.count)"])
            // Decide with the stored policies from the first event on, not the file's alone.
            try await refresher.refresh()
            try await configuration.ensureTopics(logger: logger)
            // Shutdown runs in reverse: the server stops, the refresher stops, the pipeline finishes
            // its batch (delivered and committed), the consumer leaves the group, the producer flushes.
            try await ServiceMain.runServices([producer, watch, loader, consumer, pipeline, refresher, app], logger: logger)
            group.cancelAll()
        }
    }
}
