import Foundation
import KafkaClient
import Logging
import PolicyServiceCore
import RegistryFeed
import ServiceRuntime

public let policyServiceDefaultHTTPPort = 8081

/// What `policy-service` runs: configuration (exit 78 on a bad value), logging, metrics, the
/// topics, the registry feed's cache, the raw → vetted pipeline and `/health` + `/metrics`, until
/// SIGTERM/SIGINT.
///
/// Environment besides the shared one (`HTTP_*`, `KAFKA_BROKERS`, `LOG_*`, `INSTANCE_ID`):
/// - `POLICY_BOOK_FILE`: per-site rule configuration (see `PolicyBookLoader`);
/// - `POLICY_MAX_BATCH`: records per poll (default 500).
public enum PolicyServer {
    public static let serviceName = "policy-service"

    public static func run(environment env: EnvironmentReader = EnvironmentReader()) async throws {
        let configuration = try ServiceConfiguration.load(service: serviceName, defaultHTTPPort: policyServiceDefaultHTTPPort, from: env)
        let engine = PolicyEngine.standard
        let book = try PolicyBookLoader.load(from: env, engine: engine)
        let maxBatch = try env.int("POLICY_MAX_BATCH", default: 500, in: 1...10_000)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: serviceName)
        let logger = Logger(label: serviceName)
        let metrics = MetricsSetup.bootstrap()

        try await configuration.ensureTopics(logger: logger)
        let pipelineConfiguration = PolicyPipelineConfiguration()
        var consumerConfiguration = KafkaConsumerConfiguration(
            client: configuration.kafka, groupId: pipelineConfiguration.groupId, topics: [pipelineConfiguration.rawTopic]
        )
        consumerConfiguration.maxBatchSize = maxBatch
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        let cache = RegistryCache()
        let loader = try RegistryCacheLoader(
            cache: cache, configuration: RegistryCacheLoaderConfiguration(kafka: configuration.kafka, groupIdPrefix: "policy-registry-cache"),
            logger: logger
        )
        let pipeline = PolicyPipeline(
            consumer: consumer, producer: producer, engine: engine, book: book,
            registry: RegistryCacheView(cache: cache), registryLoader: loader, configuration: pipelineConfiguration, logger: logger
        )
        let app = ServiceApplication.build(
            configuration: configuration, registry: metrics,
            readiness: [KafkaReadinessCheck(producer: producer), RegistryFeedReadinessCheck(loader: loader)],
            logger: logger
        )
        logger.info("policy book loaded", metadata: [
            "sites": "\(book.sites.count)", "defaultVersion": "\(book.defaultPolicy.version)", "globalKillSwitch": "\(book.globalKillSwitch)",
        ])
        // Shutdown runs in reverse: the server stops, the pipeline finishes its batch (delivered and
        // committed), the consumer leaves the group, the producer flushes.
        try await ServiceMain.runServices([producer, loader, consumer, pipeline, app], logger: logger)
    }
}
