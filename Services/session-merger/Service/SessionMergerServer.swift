import AccessControl
import AttendanceProtocol
import KafkaClient
import RegistryFeed
import ServiceRuntime

/// What `session-merger` runs (`ServiceKit`): its migrations, then the producer, the broker watch, the
/// registry feed (site shifts for daily attendance), the session-change outbox publisher, the idle
/// sweep, the event retention, the consumer pipeline and the admin HTTP server. Its own settings: `SessionMergerConfiguration.load`.
package enum SessionMergerServer {
    package static let descriptor = ServiceDescriptor(name: "session-merger", defaultHTTPPort: 8082, migrations: .merger)

    package static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let (kit, merger) = try await ServiceKit.start(descriptor, SessionMergerConfiguration.self, environment: env)
        let client = kit.postgres, logger = kit.logger

        let producer = try kit.makeProducer()
        let cache = RegistryCache()
        let processor = VettedBatchProcessor(
            client: client, configuration: merger, deadLetters: KafkaDeadLetterSink(producer: producer, topic: merger.topics[.deadLetters]),
            logger: logger, userSites: { cache.user(id: $0)?.siteIds })
        let registry = try RegistryCacheLoader(
            cache: cache,
            configuration: RegistryCacheLoaderConfiguration(
                kafka: kit.configuration.kafka, groupIdPrefix: "session-merger-registry", topic: merger.topics[.registryChanges]),
            logger: logger)
        let pipeline = try MergerPipeline(
            kafka: kit.configuration.kafka, configuration: merger, processor: processor, producer: producer, logger: logger,
            registry: registry)
        let app = buildApplication(
            configuration: kit.configuration,
            sessions: PostgresSessionQueryRepository(client: kit.reportPostgres, logger: logger),
            shifts: RegistryCacheShiftProvider(loader: registry),
            keyVerifier: try kit.adminKeyVerifier(environment: env),
            groupId: merger.consumer.groupId,
            minimumPresence: merger.minimumPresence,
            readiness: [PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer), pipeline.storeHealth],
            metrics: kit.metrics, logger: logger)
        try await kit.run(
            [
                producer,
                try kit.brokerStateWatch(
                    producer: producer, topics: [merger.topics[.vettedEvents], merger.topics[.verdicts], merger.topics[.sessions]],
                    feed: merger.topics[.registryChanges],
                    forgetPositions: {
                        await StoredOffsetsTable.forget(groupId: merger.consumer.groupId, client: client, logger: logger)
                    }),
                registry,
                SessionChangePublisher(client: client, producer: producer, configuration: merger, logger: logger),
                IdleSweeper(client: client, configuration: merger, logger: logger),
                EventRetention(client: client, configuration: merger, logger: logger),
                pipeline,
                app,
            ])
    }
}
