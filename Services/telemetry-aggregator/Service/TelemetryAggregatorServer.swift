import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceLifecycle
import ServiceRuntime
import TelemetryAggregatorCore

/// What `telemetry-aggregator` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// PostgreSQL pool, the telemetry migrations, the topics, then until SIGTERM/SIGINT: the producer
/// (dead letters), the consumer pipeline, the SLO monitor (gauges, pruning) and the HTTP server.
public enum TelemetryAggregatorServer {
    public static let serviceName = "telemetry-aggregator"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: telemetryAggregatorDefaultHTTPPort, from: env)
        let telemetry = try TelemetryConfiguration.load(from: env)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        let logger = Logger(label: serviceName)
        let registry = MetricsSetup.bootstrap()
        let client = configuration.postgres.makeClient(logger: logger)
        let objective = SLOObjective(targetPermyriad: telemetry.objective.targetPermyriad, thresholdSeconds: telemetry.objective.thresholdSeconds)

        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let serviceMetrics = TelemetryServiceMetrics(registry: registry)
        let processor = TelemetryBatchProcessor(
            client: client, configuration: telemetry,
            deadLetters: KafkaDeadLetterSink(producer: producer, topic: telemetry.deadLetterTopic), logger: logger)
        let pipeline = try TelemetryPipeline(
            kafka: configuration.kafka, configuration: telemetry, processor: processor, metrics: serviceMetrics, logger: logger)
        let repository = PostgresTelemetryQueryRepository(client: client, schema: telemetry.schema, logger: logger)
        let monitor = SLOMonitor(
            repository: repository, metrics: serviceMetrics, objective: objective, interval: telemetry.sloRefreshInterval,
            pruneInterval: telemetry.pruneInterval, prune: { try await processor.prune() }, logger: logger)
        let watch = try configuration.brokerStateWatch(producer: producer, topics: telemetry.topics, logger: logger)
        let app = buildApplication(
            configuration: configuration, repository: repository, objective: objective,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer)],
            metrics: registry, logger: logger)

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            let applied = try await TelemetryMigrations.apply(schema: telemetry.schema, client: client, logger: logger)
            logger.info("migrations applied", metadata: ["count": "\(applied.count)"])
            try await configuration.ensureTopics(logger: logger)
            try await ServiceMain.runServices([producer, watch, monitor, pipeline, app], logger: logger)
            group.cancelAll()
        }
    }
}
