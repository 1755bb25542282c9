import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime

/// The real local broker and PostgreSQL, started by the project's own script
/// (`deploy/local/stack.sh start`: installs what is missing, starting twice is harmless).
/// Shared by every test target that needs them.
public enum LocalStack {
    /// The repository root (this file is Tests/Support/LocalStackTesting/LocalStack.swift).
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs the start script once per test process.
    static let started: Result<Void, StackError> = {
        do {
            let (status, output) = try runBlocking("/bin/bash", [root.appendingPathComponent("deploy/local/stack.sh").path, "start"])
            return status == 0 ? .success(()) : .failure(StackError(output: output))
        } catch {
            return .failure(StackError(output: "could not run stack.sh: \(error)"))
        }
    }()

    public struct StackError: Error, CustomStringConvertible {
        public let output: String
        public var description: String { "deploy/local/stack.sh start failed:\n\(output)" }
    }

    public static func ensureStarted() throws {
        try started.get()
    }

    /// The stack's run folder (secrets, service logs, locks): `RUN_DIR`, as deploy/local/env.sh sets
    /// it (the test suite's own stack under `deploy/local/test.sh`), else `.local/run`.
    public static var runDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["RUN_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        return root.appendingPathComponent(".local/run")
    }

    /// An executable product built beside the running test runner (the same build folder and
    /// configuration as the tests themselves: on Linux the runner is `<bin>/<package>PackageTests.xctest`).
    public static func builtProduct(_ name: String) -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name)
    }

    public static var brokers: String {
        ProcessInfo.processInfo.environment["KAFKA_BROKERS"] ?? "127.0.0.1:\(ProcessInfo.processInfo.environment["KAFKA_PORT"] ?? "19092")"
    }

    /// The broker's quirks as the stack's environment names them (`KAFKA_BROKER_QUIRKS`, set by
    /// deploy/local/env.sh), else those of the local stack's broker.
    public static var brokerQuirks: BrokerQuirks {
        BrokerQuirks.named(ProcessInfo.processInfo.environment["KAFKA_BROKER_QUIRKS"] ?? "tansu") ?? .tansu
    }

    public static var postgres: PostgresConfiguration {
        get throws { try PostgresConfiguration.load(from: EnvironmentReader()) }
    }

    /// A service's shared configuration for a server a test starts in process: the stack's
    /// environment (database, broker), listening on 127.0.0.1 at a port the system picks.
    public static func serviceConfiguration(service: String) throws -> ServiceConfiguration {
        var env = ProcessInfo.processInfo.environment
        env["HTTP_PORT"] = "0"
        env["HTTP_HOST"] = "127.0.0.1"
        return try ServiceConfiguration.load(service: service, defaultHTTPPort: 0, from: EnvironmentReader(env))
    }

    public static let logger = logger(label: "integration")

    /// A logger for tests: warnings and worse only.
    public static func logger(label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }

    public static func uniqueName(_ prefix: String) -> String {
        "\(prefix).\(UInt32.random(in: 0...UInt32.max))"
    }

    /// A registry feed of the caller's own: a new compacted topic named `registry.changes.<random>` on
    /// the local broker. A test whose registry tables live in a schema of its own publishes them
    /// there, so no other test's registry (whose shard UUIDs and majors are the same) reaches its caches.
    public static func newRegistryFeedTopic() async throws -> String {
        try ensureStarted()
        let topic = uniqueName("registry.changes")
        let admin = try KafkaAdmin(
            configuration: KafkaConfiguration(bootstrapServers: brokers, brokerQuirks: brokerQuirks, clientId: "test-topics"),
            logger: logger)
        _ = try await admin.createTopics([KafkaTopicSpec(name: topic, partitions: 1, config: ["cleanup.policy": "compact"])])
        return topic
    }

    /// A PostgreSQL client running for the duration of `body`; `searchPath` as the services set it
    /// (`PostgresConfiguration.searchPath`).
    public static func withPostgres<T: Sendable>(searchPath: [String] = [], _ body: (PostgresClient) async throws -> T) async throws -> T {
        try ensureStarted()
        var settings = try postgres
        settings.searchPath = searchPath
        let client = settings.makeClient(logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            // `body` leases connections once the client's run() has begun (PostgresNIO warns of a lease
            // before it, once per test).
            let (started, starting) = AsyncStream<Void>.makeStream()
            group.addTask {
                starting.finish()
                await client.run()
            }
            for await _ in started {}
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// A schema of the caller's own (`<prefix>_<random>`), built by `migrations`, and a client whose
    /// unqualified table names resolve there first, as the service's own pool does. The schema and its
    /// `schema_migrations` rows are dropped afterwards, also when `body` throws. Nothing another test,
    /// or a service some stack left running, does reaches it: not its outbox, not its offsets.
    public static func withMigratedSchema<T: Sendable>(
        _ migrations: ServiceMigrations, prefix: String, _ body: (PostgresClient, String) async throws -> T
    ) async throws -> T {
        let schema = "\(prefix)_\(String(UUID().uuidString.prefix(8)).lowercased())"
        return try await withPostgres(searchPath: [schema, "public"]) { client in
            try await migrations.apply(client: client, schema: schema, logger: logger)
            do {
                let result = try await body(client, schema)
                try await drop(schema, of: migrations, client: client)
                return result
            } catch {
                try? await drop(schema, of: migrations, client: client)
                throw error
            }
        }
    }

    private static func drop(_ schema: String, of migrations: ServiceMigrations, client: PostgresClient) async throws {
        try await client.query("DROP SCHEMA IF EXISTS \(unescaped: schema) CASCADE", logger: logger)
        let series = migrations.series(schema: schema)
        try await client.query("DELETE FROM public.schema_migrations WHERE service = \(series)", logger: logger)
    }
}
