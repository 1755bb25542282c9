import AsyncHTTPClient
import FleetSimulatorCore
import Foundation
import Logging
import NIOHTTP1
import PostgresNIO
import PresenceKit
import RegistryClient
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

/// A fleet run against the real services (deploy/local/services.sh) in real time: enrollment
/// through the registry, every phone an actor talking HTTP to the gateway (attendance events and its
/// telemetry) on the wall clock, so every timestamp a phone sends is when it decided and every
/// latency the servers measure is what the pipeline took; then the proof in PostgreSQL (every event
/// a phone wrote to its outbox is in `merger.events` exactly once) and the telemetry aggregator's
/// SLO for the run's sites beside the run's own.
package struct StackRun {
    package struct Settings: Sendable {
        package var gateway = "http://127.0.0.1:8080"
        /// The telemetry aggregator whose `/v1/slo` the report compares with (nil: not asked).
        package var telemetry: String? = "http://127.0.0.1:8084"
        /// How long to wait for the aggregator to have counted every event of the run.
        package var telemetryWait: Duration = .seconds(60)
        package var outboxDirectory: String
        /// The beacon registry the fleet enrolls through.
        package var registry = RegistryClient.defaultURL
        /// The admin API key's file when `ATTENDANCE_API_KEY` is not set (`EnrolledFleet.adminKey`).
        package var apiKeyFile: String?
        package var showProgress = true
        package var requestTimeoutSeconds: Int64 = 4
        /// A remote-config document set as every fleet site's detection settings through the registry
        /// (`--config`); nil leaves the sites without one, so the phones keep the library's defaults.
        package var siteDetectionDocument: Data?

        package init(outboxDirectory: String) { self.outboxDirectory = outboxDirectory }
    }

    package let options: FleetOptions
    package let settings: Settings
    let logger: Logger

    package init(options: FleetOptions, settings: Settings) {
        self.options = options
        self.settings = settings
        var logger = Logger(label: "fleet-simulator")
        logger.logLevel = .warning
        self.logger = logger
    }

    package func run() async throws -> FleetReport {
        let apiKey = try EnrolledFleet.adminKey(keyFile: settings.apiKeyFile)
        let postgres = try PostgresConfiguration.load(from: EnvironmentReader()).makeClient(logger: logger)
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
                let registry = try RegistryClient(
                    baseURL: settings.registry, apiKey: apiKey, transport: HTTPRegistryTransport(userAgent: "fleet-simulator", client: http)
                )
                return try await runFleet(postgres: postgres, http: http, registry: registry)
            }
            try await http.shutdown()
            return report
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private func runFleet(postgres: PostgresClient, http: HTTPClient, registry: RegistryClient) async throws -> FleetReport {
        let progress = ProgressLine(enabled: settings.showProgress)
        var options = self.options
        var plan = FleetPlan(options: options)

        progress.message("enrolling \(plan.devicePeople.count) devices on \(plan.world.sites.count) site(s) through the registry…")
        let fleet = try await EnrolledFleet.enroll(plan: plan, registry: registry) { done, total in
            progress.update(fraction: Double(done) / Double(max(total, 1)), label: "enrolled \(done)/\(total)")
        }
        try await EnrolledFleet.waitUntilPublished(fleet, registry: registry)
        if let document = settings.siteDetectionDocument {
            try await fleet.setDetectionSettings(document, registry: registry)
        }
        // Each phone knows its sites as it fetched them with its own token; a site's detection settings
        // are in force while the phone is at that site.
        let served = try await fleet.servedConfigurations(registry: registry) { options.presenceConfig(detection: $0) }
        progress.finish()
        // Real time: the simulation starts now. A rush starts wherever the clock is; working days are
        // laid out from today's midnight (UTC) and the run starts at the current time of day.
        options.setRealTimeStart(nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        plan = FleetPlan(options: options)
        plan.world = fleet.world
        // Operators look the run up afterwards (sessions, daily attendance) by these ids.
        print("enrolled \(fleet.devices.count) devices on sites \(fleet.world.sites.map(\.id).joined(separator: ", "))")

        try FileManager.default.createDirectory(atPath: settings.outboxDirectory, withIntermediateDirectories: true)
        let clock = VirtualClock(virtualStart: options.simulationStart, scale: 1)
        var delivery = GatewayDelivery(
            http: http, gateway: settings.gateway,
            tokens: Dictionary(fleet.devices.map { ($0.deviceId, $0.token) }, uniquingKeysWith: { a, _ in a }),
            clock: clock)
        delivery.requestTimeout = .seconds(settings.requestTimeoutSeconds)
        // On each background wake a phone asks for its configuration again (304 while nothing changed).
        let runOptions = options
        delivery.configurationRefresh = ConfigurationRefresh(
            registry: registry, tokens: delivery.tokens, tags: served.eTags, adjust: { runOptions.presenceConfig(detection: $0) })
        let byPerson = Dictionary(fleet.devices.map { ($0.person, $0) }, uniquingKeysWith: { a, _ in a })
        let phones: [SimulatedPhone] = plan.devicePeople.compactMap { person in
            guard let enrolled = byPerson[person.index], let directory = served.directories[person.index] else { return nil }
            if let refused = directory.refusedSettings.first {
                print("warning: the phone of person \(person.index) refused the settings of site \(refused.key): \(refused.value)")
            }
            let config = options.presenceConfig
            let path = "\(settings.outboxDirectory)/\(enrolled.deviceId).wal"
            try? FileManager.default.removeItem(atPath: path)
            return SimulatedPhone(
                simulation: DeviceSimulation(
                    person: person, world: plan.world, profile: plan.profiles[person.index] ?? PhoneProfile(),
                    identity: DeviceIdentity(userId: enrolled.userId, deviceId: enrolled.deviceId), config: config,
                    directory: directory, outboxPath: path, start: options.simulationStart, end: options.simulationEnd,
                    seed: options.seed))
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
                progress.update(
                    fraction: fraction, label: "\(Timestamp(millisecondsSinceEpoch: v).iso8601)  devices finished \(done)/\(total)")
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        // A phone that fails ends the run: the progress line must not keep drawing over what follows.
        defer { ticker.cancel() }
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
        var report = FleetReport(
            parameters: .init(mode: "real-stack", plan: plan, gateway: settings.gateway),
            plan: plan, devices: results, delivery: delivery2, throughput: throughput)
        report.parameters.detectionSettingsVersion = served.version
        if let telemetry = settings.telemetry {
            progress.message("asking the telemetry aggregator for the run's SLO…")
            let server = TelemetrySLOReader(http: http, baseURL: telemetry)
            do {
                let bySite = try await server.waitForCounts(
                    sites: plan.world.sites.map(\.id), expectedTotal: Int64(delivery2.eventsPosted), timeout: settings.telemetryWait)
                let good = bySite.values.reduce(0) { $0 + $1.good }, all = bySite.values.reduce(0) { $0 + $1.total }
                report.compare(withServer: .init(source: "\(telemetry)/v1/slo, 30d", good: good, total: all), bySite: bySite)
            } catch {
                print("warning: the telemetry aggregator did not answer (\(error)); the report has no status-page SLO to compare with")
            }
        }
        return report
    }
}

/// Reads the telemetry aggregator's SLO counts for sites (`GET /v1/slo?site=`, the 30-day window).
struct TelemetrySLOReader {
    let http: HTTPClient
    let baseURL: String

    private struct Body: Decodable {
        struct SLO: Decodable {
            struct Window: Decodable {
                var window: String
                var good: Int64
                var total: Int64
            }
            var windows: [Window]
        }
        var slo: SLO
    }

    func counts(site: String) async throws -> (good: Int64, total: Int64) {
        var components = URLComponents(string: baseURL + "/v1/slo")
        components?.queryItems = [URLQueryItem(name: "site", value: site)]
        guard let url = components?.string else { throw TelemetrySLOError("cannot build the /v1/slo address from \(baseURL)") }
        let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw TelemetrySLOError("GET \(url): HTTP \(response.status.code)") }
        let body = try JSONDecoder().decode(Body.self, from: Data(bytes.readableBytesView))
        guard let window = body.slo.windows.first(where: { $0.window == "30d" }) else {
            throw TelemetrySLOError("GET \(url): no 30d window")
        }
        return (window.good, window.total)
    }

    /// Polls until the sites' events add up to `expectedTotal` (the aggregator consumes them
    /// asynchronously) or `timeout` passes; returns the last counts either way.
    func waitForCounts(sites: [String], expectedTotal: Int64, timeout: Duration) async throws -> [String: (good: Int64, total: Int64)] {
        let deadline = ContinuousClock.now + timeout
        while true {
            var bySite: [String: (good: Int64, total: Int64)] = [:]
            for site in sites { bySite[site] = try await counts(site: site) }
            if bySite.values.reduce(0, { $0 + $1.total }) >= expectedTotal || ContinuousClock.now >= deadline { return bySite }
            try await Task.sleep(for: .seconds(1))
        }
    }
}

struct TelemetrySLOError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The server's side of the no-loss figures: the merger's rows of the run's users (in the schema
/// `MERGER_SCHEMA` names, as the merger reads it), and its sessions' counts against them.
package enum ServerCheck {
    package static func verify(devices: [DeviceResult], postgres: PostgresClient, logger: Logger) async throws -> FleetReport.Delivery {
        let schema = try EnvironmentReader().schemaName("MERGER_SCHEMA", default: "merger")
        let users = devices.map(\.userId)
        let rows = try await postgres.query(
            "SELECT idempotency_key, server_receipt_id FROM \(unescaped: schema).events WHERE user_id = ANY(\(users))", logger: logger)
        var keys: [String: Int] = [:]
        var receipts: [String: Int] = [:]
        for try await (key, receipt) in rows.decode((String, String).self) {
            keys[key, default: 0] += 1
            receipts[receipt, default: 0] += 1
        }
        var delivery = FleetReport.Delivery(
            devices: devices, serverKeys: keys, duplicateReceipts: receipts.values.map { $0 - 1 }.reduce(0, +))
        let miscounted = try await postgres.query(
            """
            SELECT count(*)::int FROM \(unescaped: schema).sessions s
            WHERE s.user_id = ANY(\(users)) AND s.superseded_by IS NULL
              AND s.event_count <> (SELECT count(*) FROM \(unescaped: schema).events e WHERE e.session_id = s.session_id AND e.outcome = 'accepted')
            """, logger: logger)
        for try await count in miscounted.decode(Int.self) { delivery.sessionsMiscounted = count }
        let outside = try await postgres.query(
            """
            SELECT count(*)::int FROM \(unescaped: schema).events e
            WHERE e.user_id = ANY(\(users)) AND e.outcome = 'accepted'
              AND CASE WHEN e.session_id IS NULL THEN e.event_type <> 'heartbeat'
                  ELSE NOT EXISTS (
                      SELECT 1 FROM \(unescaped: schema).sessions s WHERE s.session_id = e.session_id AND s.superseded_by IS NULL)
                  END
            """, logger: logger)
        for try await count in outside.decode(Int.self) { delivery.eventsOutsideLiveSessions = count }
        return delivery
    }
}

/// Process memory from /proc (Linux).
package enum MemoryProbe {
    package static func peakResidentBytes() -> Int64 { value(of: "VmHWM:") }
    package static func residentBytes() -> Int64 { value(of: "VmRSS:") }

    static func value(of field: String) -> Int64 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            let number = line.dropFirst(field.count).trimmingCharacters(in: .whitespaces).split(separator: " ").first
            return (number.flatMap { Int64($0) } ?? 0) * 1024
        }
        return 0
    }
}
