import AttendanceProtocol
import KafkaClient
import Logging
import PostgresNIO
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Who a service is to `ServiceKit.start`: its name (logs, metrics, the command line's usage), the
/// HTTP port it listens on unless `HTTP_PORT` says otherwise, and its migrations (`nil`: it keeps no
/// tables).
public struct ServiceDescriptor: Sendable {
    public let name: String
    public let defaultHTTPPort: Int
    public let migrations: ServiceMigrations?

    public init(name: String, defaultHTTPPort: Int, migrations: ServiceMigrations? = nil) {
        self.name = name
        self.defaultHTTPPort = defaultHTTPPort
        self.migrations = migrations
    }
}

/// A service's own settings (the shared ones are `ServiceConfiguration`), read from the environment
/// once, at start.
public protocol ServiceSettings: Sendable {
    static func load(from env: EnvironmentReader) throws(ConfigurationError) -> Self
}

/// Settings that name the PostgreSQL schema of the service's tables (`<SERVICE>_SCHEMA`).
public protocol SchemaSettings: ServiceSettings {
    var schema: String { get }
}

/// What every service starts from, made the same way for each: its shared configuration (read first,
/// so a bad value ends the process with one line and exit 78 before anything starts), logging, the
/// Prometheus registry, and the PostgreSQL pools (the pipeline's, and one for the reads people ask for).
///
/// `run` then starts the pools as the first services of the process's `ServiceGroup`, prepares (the
/// platform's topics, then the service's migrations and bootstraps) and only then starts the
/// service's own parts, until SIGTERM/SIGINT. Shutdown runs in reverse: the parts last in the list stop first
/// (put the HTTP server last, the producer first), the pool closes after all of them.
public struct ServiceKit: Sendable {
    /// What the executable was asked to do: `<service>` serves; `<service> migrate` applies the
    /// service's migrations and exits (an operator's way to migrate ahead of a deploy).
    public enum Command: Sendable, Equatable {
        case serve
        case migrate

        public static func parse(service: String, arguments: [String]) throws(UsageError) -> Command {
            switch arguments {
            case []: return .serve
            case ["migrate"]: return .migrate
            default:
                throw UsageError(
                    "\(service): unknown arguments '\(arguments.joined(separator: " "))'\nusage: \(service)          serve (settings from the environment)\n       \(service) migrate  apply its database migrations and exit"
                )
            }
        }
    }

    public let command: Command
    /// The service's migrations and the schema they build (their default when `nil`).
    public let migrations: ServiceMigrations?
    public let schema: String?
    public let configuration: ServiceConfiguration
    public let logger: Logger
    public let metrics: PrometheusCollectorRegistry
    public let postgres: PostgresClient
    /// The pool of the reads people ask for, apart from `postgres` (`PostgresConfiguration.makeReportClient`).
    public let reportPostgres: PostgresClient

    /// Reads the shared configuration and the service's own settings (`Settings.load`, before logging
    /// starts: a bad value is a configuration error, like a bad shared one), then sets up logging,
    /// metrics and the pool. Started as `<service> migrate`, this applies the service's migrations, into
    /// `settings.schema` (their default schema for settings without one), and ends the process (exit 0)
    /// before the service reads anything else, such as its secrets. A service's queries name no schema:
    /// the pool's search path is that schema, then `public` (`PostgresConfiguration.searchPath`).
    /// `arguments` is the command line after the executable's name (`Command`).
    public static func start<Settings: ServiceSettings>(
        _ service: ServiceDescriptor, _ settingsType: Settings.Type, environment env: EnvironmentReader,
        arguments: [String] = Array(CommandLine.arguments.dropFirst())
    ) async throws -> (kit: ServiceKit, settings: Settings) {
        let command = try Command.parse(service: service.name, arguments: arguments)
        var configuration = try ServiceConfiguration.load(service: service.name, defaultHTTPPort: service.defaultHTTPPort, from: env)
        let settings = try Settings.load(from: env)
        let schema = (settings as? any SchemaSettings)?.schema
        if let migrations = service.migrations { configuration.postgres.searchPath = [schema ?? migrations.defaultSchema, "public"] }
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel, service: service.name)
        var logger = Logger(label: service.name)
        logger[metadataKey: "instance"] = .string(configuration.instanceId)
        let kit = ServiceKit(
            command: command, migrations: service.migrations, schema: schema, configuration: configuration, logger: logger,
            metrics: MetricsSetup.bootstrap(),
            postgres: configuration.postgres.makeClient(logger: logger),
            reportPostgres: configuration.postgres.makeReportClient(logger: logger)
        )
        if command == .migrate {
            try await kit.migrateOnly()
            ServiceMain.finish()
        }
        return (kit, settings)
    }

    /// `<service> migrate`: the pool just long enough to apply the migrations.
    private func migrateOnly() async throws {
        let postgres = postgres, migrate = migrate
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await postgres.run() }
            defer { group.cancelAll() }
            try await migrate()
        }
    }

    /// Applies the service's migrations (none for a service without tables).
    private var migrate: @Sendable () async throws -> Void {
        let migrations = migrations, schema = schema, postgres = postgres, logger = logger
        return {
            guard let migrations else { return logger.info("no migrations: this service keeps no tables") }
            let applied = try await migrations.apply(client: postgres, schema: schema, logger: logger)
            logger.info("migrations applied", metadata: ["series": "\(migrations.service)", "count": "\(applied.count)"])
        }
    }

    /// A producer on the service's broker (idempotent, acks=all).
    /// - Parameter deliveryTimeout: how long a send may take to succeed or fail (librdkafka's
    ///   `delivery.timeout.ms`); nil keeps the producer's default.
    public func makeProducer(deliveryTimeout: Duration? = nil) throws -> KafkaProducer {
        var producer = KafkaProducerConfiguration(client: configuration.kafka)
        if let deliveryTimeout {
            producer.deliveryTimeoutMs = try Self.deliveryTimeoutMs(deliveryTimeout, lingerMs: configuration.kafka.lingerMs)
        }
        return try KafkaProducer(configuration: producer, logger: logger)
    }

    /// `timeout` in milliseconds, once it is above the batching wait (`KAFKA_LINGER_MS`): librdkafka
    /// refuses the pair otherwise, in words of its own.
    static func deliveryTimeoutMs(_ timeout: Duration, lingerMs: Int?) throws(ConfigurationError) -> Int {
        if let lingerMs, timeout.milliseconds <= Int64(lingerMs) {
            throw ConfigurationError(
                key: "KAFKA_LINGER_MS", value: String(lingerMs),
                expected: "less than the delivery timeout (\(timeout.milliseconds) ms, PRODUCE_TIMEOUT_MS in the gateway)")
        }
        return Int(timeout.milliseconds)
    }

    /// The crash-only watch of the broker's state (`BrokerStateWatch`) for `producer`: `topics` are the
    /// ones this service reads or writes; the registry feed (`feed`), a log that only grows, is every
    /// service's canary, whether it reads the feed or not. A service that stores its consumer offsets
    /// with its results passes `forgetPositions`, which deletes them before the process exits.
    public func brokerStateWatch(
        producer: KafkaProducer, topics: [String], feed: String? = nil, forgetPositions: @escaping @Sendable () async -> Void = {}
    ) throws(KafkaError) -> BrokerStateWatch {
        let feed = feed ?? configuration.topics[.registryChanges]
        return BrokerStateWatch(
            source: KafkaBrokerStateSource(admin: try KafkaAdmin(configuration: configuration.kafka, logger: logger)),
            watchedTopics: Set(topics + [feed]), canaries: [feed],
            producer: producer, interval: configuration.brokerWatchInterval, logger: logger, forgetPositions: forgetPositions)
    }

    /// Runs the pool, the topic setup, the service's migrations, `prepare` (with the pool running),
    /// then `services` until SIGTERM/SIGINT. A failure anywhere ends the process (`ServiceMain.run`
    /// prints it).
    public func run(_ services: [any Service], prepare: @escaping @Sendable (PostgresClient) async throws -> Void = { _ in }) async throws {
        let configuration = configuration, postgres = postgres, logger = logger, migrate = migrate
        let preparation = Preparation(logger: logger) {
            try await configuration.ensureTopics(logger: logger)
            try await migrate()
            try await prepare(postgres)
        }
        try await Self.group(first: [postgres, reportPostgres], preparation: preparation, services: services, logger: logger).run()
    }

    /// The process's group: `first` (the pool), the preparation, then `services` once it succeeded;
    /// SIGTERM and SIGINT shut it down gracefully, within `maximumGracefulShutdown`.
    static func group(
        first: [any Service], preparation: Preparation, services: [any Service], logger: Logger,
        maximumGracefulShutdown: Duration = Self.maximumGracefulShutdown
    ) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(
            services: first.map { .init(service: $0) } + [.init(service: preparation, successTerminationBehavior: .ignore)]
                + services.map { .init(service: AfterPreparation(service: $0, preparation: preparation)) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            cancellationSignals: [],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdown
        configuration.maximumCancellationDuration = Self.maximumCancellation
        return ServiceGroup(configuration: configuration)
    }

    /// How long a graceful shutdown may take before the services are cancelled: a consumer's drain
    /// (30 s) and a producer's flush (10 s) fit, a wait on a database that stopped answering does not.
    public static let maximumGracefulShutdown: Duration = .seconds(45)
    /// How long the cancelled services may take to end before the process stops with a fatal error, so
    /// that a supervisor restarts it. What was not committed is read again by the next owner.
    public static let maximumCancellation: Duration = .seconds(10)
}

/// Runs the preparation once (in the process's group, after the pool started) and lets the services
/// waiting on it go. A failure is logged here, at `error`, with its cause: the group reports a service's
/// error only at `debug`.
final class Preparation: Service, Sendable {
    private struct State {
        var finished = false
        var succeeded = false
        var nextWaiter = 0
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let work: @Sendable () async throws -> Void
    private let logger: Logger
    private let state = Mutex(State())

    init(logger: Logger, _ work: @escaping @Sendable () async throws -> Void) {
        self.logger = logger
        self.work = work
    }

    func run() async throws {
        var succeeded = false
        defer { finish(succeeded: succeeded) }
        do {
            try await cancelWhenGracefulShutdown { try await self.work() }
        } catch  where Task.isShuttingDownGracefully {
            return // asked to stop while preparing: nothing starts, and that is no failure
        } catch {
            logger.error(
                "preparing the service failed (topics, migrations, start-up reads); exiting", metadata: ["error": "\(error)"])
            throw error
        }
        succeeded = !Task.isCancelled && !Task.isShuttingDownGracefully
    }

    private func finish(succeeded: Bool) {
        let waiting = state.withLock { state in
            state.finished = true
            state.succeeded = succeeded
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Waits until the preparation ended (or this task is cancelled); true when it succeeded.
    func succeeded() async -> Bool {
        let id = state.withLock { state -> Int? in
            guard !state.finished else { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        if let id {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let resumeNow = state.withLock { state in
                        if state.finished || Task.isCancelled { return true }
                        state.waiting[id] = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                state.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
            }
        }
        return state.withLock { $0.finished && $0.succeeded }
    }
}

/// A service that starts only after the preparation succeeded; its graceful shutdown is the group's.
/// After a failed preparation it waits for the group to end it, so that the group reports the
/// preparation's error rather than a service that finished unexpectedly.
struct AfterPreparation: Service {
    let service: any Service
    let preparation: Preparation

    func run() async throws {
        let ready = await cancelWhenGracefulShutdown { await preparation.succeeded() }
        guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
        guard ready else {
            try? await gracefulShutdown()
            return
        }
        try await service.run()
    }
}
