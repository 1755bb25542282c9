import AccessControl
import AsyncHTTPClient
import FleetSimulatorCore
import Foundation
import Logging
import PostgresNIO
import PresenceKit
import ServiceRuntime
import Synchronization

/// One simulated phone: PresenceKit, its outbox on disk and its HTTP client, in an actor of its own.
actor SimulatedPhone {
    private var simulation: DeviceSimulation
    private(set) var result: DeviceResult?

    init(simulation: DeviceSimulation) { self.simulation = simulation }

    func run(delivery: some DeliveryDriver, pacer: (any VirtualPacer)?) async throws -> DeviceResult {
        var copy = simulation
        let outcome = try await copy.run(delivery: delivery, pacer: pacer)
        simulation = copy
        result = outcome
        return outcome
    }
}

/// Live counters for the progress line.
final class RunCounters: Sendable {
    let devicesDone = Atomic<Int>(0)
}

/// A fleet run against the real services (deploy/local/services.sh): enrollment through the
/// registry, every phone an actor talking HTTP to the gateway with virtual time paced against the
/// wall clock, then the proof in PostgreSQL: every event a phone wrote to its outbox is in
/// `merger.events` exactly once.
public struct StackRun {
    public struct Settings: Sendable {
        public var gateway = "http://127.0.0.1:8080"
        public var timeScale = 60.0
        public var outboxDirectory: String
        public var tokenKeysFile: String?
        public var showProgress = true
        public var requestTimeoutSeconds: Int64 = 4

        public init(outboxDirectory: String) { self.outboxDirectory = outboxDirectory }
    }

    public let options: FleetOptions
    public let settings: Settings
    let logger: Logger

    public init(options: FleetOptions, settings: Settings) {
        self.options = options
        self.settings = settings
        var logger = Logger(label: "fleet-simulator")
        logger.logLevel = .warning
        self.logger = logger
    }

    public func run() async throws -> FleetReport {
        let signer = try EnrolledFleet.signer(keysFile: settings.tokenKeysFile)
        let postgres = try PostgresSettings.load(from: EnvironmentReader()).makeClient(logger: logger)
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)))
        do {
            let report = try await withThrowingTaskGroup(of: FleetReport?.self) { group in
                group.addTask {
                    await postgres.run()
                    return nil
                }
                defer { group.cancelAll() }
                return try await runFleet(postgres: postgres, http: http, signer: signer)
            }
            try await http.shutdown()
            return report
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private func runFleet(postgres: PostgresClient, http: HTTPClient, signer: DeviceTokenSigner) async throws -> FleetReport {
        let progress = ProgressLine(enabled: settings.showProgress)
        // Virtual time ends about when the run does: the gateway sees every event in its recent past.
        var options = self.options
        let wallRunMs = Double(options.durationMs) / settings.timeScale
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        options.start = nowMs - options.durationMs - options.startOffsetMs + Int64(wallRunMs) - 5_000
        var plan = FleetPlan(options: options)

        progress.message("enrolling \(plan.devicePeople.count) devices on \(plan.world.sites.count) site(s) through the registry…")
        let fleet = try await EnrolledFleet.enroll(plan: plan, client: postgres, signer: signer, logger: logger) { done, total in
            progress.update(fraction: Double(done) / Double(max(total, 1)), label: "enrolled \(done)/\(total)")
        }
        try await EnrolledFleet.waitUntilPublished(client: postgres, logger: logger)
        progress.finish()
        plan.world = fleet.world
        // Operators look the run up afterwards (sessions, daily attendance) by these ids.
        print("enrolled \(fleet.devices.count) devices on sites \(fleet.world.sites.map(\.id).joined(separator: ", "))")

        try FileManager.default.createDirectory(atPath: settings.outboxDirectory, withIntermediateDirectories: true)
        let clock = VirtualClock(virtualStart: options.simulationStart, scale: settings.timeScale)
        var delivery = GatewayDelivery(
            http: http, gateway: settings.gateway, tokens: Dictionary(fleet.devices.map { ($0.deviceId, $0.token) }, uniquingKeysWith: { a, _ in a }),
            clock: clock)
        delivery.requestTimeout = .seconds(settings.requestTimeoutSeconds)
        let byPerson = Dictionary(fleet.devices.map { ($0.person, $0) }, uniquingKeysWith: { a, _ in a })
        let config = options.presenceConfig
        let phones: [SimulatedPhone] = plan.devicePeople.compactMap { person in
            guard let enrolled = byPerson[person.index] else { return nil }
            let path = "\(settings.outboxDirectory)/\(enrolled.deviceId).wal"
            try? FileManager.default.removeItem(atPath: path)
            return SimulatedPhone(simulation: DeviceSimulation(
                person: person, world: plan.world, profile: plan.profiles[person.index] ?? PhoneProfile(),
                identity: DeviceIdentity(userId: enrolled.userId, deviceId: enrolled.deviceId), config: config,
                outboxPath: path, start: options.simulationStart, end: options.simulationEnd, seed: options.seed))
        }

        let started = ContinuousClock.now
        let counters = RunCounters()
        let total = phones.count
        let virtualStart = options.simulationStart, virtualLength = options.durationMs
        let sender = delivery
        let ticker = Task {
            while !Task.isCancelled {
                let v = clock.virtualNow()
                let fraction = min(1, Double(v - virtualStart) / Double(max(virtualLength, 1)))
                let done = counters.devicesDone.load(ordering: .relaxed)
                progress.update(fraction: fraction, label: "virtual \(Timestamp(millisecondsSinceEpoch: v).iso8601)  devices finished \(done)/\(total)")
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        let results = try await withThrowingTaskGroup(of: DeviceResult.self) { group in
            for phone in phones {
                group.addTask {
                    let r = try await phone.run(delivery: sender, pacer: clock)
                    counters.devicesDone.add(1, ordering: .relaxed)
                    return r
                }
            }
            var all: [DeviceResult] = []
            for try await r in group { all.append(r) }
            return all.sorted { $0.person < $1.person }
        }
        ticker.cancel()
        progress.finish()
        let wall = ContinuousClock.now - started
        let wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18

        progress.message("checking merger.events in PostgreSQL…")
        let delivery2 = try await ServerCheck.verify(devices: results, postgres: postgres, logger: logger)
        var throughput = FleetReport.Throughput()
        throughput.wallSeconds = wallSeconds
        throughput.virtualSeconds = Double(options.durationMs) / 1000
        let accepted = delivery2.finalStatuses["201", default: 0] + delivery2.finalStatuses["200", default: 0]
        throughput.eventsPerWallSecond = Double(accepted) / max(wallSeconds, 0.001)
        throughput.deviceDaysPerWallSecond = Double(total) * Double(options.durationMs) / 86_400_000 / max(wallSeconds, 0.001)
        throughput.wallLatencyMs = Percentiles(results.flatMap { $0.deliveries.compactMap(\.wallLatencyMs) })
        throughput.peakResidentBytes = MemoryProbe.peakResidentBytes()
        throughput.residentBytesPerDevice = Double(throughput.peakResidentBytes) / Double(max(total, 1))
        throughput.maxOutboxFileBytes = results.map(\.outboxBytes).max() ?? 0
        return FleetReport(
            parameters: .init(mode: "real-stack", devices: total, visitors: plan.people.count - plan.devicePeople.count, sites: plan.world.sites.count,
                              durationHours: Double(options.durationMs) / 3_600_000, seed: options.seed, timeScale: settings.timeScale, gateway: settings.gateway),
            plan: plan, devices: results, delivery: delivery2, throughput: throughput)
    }
}

/// The server's side of the no-loss figures.
public enum ServerCheck {
    public static func verify(devices: [DeviceResult], postgres: PostgresClient, logger: Logger) async throws -> FleetReport.Delivery {
        var d = FleetReport.Delivery()
        var posted = Set<String>()
        for device in devices {
            d.eventsPosted += device.posted.count
            d.undeliveredAtEnd += device.undelivered
            d.launches += device.launches
            for event in device.posted { posted.insert(event.key) }
            for record in device.deliveries {
                d.eventsWithFinalVerdict += 1
                d.finalStatuses[String(record.status), default: 0] += 1
            }
            for (k, v) in device.attempts.statuses { d.attemptStatuses[k, default: 0] += v }
        }
        let users = devices.map(\.userId)
        let rows = try await postgres.query(
            "SELECT idempotency_key, server_receipt_id FROM merger.events WHERE user_id = ANY(\(users))", logger: logger)
        var keys: [String: Int] = [:]
        var receipts: [String: Int] = [:]
        for try await (key, receipt) in rows.decode((String, String).self) {
            keys[key, default: 0] += 1
            receipts[receipt, default: 0] += 1
        }
        d.serverEvents = keys.values.reduce(0, +)
        d.lost = posted.filter { keys[$0] == nil }.count
        d.unexpected = keys.keys.filter { !posted.contains($0) }.count
        d.duplicated = keys.values.map { $0 - 1 }.reduce(0, +) + receipts.values.map { $0 - 1 }.reduce(0, +)
        return d
    }
}

/// Process memory from /proc (Linux).
public enum MemoryProbe {
    public static func peakResidentBytes() -> Int64 { value(of: "VmHWM:") }
    public static func residentBytes() -> Int64 { value(of: "VmRSS:") }

    static func value(of field: String) -> Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            let number = line.dropFirst(field.count).trimmingCharacters(in: .whitespaces).split(separator: " ").first
            return (number.flatMap { Int64($0) } ?? 0) * 1024
        }
        return 0
    }
}
