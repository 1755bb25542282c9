import AccessControl
import ArgumentParser
import AsyncHTTPClient
import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import ServiceRuntime

/// Load for the running pipeline (deploy/local/services.sh): enrolls devices through the registry,
/// sends a steady load of keyed events under the no-loss contract, and proves that PostgreSQL holds
/// exactly what the clients sent. `deploy/local/crash-test.sh` runs it while killing services.
struct PipelineLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline-load",
        abstract: "Load the running pipeline under the no-loss contract.",
        subcommands: [Verify.self, Bench.self, BareEndpoint.self],
        defaultSubcommand: Verify.self
    )
}

/// A steady keyed load, then the proof in PostgreSQL (the crash test's client).
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send keyed attendance events to the gateway under the no-loss contract and verify PostgreSQL."
    )

    @Option(
        help:
            "Gateway base URL; a comma-separated list spreads the devices over several gateways (each device has a home gateway and fails over to the next)."
    )
    var gateway = "http://127.0.0.1:8080"
    @Option(help: "Enrolled devices sending in parallel.") var devices = 50
    @Option(help: "Events per second, all devices together.") var rate = 100.0
    @Option(help: "Seconds of sending.") var duration = 60
    @Option(help: "Seconds to keep retrying unfinished events after sending stops.") var drainTimeout = 180
    @Option(help: "Per-request timeout in seconds.") var requestTimeout = 10
    @Option(help: "Write the JSON report here too.") var report: String?
    @Option(help: "Create this file when the devices are enrolled and sending starts (the crash test times its faults from it).")
    var startedFile: String?

    func run() async throws {
        guard devices > 0, rate > 0, duration > 0 else { throw ValidationError("--devices, --rate and --duration must be positive") }
        var logger = Logger(label: "pipeline-load")
        logger.logLevel = .warning
        let gateways = gateway.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !gateways.isEmpty else { throw ValidationError("--gateway names no gateway") }
        // A connection per device at most, as phones have: fewer, and a slow verdict (a request holds its
        // connection for the verdict wait) queues requests in this client until they time out here.
        try await EnrolledLoad.run(devices: devices, connectionsPerGateway: max(64, devices), applicationName: nil, logger: logger) {
            fleet, http, postgres in
            print("sending \(rate) events/s for \(duration) s to \(gateways.joined(separator: ", "))…")
            if let startedFile { try Data().write(to: URL(fileURLWithPath: startedFile)) }
            let run = LoadRun(
                options: .init(
                    gateways: gateways, devices: devices, rate: rate, duration: .seconds(duration),
                    drainTimeout: .seconds(drainTimeout), requestTimeout: .seconds(requestTimeout)
                ),
                fleet: fleet,
                client: ContractClient(http: http, gateways: gateways, requestTimeout: .seconds(Int64(requestTimeout))),
                postgres: postgres, logger: logger
            )
            let result = try await run.run()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let json = String(decoding: try encoder.encode(result), as: UTF8.self)
            print(json)
            if let report { try json.write(toFile: report, atomically: true, encoding: .utf8) }
            print(
                "sent \(result.sent), in PostgreSQL \(result.inDatabase), lost \(result.lost), unexpected \(result.unexpected), "
                    + "duplicated receipts \(result.duplicatedReceipts), outcome mismatches \(result.outcomeMismatches), unfinished \(result.unfinished), "
                    + "answered other than 201/200 \(result.notAccepted), keys sent twice \(result.sentTwice), "
                    + "users whose sessions differ from their events \(result.sessionMismatches) of \(result.usersChecked)")
            for (name, figures) in result.gateways.sorted(by: { $0.key < $1.key }) {
                print(
                    "gateway \(name): \(figures.devicesHomed) devices, \(figures.eventsAsked) events asked first, "
                        + "\(figures.acceptedOnFirstAttempt) accepted on the first attempt, \(figures.finalAnswers) final answers given"
                )
            }
            let silentGateways = result.gateways.values.filter { $0.acceptedOnFirstAttempt == 0 }.count
            if result.lost + result.unexpected + result.duplicatedReceipts + result.outcomeMismatches + result.unfinished
                + result.notAccepted + result.sentTwice + result.sessionMismatches + silentGateways > 0 || result.sent == 0
            {
                throw ExitCode(1)
            }
        }
    }
}

/// The end-to-end benchmark with its ceilings (see PipelineBench).
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Measure the pipeline end to end beside a bare HTTP ceiling and pgbench.")

    @Option(help: "Gateway base URL.") var gateway = "http://127.0.0.1:8080"
    // 256 clients keep both cores busy (64 left a fifth of them idle, the closed loop bound by its own round
    // trips rather than by the pipeline): the end-to-end figure is a saturation figure, and half load half of it.
    @Option(help: "Enrolled devices (one per client).") var devices = 256
    @Option(help: "Concurrent clients in the closed loops.") var concurrency = 256
    @Option(help: "Seconds per phase.") var seconds = 20
    @Option(help: "Rows per pgbench transaction (default: the merger's largest batch, MERGER_MAX_BATCH or its default 2000).")
    var mergerBatch = Int(ProcessInfo.processInfo.environment["MERGER_MAX_BATCH"] ?? "") ?? 2_000
    @Option(help: "Vetted events for the merger-alone phase (fewer than 60,000 last a few seconds: noisy).") var mergerEvents = 60_000
    @Option(help: "Phases to run, comma-separated: bare, e2e, half, pgbench, merger.") var phases = "bare,e2e,half,pgbench,merger"
    @Option(help: "Events/s of the half-load phase (default: half the closed loop's rate).") var halfRate: Double?

    func parsedPhases() throws -> Set<PipelineBench.Phase> {
        var set = Set<PipelineBench.Phase>()
        for name in phases.split(separator: ",") {
            guard let phase = PipelineBench.Phase(rawValue: name.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("--phases: unknown phase \"\(name)\"; use bare, e2e, half, pgbench, merger")
            }
            set.insert(phase)
        }
        guard !set.isEmpty else { throw ValidationError("--phases names no phase") }
        return set
    }

    func run() async throws {
        var logger = Logger(label: "pipeline-bench")
        logger.logLevel = .warning
        let brokers = EnvironmentReader().string("KAFKA_BROKERS", default: "127.0.0.1:19092")
        let phases = try parsedPhases()
        // Its own backends' CPU is not counted as the merger's or pgbench's (`PostgresCPU`).
        try await EnrolledLoad.run(
            devices: devices, connectionsPerGateway: concurrency, applicationName: "pipeline-bench", logger: logger
        ) { fleet, http, postgres in
            let bench = PipelineBench(
                options: .init(
                    gateway: gateway, concurrency: concurrency, seconds: seconds, mergerBatch: mergerBatch, mergerEvents: mergerEvents,
                    brokers: brokers, phases: phases, halfRate: halfRate),
                fleet: fleet, http: http, postgres: postgres, logger: logger
            )
            try await bench.run()
        }
    }
}

/// What both subcommands start from: the registry's PostgreSQL (its search path) and an HTTP client
/// with `connectionsPerGateway` connections per gateway, `devices` enrolled through the registry and
/// published on its feed; then `body`. The client is shut down whatever `body` does.
enum EnrolledLoad {
    static func run(
        devices: Int, connectionsPerGateway: Int, applicationName: String?, logger: Logger,
        _ body: (LoadFleet, HTTPClient, PostgresClient) async throws -> Void
    ) async throws {
        let env = EnvironmentReader()
        let signer = try DeviceTokenSigner.load(from: env)
        var settings = try PostgresConfiguration.load(from: env)
        settings.searchPath = try RegistrySchema.searchPath(from: env)
        if let applicationName { settings.applicationName = applicationName }
        let postgres = settings.makeClient(logger: logger)
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerGateway)))
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await postgres.run() }
                defer { group.cancelAll() }
                print("enrolling \(devices) devices through the registry…")
                let fleet = try await LoadFleet.enroll(devices: devices, client: postgres, signer: signer, logger: logger)
                try await LoadFleet.waitUntilPublished(client: postgres, logger: logger)
                try await body(fleet, http, postgres)
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }
}

// The root only dispatches: parse, then run the chosen subcommand (ArgumentParser's async `main()`
// refuses a root without an availability annotation on Linux).
do {
    var command = try PipelineLoad.parseAsRoot()
    switch command {
    case let verify as Verify: try await verify.run()
    case let bench as Bench: try await bench.run()
    case let bare as BareEndpoint: try await bare.run()
    default: try command.run()
    }
} catch {
    PipelineLoad.exit(withError: error)
}

/// The pipeline benchmark's first ceiling, in a process of its own: a bare Hummingbird endpoint that
/// decodes the event JSON and answers 201, on a free loopback port. `bench` starts it; its first line
/// is `port N`.
struct BareEndpoint: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bare-endpoint", abstract: "Serve the benchmark's bare decoding endpoint (started by bench).", shouldDisplay: false)

    func run() async throws {
        let router = Router()
        router.post("/v1/attendance/events") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 64 * 1_024)
            let event = try ProtocolCodec.wire.decode(AttendanceEvent.self, from: body.readableBytesView)
            return Response(
                status: .created, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{\"serverReceiptId\":\"\(event.idempotencyKey.prefix(8))\"}")))
        }
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                FileHandle.standardOutput.write(Data("port \(channel.localAddress?.port ?? 0)\n".utf8))
            },
            logger: Logger(label: "bare-endpoint", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        try await app.runService()
    }
}
