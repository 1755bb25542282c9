import AccessControl
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime

/// What `session-merger` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// PostgreSQL pool, the merger migrations, the topics, then until SIGTERM/SIGINT: the producer, the
/// registry feed (site shifts for daily attendance), the session-change outbox publisher, the idle
/// sweep, the consumer pipeline and the admin HTTP server.
///
/// Environment besides the shared one (`HTTP_*`, `PG*`/`DATABASE_URL`, `LOG_*`, `KAFKA_BROKERS`): see
/// `SessionMergerConfiguration.load`.
public enum SessionMergerServer {
    public static let serviceName = "session-merger"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: sessionMergerDefaultHTTPPort, from: env)
        let merger = try SessionMergerConfiguration.load(from: env)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        let logger = Logger(label: serviceName)
        let metrics = MetricsSetup.bootstrap()
        let client = configuration.postgres.makeClient(logger: logger)

        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let cache = RegistryCache()
        let processor = VettedBatchProcessor(
            client: client, configuration: merger, deadLetters: KafkaDeadLetterSink(producer: producer, topic: merger.deadLetterTopic),
            logger: logger, userSites: { cache.user(id: $0)?.siteIds })
        let pipeline = try MergerPipeline(kafka: configuration.kafka, configuration: merger, processor: processor, producer: producer, logger: logger)
        let publisher = SessionChangePublisher(client: client, producer: producer, configuration: merger, logger: logger)
        let sweeper = IdleSweeper(client: client, configuration: merger, logger: logger)
        let registry = try RegistryCacheLoader(
            cache: cache,
            configuration: RegistryCacheLoaderConfiguration(kafka: configuration.kafka, groupIdPrefix: "session-merger-registry", topic: merger.registryTopic),
            logger: logger)

        let watch = try configuration.brokerStateWatch(
            producer: producer, topics: [merger.vettedTopic, merger.verdictsTopic, merger.sessionsTopic], feed: merger.registryTopic, logger: logger)
        let app = buildApplication(
            configuration: configuration,
            sessions: PostgresSessionQueryRepository(client: client, logger: logger),
            shifts: RegistryCacheShiftProvider(loader: registry),
            keyVerifier: PostgresAdminKeyVerifier(client: client, logger: logger),
            groupId: merger.groupId,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer)],
            metrics: metrics, logger: logger)

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            let applied = try await MergerMigrations.apply(client: client, logger: logger)
            logger.info("migrations applied", metadata: ["count": "\(applied.count)"])
            try await configuration.ensureTopics(logger: logger)
            // Shutdown runs in reverse: the server stops taking requests, the pipeline finishes its
            // batch (and commits), the sweep and the publisher finish their round, then the producer flushes.
            try await ServiceMain.runServices([producer, watch, registry, publisher, sweeper, pipeline, app], logger: logger)
            group.cancelAll()
        }
    }
}
