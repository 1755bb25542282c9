import ArgumentParser
import FleetSimulatorCore
import Foundation
import PresenceKit

/// `fleet-simulator run | scenario | sweep | replay`.
package struct FleetSimulatorCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "fleet-simulator",
        abstract: "Simulated phones running PresenceKit in a simulated world, against the real stack or on their own.",
        subcommands: [RunCommand.self, ScenarioCommand.self, SweepCommand.self, ReplayCommand.self]
    )

    package init() {}

    /// Parses and runs (the executable's whole `main`).
    package static func main(arguments: [String]) async {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            exit(withError: error)
        }
        do {
            switch command {
            case let run as RunCommand: try await run.run()
            case let scenario as ScenarioCommand: try await scenario.run()
            case let sweep as SweepCommand: try await sweep.run()
            case let replay as ReplayCommand: try replay.run()
            default: try command.run()
            }
        } catch let error as ValidationError {
            // Found while running (a file's content, the report folder): one line, without the usage.
            exit(withError: RunFailure(description: error.message))
        } catch {
            exit(withError: error)
        }
    }
}

/// A failure found after the arguments parsed: `Error: <description>`, exit 1.
struct RunFailure: Error, CustomStringConvertible {
    var description: String
}

/// The folder a command writes its reports to, made (and checked writable) before anything runs, so an
/// unwritable one costs nothing but its error line.
package enum ReportDirectory {
    package static func prepare(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw ValidationError("--report-dir \(path) cannot be made: \(error.localizedDescription)")
        }
        guard FileManager.default.isWritableFile(atPath: path) else {
            throw ValidationError("--report-dir \(path) cannot be written to")
        }
    }
}

/// "90s", "15m", "24h", "3d" or plain seconds, as milliseconds.
package enum DurationText {
    package static func milliseconds(_ text: String) -> Int64? {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let unit = t.last else { return nil }
        let factor: Double
        var number = String(t.dropLast())
        switch unit {
        case "s": factor = 1_000
        case "m": factor = 60_000
        case "h": factor = 3_600_000
        case "d": factor = 86_400_000
        default:
            factor = 1_000
            number = t
        }
        guard let value = Double(number), value > 0, value.isFinite, value * factor < 1e15, value * factor >= 1 else { return nil }
        return Int64(value * factor)
    }

    /// "10s-40s", "6m-7m" or one duration ("30s": exactly that long), as milliseconds, low first.
    package static func range(_ text: String) -> ClosedRange<Int64>? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), let low = milliseconds(parts[0]), let high = milliseconds(parts.last ?? ""), low <= high else {
            return nil
        }
        return low...high
    }
}

package struct RunCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a fleet: against the running services in real time (default) or detection only (--detection-only).",
        discussion: """
            Against the stack a run is real time: phones stamp events when they decide, on the same clock as the servers, so \
            every latency and the SLO mean what they say. The world is compressed instead of the clock: the default schedule \
            is a morning rush, every person arriving within the run. Detection-only runs simulate virtual time as fast as the \
            machine goes (working days by default). Writes <report-dir>/fleet-report.json and .html and prints the headline \
            figures. Against the stack, exits 1 when an event was lost, duplicated or left undelivered.
            """
    )

    // The defaults are `make run`'s demo: 300 phones on 2 sites, a 90-second morning rush in real time.
    @Option(help: "Simulated phones (people with an enrolled device).") package var devices = 300
    @Option(help: "Sites.") package var sites = 2
    @Option(help: "Gates (one beacon each) per site.") package var gates = 2
    @Option(help: "How long: 90s, 15m, 24h, 3d (default: 90s against the stack, 24h detection only).") package var duration: String?
    @Option(help: "rush (everyone arrives within the run; default against the stack) or days (working days; default detection only).")
    package var schedule: ScheduleKind?
    @Option(help: "Seed of every random choice.") package var seed: UInt64 = 1
    @Option(
        help: "Detection only, working days: hour of the first day the run starts at (arrivals around 8:00, lunch 12:00, leaving 17:30).")
    package var startHour = 0.0
    @Option(help: "Heartbeat interval while present, minutes (0 = off; default: PresenceKit's).") package var heartbeatMinutes: Double?
    @Option(
        help: "A remote-config JSON document for every phone's PresenceKit (default: the library's defaults; an unknown key is an error).")
    package var config: String?
    @Option(help: "Share of phones that lose the network once during the run (default: 0.03 in a rush, 0.05 over days).") package
        var offlineShare: Double?
    @Option(help: "How long a phone stays offline, a range like 10s-40s or 6m-7m (default: 10s-40s in a rush, 1h-72h over days).")
    package var offlineTime: String?
    @Flag(help: "Simulate detection only, against an in-process server (scale and detection figures).") package var detectionOnly = false
    @Flag(help: "No network or app troubles on any phone.") package var quietPhones = false
    @Option(help: "Gateway base URL.") package var gateway = "http://127.0.0.1:8080"
    @Option(help: "Telemetry aggregator base URL, whose /v1/slo the report compares with (\"none\": do not ask).")
    package var telemetry = "http://127.0.0.1:8084"
    @Option(help: "Directory for the JSON and HTML report (default reports/fleet-<time>).") package var reportDir: String?
    @Option(
        help:
            "Directory for the devices' outbox files (default a temporary directory, removed after a run; of a directory named here only the outboxes are removed)."
    ) package var outboxDir: String?
    @Option(help: "The beacon registry the fleet enrolls through (default: $REGISTRY_URL or http://127.0.0.1:8083).") package
        var registry: String?
    @Option(help: "Admin API key file when ATTENDANCE_API_KEY is not set (default $RUN_DIR/secrets/admin-api-key).") package var apiKeyFile:
        String?
    @Flag(help: "No progress bar.") package var noProgress = false

    package init() {}

    /// A detection-only run simulates each person's days up front: a year at most.
    static let maxDetectionOnlyDays: Int64 = 366

    package func validate() throws {
        guard (1...100_000).contains(devices) else { throw ValidationError("--devices must be between 1 and 100000, got \(devices)") }
        guard (1...1_000).contains(sites) else { throw ValidationError("--sites must be between 1 and 1000, got \(sites)") }
        guard (1...16).contains(gates) else { throw ValidationError("--gates must be between 1 and 16, got \(gates)") }
        if let duration, DurationText.milliseconds(duration) == nil {
            throw ValidationError("--duration \"\(duration)\" is not a duration like 90s, 15m, 24h or 3d")
        }
        let options = fleetOptions
        if !detectionOnly && options.durationMs > 6 * 86_400_000 {
            throw ValidationError("--duration \(duration ?? "") is longer than 6 days: the gateway refuses events older than 7 days")
        }
        if detectionOnly && options.durationMs > Self.maxDetectionOnlyDays * 86_400_000 {
            throw ValidationError(
                "--duration \(duration ?? "") is longer than \(Self.maxDetectionOnlyDays) days, the longest detection-only run")
        }
        if quietPhones && (offlineShare != nil || offlineTime != nil) {
            throw ValidationError("--quiet-phones means no phone goes offline: leave out --offline-share and --offline-time")
        }
        if options.scheduleKind == .morningRush && options.durationMs < options.rush.minimumDurationMs {
            throw ValidationError(
                "--duration \(duration ?? "") is too short for a rush: at least \(options.rush.minimumDurationMs / 1000)s (arrivals start \(options.rush.leadMs / 1000)s in, the run goes on \(options.rush.tailMs / 1000)s after the last)"
            )
        }
        guard (0..<24).contains(startHour) else { throw ValidationError("--start-hour must be in 0..<24, got \(startHour)") }
        if startHour != 0 && (!detectionOnly || options.scheduleKind == .morningRush) {
            throw ValidationError(
                "--start-hour is for detection-only runs over working days: against the stack a run starts now, in real time")
        }
        if let heartbeatMinutes, !(heartbeatMinutes == 0 || (1...1_440).contains(heartbeatMinutes)) {
            throw ValidationError("--heartbeat-minutes must be 0 (off) or between 1 and 1440, got \(heartbeatMinutes)")
        }
        if let offlineShare, !(0...1).contains(offlineShare) {
            throw ValidationError("--offline-share must be between 0 and 1, got \(offlineShare)")
        }
        if let offlineTime, DurationText.range(offlineTime) == nil {
            throw ValidationError("--offline-time \"\(offlineTime)\" is not a range of durations like 10s-40s or 6m-7m")
        }
    }

    package var fleetOptions: FleetOptions {
        var o = FleetOptions()
        o.devices = devices
        o.sites = sites
        o.gatesPerSite = gates
        o.scheduleKind = schedule ?? (detectionOnly ? .workingDays : .morningRush)
        o.durationMs = duration.flatMap(DurationText.milliseconds) ?? (detectionOnly ? 86_400_000 : 90_000)
        o.startOffsetMs = Int64(startHour * 3_600_000)
        o.seed = seed
        o.heartbeatMinutes = heartbeatMinutes
        if o.scheduleKind == .morningRush { o.phones = .rush }
        if let offlineShare { o.phones.offline = offlineShare }
        if let range = offlineTime.flatMap(DurationText.range) {
            o.phones.offlineSeconds = Double(range.lowerBound) / 1000...Double(range.upperBound) / 1000
        }
        if quietPhones { o.phones = .quiet }
        return o
    }

    package func run() async throws {
        var options = fleetOptions
        options.detection = try ConfigFile.load(config)
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let reportDirectory = reportDir ?? "reports/fleet-\(stamp)"
        try ReportDirectory.prepare(reportDirectory)
        // Detection-only runs write tens of thousands of fsynced outbox records a second: on tmpfs when
        // there is one (same code path, memory-speed fsync); against the stack, on disk.
        let scratch = detectionOnly && FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let outboxDirectory = outboxDir ?? scratch + "fleet-outboxes-\(ProcessInfo.processInfo.processIdentifier)"
        let report: FleetReport
        if detectionOnly {
            report = try await Self.detectionOnly(options: options, outboxDirectory: outboxDirectory, progress: !noProgress)
        } else {
            var settings = StackRun.Settings(outboxDirectory: outboxDirectory)
            settings.gateway = gateway
            settings.telemetry = telemetry == "none" ? nil : telemetry
            settings.registry =
                registry ?? ProcessInfo.processInfo.environment["REGISTRY_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? settings.registry
            settings.apiKeyFile = apiKeyFile
            settings.showProgress = !noProgress
            settings.siteDetectionDocument = try config.map { try ConfigFile.document($0) }
            report = try await StackRun(options: options, settings: settings).run()
        }
        // The scratch folder this run made goes; a folder the user named keeps everything but the
        // phones' outboxes this run wrote there.
        if outboxDir == nil {
            try? FileManager.default.removeItem(atPath: outboxDirectory)
        } else {
            for file in (try? FileManager.default.contentsOfDirectory(atPath: outboxDirectory)) ?? [] where file.hasSuffix(".wal") {
                try? FileManager.default.removeItem(atPath: outboxDirectory + "/" + file)
            }
        }
        let paths = try report.write(to: reportDirectory)
        print(report.headline)
        print("report: \(paths.json)")
        print("report: \(paths.html)")
        if !detectionOnly {
            let d = report.delivery
            if d.failures > 0 || d.eventsPosted == 0 { throw ExitCode(1) }
        }
    }

    static func detectionOnly(options: FleetOptions, outboxDirectory: String, progress showProgress: Bool) async throws -> FleetReport {
        let plan = FleetPlan(options: options)
        let server = InProcessServer()
        let progress = ProgressLine(enabled: showProgress)
        let total = plan.devicePeople.count
        let done = DoneCounter()
        let baseline = MemoryProbe.residentBytes()
        let started = ContinuousClock.now
        let devices = try await DetectionRun(plan: plan, outboxDirectory: outboxDirectory).run(server: server) { n in
            let d = done.add(n)
            if d % max(1, total / 200) == 0 || d == total {
                progress.update(fraction: Double(d) / Double(max(total, 1)), label: "devices simulated \(d)/\(total)")
            }
        }
        progress.finish()
        let wall = ContinuousClock.now - started
        var throughput = FleetReport.Throughput()
        throughput.wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        throughput.virtualSeconds = Double(options.durationMs) / 1000
        let delivery = FleetReport.Delivery.inProcess(devices: devices, server: server)
        throughput.eventsPerWallSecond = Double(delivery.eventsWithFinalVerdict) / max(throughput.wallSeconds, 0.001)
        throughput.deviceDaysPerWallSecond = Double(total) * Double(options.durationMs) / 86_400_000 / max(throughput.wallSeconds, 0.001)
        throughput.peakResidentBytes = MemoryProbe.peakResidentBytes()
        throughput.residentBytesPerDevice = Double(max(0, throughput.peakResidentBytes - baseline)) / Double(max(total, 1))
        throughput.maxOutboxFileBytes = devices.map(\.outboxBytes).max() ?? 0
        return FleetReport(
            parameters: .init(mode: "detection-only", plan: plan), plan: plan, devices: devices, delivery: delivery, throughput: throughput)
    }
}

final class DoneCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add(_ n: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += n
        return value
    }
}

extension ScheduleKind: ExpressibleByArgument {}

package struct ScenarioCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "scenario",
        abstract: "Run a scenario of the QA matrix, or all of them, and check its expected outcome."
    )

    @Argument(help: "Scenario name, or \"all\" (see --list).") package var name = "all"
    @Flag(help: "List the scenarios.") package var list = false
    @Option(help: "Directory for one JSON and HTML report per scenario (default reports/scenarios).") package var reportDir =
        "reports/scenarios"
    @Option(
        help:
            "A remote-config JSON document for every phone instead of the library defaults (an unknown key is an error); a row's own settings still apply on top, and it still expects its targets."
    )
    package var config: String?

    package init() {}

    package func validate() throws {
        guard list || name == "all" || Scenario.named(name) != nil else {
            throw ValidationError("unknown scenario \"\(name)\"; one of: all, \(Scenario.all.map(\.name).joined(separator: ", "))")
        }
    }

    package func run() async throws {
        if list {
            for s in Scenario.all { print("\(s.name): \(s.summary)") }
            return
        }
        let chosen = name == "all" ? Scenario.all : [Scenario.named(name)!]
        let detection = try config.map { try ConfigFile.load($0) }
        try ReportDirectory.prepare(reportDir)
        let outboxes = ScratchDirectory.fast("fleet-scenarios")
        defer { try? FileManager.default.removeItem(atPath: outboxes) }
        var failed = 0
        for var scenario in chosen {
            if let detection { scenario.options.detection = detection }
            let outcome = try await scenario.run(outboxDirectory: outboxes)
            _ = try outcome.report.write(to: reportDir, name: scenario.name)
            let s = outcome.report.score
            let d = outcome.report.delivery
            // An empty ratio (no arrivals, no check-ins) prints as n/a, not as the 100 % it scores.
            func pct(_ v: Double, over count: Int) -> String { count > 0 ? String(format: "%.2f%%", v * 100) : "n/a" }
            print(
                "\(outcome.passed ? "PASS" : "FAIL") \(scenario.name): recall \(pct(s.checkInRecall, over: s.arrivals))"
                    + " precision \(pct(s.checkInPrecision, over: s.checkIns)) false check-outs \(s.falseCheckOuts)"
                    + " latency p50 \(s.detectionLatencySeconds.p50.map { String(format: "%.1fs", $0) } ?? "n/a")"
                    + " p99 \(s.detectionLatencySeconds.p99.map { String(format: "%.1fs", $0) } ?? "n/a")"
                    + " lost \(d.lost) duplicated \(d.duplicated)" + String(format: " (%.1f s)", outcome.report.throughput.wallSeconds))
            for f in outcome.failures { print("    \(f)") }
            if !outcome.passed { failed += 1 }
        }
        print("reports: \(reportDir)/<scenario>.json and .html")
        if failed > 0 { throw ExitCode(1) }
    }
}

package struct ReplayCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Feed a recorded trace (CSV, see README.md) through PresenceKit and print the check-ins and check-outs as JSON."
    )

    @Option(help: "The trace CSV file.") package var trace: String
    @Option(help: "A remote-config JSON document to tune the thresholds (PresenceKit RemoteConfig keys; an unknown key is an error).")
    package var config: String?
    @Option(help: "When the replay ends, epoch ms or ISO-8601 UTC: timers due until then fire (default: 10 minutes after the last line).")
    package var end: String?
    @Flag(help: "Feed every reading to the library, also while it is not scanning (a phone delivers readings only while it scans).")
    package var feedAllReadings = false

    package init() {}

    package func validate() throws {
        if let end, Trace.parseTime(end) == nil {
            throw ValidationError("--end \"\(end)\" is not epoch milliseconds or ISO-8601 UTC like 2026-01-05T18:00:00Z")
        }
    }

    package func run() throws {
        guard let text = try? String(contentsOfFile: trace, encoding: .utf8) else {
            throw ValidationError("cannot read the trace file \(trace)")
        }
        let presence = try ConfigFile.load(config)
        let parsed: Trace
        do {
            parsed = try Trace.parse(text)
        } catch {
            throw ValidationError("\(trace): \(error)")
        }
        let options = TraceReplay.Options(feedAllReadings: feedAllReadings, end: end.flatMap(Trace.parseTime))
        let output: TraceReplay.Output
        do {
            output = try TraceReplay.run(parsed, config: presence, options: options)
        } catch let error as TraceError {
            throw ValidationError("\(trace): \(error)")
        }
        print(try TraceReplay.json(output))
    }
}

/// A PresenceKit remote-config document given with `--config` (the library defaults without one).
enum ConfigFile {
    static func load(_ path: String?) throws -> PresenceConfig {
        guard let path else { return PresenceConfig() }
        do {
            return try RemoteConfig.decode(Array(try document(path))).presence
        } catch let error as ConfigValidationError {
            throw ValidationError("config \(path): \(error)")
        }
    }

    /// The document's bytes as written.
    static func document(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read the config file \(path)") }
        return data
    }
}

package struct SweepCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "sweep",
        abstract:
            "Run PresenceKit through many seeded worlds drawn from wide radio and people ranges, and report each figure per world class.",
        discussion: """
            Each world is one site on one working day: path-loss exponent 1.6-3.5, beacon calibration errors up to +-4 dB, phones \
            reading 6 dB hot to 8 dB cold, spatially correlated shadowing, Rician or Rayleigh fading, body blocking, 100-1,000 ms \
            advertising, 5-15 % packet loss, gates 4-12 m apart, desks 2-70 m from the gate (some in a shadow), walk-pasts 1-10 m \
            from a door, runners, cyclists, pavement stoppers, doorway breaks, lunch trips. Writes <report-dir>/sweep.json and \
            .html. Exits 1 when a target is missed.
            """
    )

    @Option(help: "Seeded worlds to run (classes take turns).") package var worlds = 200
    @Option(help: "People per world (employees, gate standers, people passing by).") package var people = 60
    @Option(help: "Seed of the sweep.") package var seed: UInt64 = 1
    @Option(help: "A remote-config JSON document to sweep instead of the library defaults (an unknown key is an error).")
    package var config: String?
    @Option(
        help:
            "A JSON document narrowing or widening the world's ranges, e.g. {\"phoneLossDb\": 0, \"beaconShadowCorrelation\": [0, 1]} (keys as in sweep.json's \"ranges\"; an unknown key is an error)."
    )
    package var ranges: String?
    @Option(help: "Directory for sweep.json and sweep.html.") package var reportDir = "reports/sweep"
    @Flag(help: "No progress bar.") package var noProgress = false

    package init() {}

    package func validate() throws {
        guard (1...100_000).contains(worlds) else { throw ValidationError("--worlds must be between 1 and 100000, got \(worlds)") }
        guard (1...10_000).contains(people) else { throw ValidationError("--people must be between 1 and 10000, got \(people)") }
    }

    package func run() async throws {
        var sweep = DetectionSweep(worlds: worlds, people: people, seed: seed)
        sweep.config = try ConfigFile.load(config)
        if let config { sweep.configurationName = config }
        if let ranges {
            guard let data = FileManager.default.contents(atPath: ranges) else {
                throw ValidationError("cannot read the ranges file \(ranges)")
            }
            do {
                sweep.ranges = try SweepRanges.decode(data)
            } catch {
                throw ValidationError("ranges \(ranges): \(error)")
            }
            sweep.rangesName = ranges
        }
        try ReportDirectory.prepare(reportDir)
        let progress = ProgressLine(enabled: !noProgress)
        let total = worlds
        let report = try await sweep.run(outboxDirectory: ScratchDirectory.fast("fleet-sweep")) { done in
            progress.update(fraction: Double(done) / Double(total), label: "worlds \(done)/\(total)")
        }
        progress.finish()
        let paths = try report.write(to: reportDir)
        print(report.text)
        print("report: \(paths.json)")
        print("report: \(paths.html)")
        if !report.allTargetsMet { throw ExitCode(1) }
    }
}
