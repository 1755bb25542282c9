import AttendanceProtocol
import KafkaClient
import ServiceRuntime
import TelemetryAggregatorCore

/// What `telemetry-aggregator` runs (`ServiceKit`): its migrations, then the producer (dead letters),
/// the broker watch, the consumer pipeline, the SLO monitor (gauges, pruning) and the HTTP server.
/// Its own settings: `TelemetryConfiguration.load`.
package enum TelemetryAggregatorServer {
    package static let descriptor = ServiceDescriptor(name: "telemetry-aggregator", defaultHTTPPort: 8084, migrations: .telemetry)

    package static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let (kit, telemetry) = try await ServiceKit.start(descriptor, TelemetryConfiguration.self, environment: env)
        let client = kit.postgres, logger = kit.logger
        let objective = SLOObjective(
            targetPermyriad: telemetry.objective.targetPermyriad, thresholdSeconds: telemetry.objective.thresholdSeconds)

        let producer = try kit.makeProducer()
        let serviceMetrics = TelemetryServiceMetrics(registry: kit.metrics)
        let processor = TelemetryBatchProcessor(
            client: client, configuration: telemetry,
            deadLetters: KafkaDeadLetterSink(producer: producer, topic: telemetry.topics[.deadLetters]), logger: logger)
        let repository = PostgresTelemetryQueryRepository(client: client, logger: logger)
        let monitor = SLOMonitor(
            repository: repository, metrics: serviceMetrics, objective: objective, interval: telemetry.sloRefreshInterval,
            pruneInterval: telemetry.pruneInterval, prune: { try await processor.prune() }, logger: logger)
        let pipeline = try TelemetryPipeline(
            kafka: kit.configuration.kafka, configuration: telemetry, processor: processor, metrics: serviceMetrics, logger: logger)
        let app = buildApplication(
            configuration: kit.configuration, repository: PostgresTelemetryQueryRepository(client: kit.reportPostgres, logger: logger),
            objective: objective,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer), pipeline.storeHealth],
            metrics: kit.metrics, logger: logger)
        try await kit.run(
            [
                producer,
                try kit.brokerStateWatch(
                    producer: producer, topics: telemetry.consumedTopics,
                    forgetPositions: {
                        await StoredOffsetsTable.forget(groupId: telemetry.consumer.groupId, client: client, logger: logger)
                    }),
                monitor,
                pipeline,
                app,
            ])
    }
}
