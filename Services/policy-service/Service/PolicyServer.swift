import AccessControl
import AttendanceProtocol
import KafkaClient
import Logging
import PolicyServiceCore
import RegistryFeed
import ServiceRuntime

/// What `policy-service` runs (`ServiceKit`): its migrations and the stored policies, then the
/// producer, the broker watch, the registry feed's cache, the raw → vetted pipeline, the policy-book
/// refresher and policy administration over HTTP. Its own settings: `PolicyServiceConfiguration`.
package enum PolicyServer {
    package static let descriptor = ServiceDescriptor(name: "policy-service", defaultHTTPPort: 8081, migrations: .policy)

    package static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let (kit, settings) = try await ServiceKit.start(descriptor, PolicyServiceConfiguration.self, environment: env)
        let client = kit.postgres, logger = kit.logger, kafka = kit.configuration.kafka, topics = kit.configuration.topics
        let keyVerifier = try kit.adminKeyVerifier(environment: env)
        // The registry feed's cache: the rules' registry view, and the source of the beacons' GATT keys.
        let cache = RegistryCache()
        let gatt = try GattConfiguration.load(from: env, registry: cache)
        let engine = PolicyEngine.withGatt(gatt)
        let book = try PolicyBookLoader.load(from: env, engine: engine)
        let pipelineConfiguration = settings.pipeline
        // The history rules' punches, kept across restarts; every user is read again after a rebalance.
        let punchLedger = PunchLedger(store: PostgresPunchStore(client: client, logger: logger))
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                client: kafka, group: pipelineConfiguration.consumer, topics: [pipelineConfiguration.rawTopic]),
            rebalanceListener: punchLedger, logger: logger)
        let producer = try kit.makeProducer()
        let loader = try RegistryCacheLoader(
            cache: cache,
            configuration: RegistryCacheLoaderConfiguration(
                kafka: kafka, groupIdPrefix: "policy-registry-cache", topic: topics[.registryChanges]),
            logger: logger)
        let pipeline = PolicyPipeline(
            consumer: consumer, producer: producer, engine: engine, book: book, registry: RegistryCacheView(cache: cache),
            registryLoader: loader,
            nonceLedger: gatt.map {
                GattNonceLedger(store: PostgresSpentNonceStore(client: client, logger: logger), nonces: $0.nonces)
            },
            punchLedger: punchLedger,
            configuration: pipelineConfiguration, logger: logger)
        let repository = PostgresPolicyRepository(client: client, logger: logger)
        let refresher = PolicyBookRefresher(
            base: book, repository: repository, hostedRules: engine.ruleIDs, interval: settings.refreshInterval, logger: logger
        ) { pipeline.setPolicyBook($0) }
        let app = ServiceApplication.build(
            configuration: kit.configuration, registry: kit.metrics,
            readiness: [
                PostgresReadinessCheck(client: client), KafkaReadinessCheck(producer: producer), RegistryFeedReadinessCheck(loader: loader),
                pipeline.storeHealth,
            ],
            context: AdminContext.self, logger: logger, openAPI: .policy
        ) { router in
            addPolicyAdminRoutes(
                to: router, controller: PolicyAdminController(repository: repository, refresher: refresher, hostedRules: engine.ruleIDs),
                keyVerifier: keyVerifier)
        }
        logger.info(
            "policy book loaded",
            metadata: [
                "sites": "\(book.sites.count)", "defaultVersion": "\(book.defaultPolicy.version)",
                "globalKillSwitch": "\(book.globalKillSwitch)",
                "rules": .string(engine.ruleIDs.map(\.rawValue).joined(separator: ",")),
            ])
        try await kit.run(
            [
                producer,
                try kit.brokerStateWatch(producer: producer, topics: [pipelineConfiguration.rawTopic, pipelineConfiguration.vettedTopic]),
                loader, consumer, pipeline, refresher, app,
            ],
        ) { _ in
            // Decide with the stored policies from the first event on, not the file's alone.
            try await refresher.refresh()
        }
    }
}
