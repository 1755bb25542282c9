import Foundation
import KafkaClient
import Logging

/// How logs are written: human-readable lines, or one JSON object per line for log shippers.
public enum LogFormat: String, Sendable, CaseIterable {
    case text, json
}

/// Where the service listens and what it connects to; the settings every executable shares.
/// Service-specific settings live in each service's own configuration, read with the same reader.
public struct ServiceConfiguration: Sendable {
    public var serviceName: String
    /// Identifies this process among replicas (verdicts are routed back to the gateway instance).
    public var instanceId: String
    public var httpHost: String
    public var httpPort: Int
    public var logFormat: LogFormat
    public var logLevel: Logger.Level
    public var kafka: KafkaConfiguration
    public var postgres: PostgresConfiguration
    /// `TOPIC_PARTITIONS`: the partition count of the partitioned topics this service creates when
    /// they are missing (`TopicBootstrap`); nil keeps the protocol's counts.
    public var topicPartitions: Int32?
    /// `TOPIC_REPLICATION_FACTOR` (default 1, the local single broker's): the replicas of each topic
    /// this service creates when it is missing. A cluster of three or more brokers wants 3.
    public var topicReplicationFactor: Int32 = 1
    /// The topics' names on the broker (`TOPIC_<NAME>` overrides, `TopicNames`).
    public var topics = TopicNames()
    /// `BROKER_WATCH_INTERVAL_MS` (default 1000, 0 = off): how often `BrokerStateWatch` checks that
    /// the broker still holds this service's topics and producer.
    public var brokerWatchInterval: Duration? = .seconds(1)

    public init(
        serviceName: String, instanceId: String, httpHost: String, httpPort: Int,
        logFormat: LogFormat, logLevel: Logger.Level, kafka: KafkaConfiguration, postgres: PostgresConfiguration
    ) {
        self.serviceName = serviceName
        self.instanceId = instanceId
        self.httpHost = httpHost
        self.httpPort = httpPort
        self.logFormat = logFormat
        self.logLevel = logLevel
        self.kafka = kafka
        self.postgres = postgres
    }

    /// Creates the platform's topics that are missing, with `topicPartitions`.
    public func ensureTopics(logger: Logger) async throws {
        try await TopicBootstrap.ensureTopics(
            KafkaAdmin(configuration: kafka, logger: logger), replicationFactor: topicReplicationFactor, partitions: topicPartitions,
            names: topics)
    }

    /// Reads `HTTP_HOST`, `HTTP_PORT`, `LOG_FORMAT`, `LOG_LEVEL`, `INSTANCE_ID`, `KAFKA_BROKERS`, `KAFKA_BROKER_QUIRKS`,
    /// `KAFKA_LINGER_MS`, `KAFKA_FETCH_WAIT_MAX_MS`, `TOPIC_PARTITIONS`, `TOPIC_REPLICATION_FACTOR`, the `TOPIC_<NAME>` overrides,
    /// `BROKER_WATCH_INTERVAL_MS` and the PostgreSQL settings (`DATABASE_URL` or `PGHOST`/`PGPORT`/`PGUSER`/`PGPASSWORD`/`PGDATABASE`).
    public static func load(
        service: String, defaultHTTPPort: Int, from env: EnvironmentReader = EnvironmentReader()
    ) throws(ConfigurationError) -> ServiceConfiguration {
        try env.checkFileReferences()
        try env.refuseRenamedKeys()
        let levelText = env.string("LOG_LEVEL", default: "info").lowercased()
        guard let level = Logger.Level(rawValue: levelText) else {
            throw ConfigurationError(
                key: "LOG_LEVEL", value: levelText, expected: "one of " + Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let instance = instanceId(service: service, from: env)
        var configuration = ServiceConfiguration(
            serviceName: service,
            instanceId: instance,
            httpHost: env.string("HTTP_HOST", default: "127.0.0.1"),
            // 0 picks a free port (tests, several replicas on one host behind a proxy).
            httpPort: try env.int("HTTP_PORT", default: defaultHTTPPort, in: 0...65_535),
            logFormat: try env.choice("LOG_FORMAT", default: LogFormat.text),
            logLevel: level,
            kafka: try kafka(clientId: instance, from: env),
            postgres: try PostgresConfiguration.load(from: env)
        )
        configuration.postgres.applicationName = service
        configuration.topicPartitions = try env.optionalInt("TOPIC_PARTITIONS", in: 1...1_000).map { Int32($0) }
        configuration.topicReplicationFactor = Int32(try env.int("TOPIC_REPLICATION_FACTOR", default: 1, in: 1...10))
        configuration.topics = TopicNames.load(from: env)
        let watch = try env.milliseconds("BROKER_WATCH_INTERVAL_MS", default: .seconds(1), in: 0...600_000)
        configuration.brokerWatchInterval = watch == .zero ? nil : watch
        return configuration
    }

    /// `INSTANCE_ID`, by default `<service>-<host>-<pid>`.
    public static func instanceId(service: String, from env: EnvironmentReader) -> String {
        env.string("INSTANCE_ID", default: "\(service)-\(ProcessInfo.processInfo.hostName)-\(getpid())")
    }

    /// The Kafka settings alone (`KAFKA_BROKERS`, `KAFKA_BROKER_QUIRKS`, `KAFKA_LINGER_MS`,
    /// `KAFKA_FETCH_WAIT_MAX_MS`): for a tool that checks the broker whatever the other settings say.
    public static func kafka(clientId: String, from env: EnvironmentReader) throws(ConfigurationError) -> KafkaConfiguration {
        let brokers = env.string("KAFKA_BROKERS", default: "127.0.0.1:19092")
        try validateBrokerList(brokers)
        return KafkaConfiguration(
            bootstrapServers: brokers, brokerQuirks: try brokerQuirks(from: env), clientId: clientId,
            lingerMs: try env.optionalInt("KAFKA_LINGER_MS", in: 0...1_000),
            fetchWaitMaxMs: try env.optionalInt("KAFKA_FETCH_WAIT_MAX_MS", in: 1...5_000)
        )
    }

    /// `KAFKA_BROKER_QUIRKS`: `none` (default; Apache Kafka) or `tansu` (the local stack's broker), the
    /// workarounds `BrokerQuirks` holds for that broker.
    static func brokerQuirks(from env: EnvironmentReader) throws(ConfigurationError) -> BrokerQuirks {
        let name = env.string("KAFKA_BROKER_QUIRKS", default: "none")
        guard let quirks = BrokerQuirks.named(name) else {
            throw ConfigurationError(
                key: "KAFKA_BROKER_QUIRKS", value: name, expected: "one of " + BrokerQuirks.names.keys.sorted().joined(separator: ", "))
        }
        return quirks
    }

    /// Each entry is `host:port`, an IPv6 address in brackets (`[::1]:9092`) as librdkafka takes it.
    static func validateBrokerList(_ brokers: String) throws(ConfigurationError) {
        for entry in brokers.split(separator: ",") {
            let text = entry.trimmingCharacters(in: .whitespaces)
            guard let colon = text.lastIndex(of: ":") else {
                throw ConfigurationError(key: "KAFKA_BROKERS", value: brokers, expected: "a comma-separated list of host:port")
            }
            let host = text[..<colon], portText = text[text.index(after: colon)...]
            let bracketed = host.hasPrefix("[") || host.hasSuffix("]")
            let hostIsValid = bracketed ? host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 : !host.contains(":")
            guard !host.isEmpty, hostIsValid, let port = Int(portText), (1...65_535).contains(port) else {
                throw ConfigurationError(
                    key: "KAFKA_BROKERS", value: brokers, expected: "a comma-separated list of host:port (an IPv6 address in brackets)")
            }
        }
    }
}

/// PostgreSQL connection settings.
public struct PostgresConfiguration: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String
    public var database: String
    public var maxConnections: Int
    /// Schemas an unqualified table name is looked up in, in order (PostgreSQL's `search_path`); empty
    /// keeps the server's. A service's queries name no schema: `ServiceKit.start` puts the service's own
    /// first, so the schema is a parameter (`MERGER_SCHEMA`, ...) and a test can give it one of its own.
    public var searchPath: [String] = []
    /// What PostgreSQL shows as this pool's `application_name` (`pg_stat_activity`): the service's name
    /// (`ServiceConfiguration.load`), so an operator, and the pipeline benchmark, can tell whose
    /// connection each backend is. `nil` leaves it empty.
    public var applicationName: String?
    /// The pool of the reads people ask for (reports, the admin lists, the status page), apart from the
    /// pipeline's (`makeReportClient`): its size (`PG_REPORT_MAX_CONNECTIONS`) and how long one of its
    /// statements may run (`PG_REPORT_TIMEOUT_SECONDS`).
    public var reportMaxConnections = 4
    public var reportTimeoutSeconds = 30

    public init(host: String, port: Int, username: String, password: String, database: String, maxConnections: Int = 20) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.maxConnections = maxConnections
    }

    /// `DATABASE_URL` (postgres://user:password@host:port/database) wins over the `PG*` variables; a URL
    /// without a password takes `PGPASSWORD` (or `PGPASSWORD_FILE`), as libpq does. The connection is not
    /// encrypted: a URL asking for TLS (`sslmode=require` or stricter) or for another connection
    /// parameter is refused rather than connected without it.
    public static func load(from env: EnvironmentReader) throws(ConfigurationError) -> PostgresConfiguration {
        var configuration = try loadConnection(from: env)
        configuration.reportMaxConnections = try env.int("PG_REPORT_MAX_CONNECTIONS", default: 4, in: 1...100)
        configuration.reportTimeoutSeconds = try env.int("PG_REPORT_TIMEOUT_SECONDS", default: 30, in: 1...3_600)
        return configuration
    }

    private static func loadConnection(from env: EnvironmentReader) throws(ConfigurationError) -> PostgresConfiguration {
        // At least 2: an outbox relay keeps one connection listening for notifications for as long as it
        // runs, and with a pool of one every other query would wait for it for ever.
        let maxConnections = try env.int("PG_MAX_CONNECTIONS", default: 20, in: 2...500)
        if let url = env.optionalString("DATABASE_URL") {
            guard let components = URLComponents(string: url),
                components.scheme == "postgres" || components.scheme == "postgresql",
                let host = components.host, !host.isEmpty,
                let user = components.user, !user.isEmpty
            else {
                throw ConfigurationError(key: "DATABASE_URL", value: redact(url), expected: "postgres://user:password@host:port/database")
            }
            let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
            guard !database.isEmpty else {
                throw ConfigurationError(key: "DATABASE_URL", value: redact(url), expected: "a database name in the path")
            }
            let port = components.port ?? 5432
            guard (1...65_535).contains(port) else {
                throw ConfigurationError(key: "DATABASE_URL", value: redact(url), expected: "a port from 1 to 65535")
            }
            let plaintext: Set<String> = ["disable", "allow", "prefer"]
            for item in components.queryItems ?? [] where !(item.name == "sslmode" && plaintext.contains(item.value ?? "")) {
                throw ConfigurationError(
                    key: "DATABASE_URL", value: redact(url),
                    expected:
                        "no connection parameter but sslmode=disable, allow or prefer (\(item.name) is not supported: the services "
                        + "connect without TLS, so keep PostgreSQL on a private network or behind a local TLS proxy)")
            }
            return PostgresConfiguration(
                host: host, port: port, username: user,
                password: components.password ?? env.optionalString("PGPASSWORD") ?? "", database: database, maxConnections: maxConnections
            )
        }
        return PostgresConfiguration(
            host: env.string("PGHOST", default: "127.0.0.1"),
            port: try env.port("PGPORT", default: 55432),
            username: env.string("PGUSER", default: "attendance"),
            password: env.string("PGPASSWORD", default: "attendance"),
            database: env.string("PGDATABASE", default: "attendance"),
            maxConnections: maxConnections
        )
    }

    /// Never print a password, not even in a configuration error: where the URL cannot be parsed, all of
    /// its user part goes.
    static func redact(_ url: String) -> String {
        guard let components = URLComponents(string: url) else {
            guard let schemeEnd = url.range(of: "://"), let at = url.range(of: "@", options: .backwards),
                schemeEnd.upperBound <= at.lowerBound
            else { return url }
            return url.replacingCharacters(in: schemeEnd.upperBound..<at.lowerBound, with: "***")
        }
        guard components.password != nil else { return url }
        var redacted = components
        redacted.password = "***"
        return redacted.string ?? "<unparseable>"
    }
}
