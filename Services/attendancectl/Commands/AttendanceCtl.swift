import ArgumentParser
import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import RegistryClient
import ServiceRuntime

/// `attendancectl`: the operator's command line. Settings come from the same environment variables
/// as the services (`KAFKA_BROKERS`, `DATABASE_URL` or `PG*`); errors are one readable line.
package struct AttendanceCtl: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "attendancectl",
        abstract: "Operate the beacon attendance platform.",
        subcommands: [Topics.self, Doctor.self, Secrets.self, APIKeys.self, Registry.self]
    )

    package init() {}

    /// Parses the command line and runs the chosen subcommand, then exits with its code. (Calling
    /// `main()` from a `main.swift` picks ArgumentParser's synchronous entry point, which refuses
    /// async commands.)
    package static func runAsRoot(_ arguments: [String]? = nil) async {
        let code = await execute(arguments ?? Array(CommandLine.arguments.dropFirst()))
        Foundation.exit(code)
    }

    /// Runs one command line and returns its exit code without exiting. Help goes to standard
    /// output; every failure is one `Error: ...` line on standard error (through `CLIContext.current`)
    /// and a non-zero code: 64 for bad arguments, 75 when a change was sent and no answer came (it may have
    /// been applied: a script must look before it repeats it), 1 otherwise.
    package static func execute(_ arguments: [String]) async -> Int32 {
        let context = CLIContext.current
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return ExitCode.success.rawValue
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                context.out(fullMessage(for: error))
                return code.rawValue
            }
            if let line = errorLine(for: error) { context.err(line) }
            if case RegistryClientError.outcomeUnknown = error { return Self.outcomeUnknownExitCode }
            return code.rawValue
        }
    }

    /// The exit code of a change whose outcome is unknown (`EX_TEMPFAIL`).
    package static let outcomeUnknownExitCode: Int32 = 75

    /// The one line a failure prints, `nil` for a bare exit code (the command printed its own output).
    package static func errorLine(for error: any Error) -> String? {
        let message = TableFormatter.singleLine(message(for: error)).trimmingCharacters(in: .whitespaces)
        if message.isEmpty {
            // A parse error without its own message (no subcommand given, say): the usage says it all.
            guard exitCode(for: error) == .validationFailure else { return nil }
            return "Error: " + TableFormatter.singleLine(fullMessage(for: error)).trimmingCharacters(in: .whitespaces)
        }
        let hint = exitCode(for: error) == .validationFailure ? " (see --help)" : ""
        return "Error: \(message)\(hint)"
    }
}

/// Options every subcommand shares.
package struct GlobalOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON instead of a table.")
    package var json = false

    @Option(name: .long, help: "Kafka brokers (default: $KAFKA_BROKERS or 127.0.0.1:19092).")
    package var brokers: String?

    package init() {}

    /// The process's environment with the context's variables over it (a test sets a few of its own).
    var environment: [String: String] {
        ProcessInfo.processInfo.environment.merging(CLIContext.current.environment) { _, own in own }
    }

    func kafka() throws -> KafkaConfiguration {
        var env = environment
        if let brokers { env["KAFKA_BROKERS"] = brokers }
        let reader = try Self.checkedReader(env)
        return try ServiceConfiguration.kafka(
            clientId: ServiceConfiguration.instanceId(service: "attendancectl", from: reader), from: reader)
    }

    func postgres() throws -> PostgresConfiguration {
        try PostgresConfiguration.load(from: Self.checkedReader(environment))
    }

    /// A reader of `env` that refuses, before anything is read, a `*_FILE` variable naming no readable
    /// file (never a silent fallback to the defaults, which could be another database) and a renamed key.
    private static func checkedReader(_ env: [String: String]) throws -> EnvironmentReader {
        let reader = EnvironmentReader(env)
        try reader.checkFileReferences()
        try reader.refuseRenamedKeys()
        return reader
    }

    /// librdkafka reports every refused connection while it retries; the command's own error line
    /// says what failed, so only critical library messages get through.
    var logger: Logger {
        var logger = Logger(label: "attendancectl")
        logger.logLevel = .critical
        return logger
    }
}

extension AttendanceCtl {
    struct Topics: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The platform's Kafka topics.",
            subcommands: [Ensure.self, List.self]
        )

        struct Ensure: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create every topic the protocol defines (existing ones are kept).")
            @OptionGroup var options: GlobalOptions
            @Option(help: "Replication factor for new topics (default: $TOPIC_REPLICATION_FACTOR, else 1).") var replicationFactor: Int32?
            @Option(help: "Partitions of every partitioned topic (default: $TOPIC_PARTITIONS, else the protocol's count).")
            var partitions: Int32?

            func run() async throws {
                let kafka = try options.kafka()
                let admin = try KafkaAdmin(configuration: kafka, logger: options.logger)
                let env = EnvironmentReader(options.environment)
                let partitions = try self.partitions ?? env.optionalInt("TOPIC_PARTITIONS", in: 1...1_000).map { Int32($0) }
                if let partitions, partitions < 1 { throw ValidationError("--partitions must be at least 1") }
                let replicationFactor = try self.replicationFactor ?? Int32(env.int("TOPIC_REPLICATION_FACTOR", default: 1, in: 1...10))
                if replicationFactor < 1 { throw ValidationError("--replication-factor must be at least 1") }
                let names = TopicNames.load(from: env)
                let created = try await CLIError.wrap("creating topics on \(kafka.bootstrapServers)") {
                    try await TopicBootstrap.ensureTopics(admin, replicationFactor: replicationFactor, partitions: partitions, names: names)
                }
                // What the broker has, not what was asked: an existing topic keeps its partitions.
                let onBroker = try await CLIError.wrap("reading the topics of \(kafka.bootstrapServers)") { try await admin.topics() }
                var differing: [String] = []
                let rows = Topic.allCases.map { topic in
                    let name = names[topic]
                    let wanted = TopicBootstrap.partitionCount(of: topic, override: partitions)
                    let actual = onBroker[name]
                    if partitions != nil, !created.contains(name), let actual, actual != wanted {
                        differing.append("\(name) has \(actual)")
                    }
                    return [
                        name, actual.map(String.init) ?? "missing", topic.cleanupPolicy.rawValue,
                        created.contains(name) ? "created" : "exists",
                    ]
                }
                Output.print(rows: rows, headers: ["TOPIC", "PARTITIONS", "CLEANUP", "STATUS"], json: options.json)
                if let partitions, !differing.isEmpty {
                    throw CLIError(
                        "existing topics keep their partitions, \(partitions) were asked for: \(differing.joined(separator: ", ")) "
                            + "(adding partitions moves users between them: see deploy/RUNBOOK.md, \"Partitions are the unit of parallelism\")"
                    )
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "The platform's topics as the broker reports them.")
            @OptionGroup var options: GlobalOptions

            func run() async throws {
                let kafka = try options.kafka()
                let admin = try KafkaAdmin(configuration: kafka, logger: options.logger)
                let onBroker = try await CLIError.wrap("reading broker metadata from \(kafka.bootstrapServers)") {
                    try await admin.topics()
                }
                let names = TopicNames.load(from: EnvironmentReader(options.environment))
                let rows = Topic.allCases.map { topic in
                    [names[topic], onBroker[names[topic]].map(String.init) ?? "missing", topic.keyDescription]
                }
                Output.print(rows: rows, headers: ["TOPIC", "PARTITIONS", "KEY"], json: options.json)
            }
        }
    }

    /// Checks that the broker and PostgreSQL answer and that a message makes a round trip.
    struct Doctor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Check the broker, the topics and PostgreSQL.")
        @OptionGroup var options: GlobalOptions
        @Option(help: "Replicas of the probe topic when it is created (default: $TOPIC_REPLICATION_FACTOR, else 1).")
        var replicationFactor: Int32?

        func run() async throws {
            var rows: [[String]] = []
            var failed = false
            func record(_ name: String, _ body: () async throws -> String) async {
                let start = ContinuousClock.now
                do {
                    let detail = try await body()
                    rows.append([name, "ok", detail, Output.millis(since: start)])
                } catch {
                    failed = true
                    rows.append([
                        name, "FAIL", "\(error)", Output.millis(since: start),
                    ])
                }
            }
            let kafka = try options.kafka()
            let logger = options.logger
            await record("librdkafka") { librdkafkaVersion }
            await record("broker") {
                let admin = try KafkaAdmin(configuration: kafka, logger: logger)
                let topics = try await admin.topics()
                let names = TopicNames.load(from: EnvironmentReader(options.environment))
                let missing = Topic.allCases.map { names[$0] }.filter { topics[$0] == nil }
                guard missing.isEmpty else {
                    throw CLIError("missing topics: \(missing.joined(separator: ", ")) (run: attendancectl topics ensure)")
                }
                return "\(kafka.bootstrapServers), \(Topic.allCases.count) platform topics present"
            }
            await record("round trip") {
                // As many replicas as the platform's topics: a cluster whose brokers require two in-sync
                // replicas refuses an acks=all produce to a topic of one.
                let replicas =
                    try replicationFactor
                    ?? Int32(EnvironmentReader(options.environment).int("TOPIC_REPLICATION_FACTOR", default: 1, in: 1...10))
                return try await DoctorChecks.roundTrip(kafka: kafka, replicationFactor: replicas, logger: logger)
            }
            // Settings that cannot be read are this row's failure: the rows above are still printed.
            await record("postgres") {
                try await DoctorChecks.postgresVersion(try options.postgres(), logger: logger)
            }
            Output.print(rows: rows, headers: ["CHECK", "STATUS", "DETAIL", "TIME"], json: options.json)
            if failed { throw ExitCode(1) }
        }
    }
}

enum DoctorChecks {
    /// A diagnostic topic of the CLI's own, outside the platform's topics, so probes never reach
    /// operators' dead-letter queue. (Releases before made `attendancectl.doctor` with one replica,
    /// which a cluster requiring two in-sync replicas refuses to write; an existing topic is not changed,
    /// so the probe has a name of its own. The old topic can be deleted.)
    static let probeTopic = "attendancectl.doctor-probe"

    /// Produces a protocol-encoded record with the idempotent producer and reads it back by offset:
    /// proves produce, delivery report, fetch and the codec on the live broker.
    static func roundTrip(kafka: KafkaConfiguration, replicationFactor: Int32 = 1, logger: Logger) async throws -> String {
        let admin = try KafkaAdmin(configuration: kafka, logger: logger)
        try await admin.createTopics([
            KafkaTopicSpec(name: probeTopic, partitions: 1, replicationFactor: replicationFactor, config: ["retention.ms": "3600000"])
        ])
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
        let running = Task { try await producer.run() }
        let probe = DeadLetter(
            sourceTopic: probeTopic, partition: 0, offset: 0, key: "doctor",
            payload: Data(UUID().uuidString.utf8), reason: .unrecognized("doctor_probe"), detail: "attendancectl doctor",
            consumer: "attendancectl", failedAt: Date()
        )
        let report: KafkaDeliveryReport
        do {
            report = try await producer.send(
                KafkaOutgoingMessage(topic: probeTopic, key: "doctor", value: try ProtocolCodec.wire.encode(probe)))
        } catch {
            producer.beginShutdown()
            _ = try? await running.value
            throw error
        }
        producer.beginShutdown()
        try await running.value

        let reader = KafkaPartitionReader(configuration: kafka, logger: logger)
        let messages = try await reader.read(TopicPartition(topic: report.topic, partition: report.partition), from: report.offset)
        guard let message = messages.first else {
            throw CLIError("nothing to read back at \(report.topic)[\(report.partition)]@\(report.offset)")
        }
        let decoded = try ProtocolCodec.wire.decode(DeadLetter.self, from: message.value ?? [])
        guard decoded.payload == probe.payload else {
            throw CLIError("read back a different record at \(report.topic)[\(report.partition)]@\(report.offset)")
        }
        return "produced and read back \(report.topic)[\(report.partition)]@\(report.offset)"
    }

    static func postgresVersion(_ settings: PostgresConfiguration, logger: Logger) async throws -> String {
        try await PostgresAccess.withClient(settings, what: "reading the version", logger: logger, timeout: .seconds(10)) { client in
            let rows = try await client.query("SHOW server_version", logger: logger)
            for try await version in rows.decode(String.self) {
                return "\(settings.host):\(settings.port)/\(settings.database), PostgreSQL \(version)"
            }
            throw CLIError("no answer")
        }
    }
}

/// A failure the operator reads: one line, no stack trace.
package struct CLIError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }

    static func wrap<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw CLIError("\(what): \(error)") }
    }
}

enum Output {
    static func print(rows: [[String]], headers: [String], json: Bool) {
        if json {
            let objects = rows.map { row in Dictionary(uniqueKeysWithValues: zip(headers.map { $0.lowercased() }, row)) }
            let data = try! JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys])
            CLIContext.current.out(String(decoding: data, as: UTF8.self))
            return
        }
        CLIContext.current.out(TableFormatter.render(headers: headers, rows: rows))
    }

    static func millis(since start: ContinuousClock.Instant) -> String {
        "\(start.duration(to: .now).milliseconds) ms"
    }
}
