import ArgumentParser
import FleetSimulatorCore
import FleetSimulatorService
import Foundation
import PresenceKit
import Testing

@Suite("Trace replay and the command line")
struct TraceAndCommandTests {
    static let resources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Services/fleet-simulator/Resources").standardized

    @Test func theSampleTraceGivesOneCheckInAndOneCheckOut() throws {
        let text = try String(contentsOf: Self.resources.appendingPathComponent("sample-trace.csv"), encoding: .utf8)
        let config = try RemoteConfig.decode(
            String(contentsOf: Self.resources.appendingPathComponent("sample-config.json"), encoding: .utf8)
        ).presence
        let output = try TraceReplay.run(Trace.parse(text), config: config)
        let kinds = output.decisions.filter { $0.type != "heartbeat" }.map(\.type)
        #expect(kinds == ["checkin", "checkout"], "\(output.decisions)")
        let checkIn = try #require(output.decisions.first)
        #expect(checkIn.timestamp.hasPrefix("2026-01-05T07:59:3"), "\(checkIn)")
        #expect(checkIn.siteId == "S_HQ" && checkIn.beacon == "f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1")
        let checkOut = try #require(output.decisions.last)
        #expect(checkOut.decidedAt == "2026-01-05T17:35:10.000Z" && checkOut.reason == "geofence_exit")
        // Ranging bursts only (no continuous scan in the trace's config): the last moment of presence
        // is the OS region exit (PresenceKit README), 17:32:40.
        #expect(checkOut.timestamp == "2026-01-05T17:32:40.000Z", "\(checkOut)")
        // The readings after the ranging burst ended reach no phone's library.
        #expect(output.readingsWhileNotScanning == 9 && output.endedAt == "2026-01-05T17:50:00.000Z")
        #expect(try TraceReplay.json(output).contains("\"decisions\""))
    }

    static let uuid = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    /// A walk-in: geofence, walking, optionally the OS region event, then `readings` strong readings a second apart.
    static func walkIn(region: Bool, readings: Int = 8) -> String {
        var lines = [
            "timestamp,event,target,value", "1000,site,S_1,\(uuid):10", "1000,geofence,S_1,enter", "2000,motion,,walking", "2500,steps,,40",
        ]
        if region { lines.append("2900,region,,enter") }
        for i in 0..<readings { lines.append("\(3_000 + i * 1_000),rssi,\(uuid):10:1,-60") }
        return lines.joined(separator: "\n")
    }

    /// Ranging bursts on region events instead of the default continuous scan.
    static var bursts: PresenceConfig {
        var c = PresenceConfig()
        c.flags.continuousScan = false
        return c
    }

    @Test func readingsReachTheLibraryOnlyWhileItScansUnlessAskedToFeedThemAll() throws {
        let silent = try TraceReplay.run(Trace.parse(Self.walkIn(region: false)), config: Self.bursts)
        #expect(silent.decisions.isEmpty && silent.readingsWhileNotScanning == 8)
        let fedAll = try TraceReplay.run(
            Trace.parse(Self.walkIn(region: false)), config: Self.bursts, options: .init(feedAllReadings: true))
        #expect(fedAll.observations == silent.observations + 8)
        let ranging = try TraceReplay.run(Trace.parse(Self.walkIn(region: true)), config: Self.bursts)
        #expect(ranging.decisions.first?.type == "checkin")
    }

    @Test func timersFireAtTheirDueTimeAlsoAfterTheLastLine() throws {
        // Checked in, then the trace ends: the beacon-loss check-out is decided after the grace, past the last line.
        let trace = try Trace.parse(Self.walkIn(region: true))
        let lastLine = Timestamp(millisecondsSinceEpoch: 10_000)
        var config = PresenceConfig()
        config.checkOutTrigger = .beaconLoss // the continuous scan sees the silence after the check-in: it starts the grace
        let out = try TraceReplay.run(trace, config: config)
        let checkOut = try #require(out.decisions.first { $0.type == "checkout" }, "\(out.decisions)")
        #expect(checkOut.decidedAt > lastLine.iso8601Milliseconds && checkOut.decidedAt.hasSuffix("Z") && checkOut.decidedAt.contains("."))
        let cut = try TraceReplay.run(trace, config: config, options: .init(end: lastLine))
        #expect(cut.decisions.map(\.type) == ["checkin"] && cut.endedAt == lastLine.iso8601Milliseconds)
        #expect(throws: TraceError.self) {
            try TraceReplay.run(trace, config: PresenceConfig(), options: .init(end: Timestamp(millisecondsSinceEpoch: 5_000)))
        }
    }

    /// A line the replay cannot use (a reading of a beacon no site claims, a geofence of a site no line
    /// declares) stops it, naming the line.
    @Test(arguments: [
        ("11000,rssi,a1b2c3d4-0000-4000-8000-000000000001:1:1,-60", "belongs to no site"),
        ("11000,geofence,S_hq,enter", "S_hq"),
    ])
    func aLineNoSiteClaimsIsAnErrorNamingIt(line: String, fragment: String) throws {
        let trace = try Trace.parse(Self.walkIn(region: true) + "\n" + line)
        do {
            _ = try TraceReplay.run(trace, config: PresenceConfig())
            Issue.record("replayed \(line)")
        } catch let error as TraceError {
            #expect(error.line == 15 && error.description.contains(fragment), "\(error)")
        }
    }

    /// A recording exported on Windows (CR LF line ends) replays as the same recording does.
    @Test func aTraceWithWindowsLineEndsReplaysAlike() throws {
        let text = try String(contentsOf: Self.resources.appendingPathComponent("sample-trace.csv"), encoding: .utf8)
        let windows = text.replacingOccurrences(of: "\n", with: "\r\n")
        let config = try RemoteConfig.decode(
            String(contentsOf: Self.resources.appendingPathComponent("sample-config.json"), encoding: .utf8)
        ).presence
        let unix = try TraceReplay.run(Trace.parse(text), config: config)
        let crlf = try TraceReplay.run(Trace.parse(windows), config: config)
        #expect(crlf.decisions == unix.decisions && !unix.decisions.isEmpty)
    }

    @Test(arguments: [
        ("timestamp,event,target,value\n1000,rssi,not-a-beacon,-60\n", 2, "beacon \"not-a-beacon\" is not UUID:major:minor"),
        (
            "# note\ntimestamp,event,target,value\n\n1000,motion,,walking\n1001,rssi,f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:1,12\n", 5,
            "RSSI \"12\""
        ),
        ("timestamp,event,target,value\nyesterday,steps,,3\n", 2, "timestamp \"yesterday\""),
        ("timestamp,event,target,value\n2000,steps,,3\n1000,steps,,3\n", 3, "timestamp goes backwards"),
        ("timestamp,event,target,value\n1000,teleport,,3\n", 2, "unknown event \"teleport\""),
        ("timestamp,event,target,value\n1000,steps,3\n", 2, "expected 4 fields"),
        ("time,what\n", 1, "expected the header"),
    ])
    func badLinesNameTheirLineNumber(text: String, line: Int, fragment: String) {
        do {
            _ = try Trace.parse(text)
            Issue.record("parsed: \(text)")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.description.hasPrefix("trace line \(line): "), "\(error)")
            #expect(error.description.contains(fragment), "\(error)")
        }
    }

    @Test(arguments: [
        (["run", "--duration", "3x"], "--duration \"3x\" is not a duration like 90s, 15m, 24h or 3d"),
        (["run", "--devices", "0"], "--devices must be between 1 and 100000, got 0"),
        (["run", "--devices", "many"], "many"),
        (["run", "--duration", "10d"], "longer than 6 days"),
        (["run", "--duration", "30s"], "--duration 30s is too short for a rush: at least 75s"),
        (["run", "--start-hour", "7.5"], "--start-hour is for detection-only runs over working days"),
        (["run", "--offline-time", "40s-10s"], "--offline-time \"40s-10s\" is not a range of durations like 10s-40s or 6m-7m"),
        (["run", "--offline-share", "1.5"], "--offline-share must be between 0 and 1, got 1.5"),
        (["run", "--detection-only", "--heartbeat-minutes", "inf"], "--heartbeat-minutes must be 0 (off) or between 1 and 1440"),
        (["run", "--detection-only", "--heartbeat-minutes", "2e14"], "--heartbeat-minutes must be 0 (off) or between 1 and 1440"),
        (["run", "--schedule", "weekly"], "weekly"),
        (["run", "--detection-only", "--duration", "10000000d"], "--duration 10000000d is longer than 366 days"),
        (["run", "--detection-only", "--duration", "0.0001"], "--duration \"0.0001\" is not a duration"),
        (["run", "--quiet-phones", "--offline-share", "0.5"], "--quiet-phones means no phone goes offline"),
        (["scenario", "no-such-thing"], "unknown scenario \"no-such-thing\"; one of: all, default-world"),
        (["replay"], "--trace"),
    ])
    func badArgumentsGiveAReadableMessage(arguments: [String], fragment: String) {
        do {
            _ = try FleetSimulatorCommand.parseAsRoot(arguments)
            Issue.record("parsed \(arguments)")
        } catch {
            let message = FleetSimulatorCommand.message(for: error)
            #expect(message.contains(fragment), "\(message)")
        }
    }

    @Test func goodArgumentsBecomeFleetOptions() throws {
        let command = try #require(
            try FleetSimulatorCommand.parseAsRoot(
                [
                    "run", "--detection-only", "--devices", "50", "--sites", "2", "--duration", "90m", "--start-hour", "7.5", "--seed", "9",
                    "--quiet-phones",
                ])
                as? RunCommand)
        let o = command.fleetOptions
        #expect(o.devices == 50 && o.sites == 2 && o.durationMs == 5_400_000 && o.startOffsetMs == 27_000_000 && o.seed == 9)
        #expect(o.scheduleKind == .workingDays && o.phones == .quiet)
        #expect(
            DurationText.milliseconds("2d") == 172_800_000 && DurationText.milliseconds("45") == 45_000
                && DurationText.milliseconds("h") == nil)
        #expect(DurationText.range("10s-40s") == 10_000...40_000 && DurationText.range("30s") == 30_000...30_000)
        #expect(DurationText.range("6m-") == nil && DurationText.range("1e300s") == nil)
    }

    @Test func aSweepRangesFileWithABadKeyIsRefusedByNameBeforeAnyWorldRuns() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sweep-ranges-\(UUID().uuidString).json")
        try #"{"phoneLossDB": 0, "packetLoss": [0.3, 0.1]}"#.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        for (path, fragments) in [
            (file.path, ["phoneLossDB: not a sweep range", "packetLoss: low 0.3 is above high 0.1"]),
            ("/nonexistent/ranges.json", ["cannot read the ranges file /nonexistent/ranges.json"]),
        ] {
            let reportDir = FileManager.default.temporaryDirectory.appendingPathComponent("sweep-report-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: reportDir) }
            let sweep = try #require(
                try FleetSimulatorCommand.parseAsRoot(
                    ["sweep", "--worlds", "1", "--ranges", path, "--report-dir", reportDir.path, "--no-progress"]) as? SweepCommand)
            do {
                try await sweep.run()
                Issue.record("swept with \(path)")
            } catch {
                let message = FleetSimulatorCommand.message(for: error)
                for fragment in fragments { #expect(message.contains(fragment), "\(message)") }
            }
            // A world that ran would have left its report: nothing was written.
            #expect(!FileManager.default.fileExists(atPath: reportDir.path), "a report was written for \(path)")
        }
    }

    @Test func aReplayConfigWithAMisspelledKeyIsRefusedByName() throws {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("replay-config-\(UUID().uuidString).json")
        try #"{"checkout_triger": "geofence_exit", "thresholds": {"max_stdev_db": 6}}"#.write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let replay = try #require(
            try FleetSimulatorCommand.parseAsRoot(
                ["replay", "--trace", Self.resources.appendingPathComponent("sample-trace.csv").path, "--config", config.path])
                as? ReplayCommand)
        do {
            try replay.run()
            Issue.record("replayed with a misspelled config")
        } catch {
            let message = FleetSimulatorCommand.message(for: error)
            #expect(message.contains("checkout_triger: is not a remote-config key of this app"), "\(message)")
            #expect(message.contains("thresholds.max_stdev_db: is not a remote-config key of this app"), "\(message)")
        }
    }

    @Test func aScenarioRunsWithTheConfigGivenAndStillExpectsItsTargets() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func scenario(_ config: String) throws -> ScenarioCommand {
            let path = dir.appendingPathComponent("config-\(UUID().uuidString).json")
            try config.write(to: path, atomically: true, encoding: .utf8)
            let arguments = ["scenario", "walk-past", "--config", path.path, "--report-dir", dir.path]
            return try #require(try FleetSimulatorCommand.parseAsRoot(arguments) as? ScenarioCommand)
        }
        // Entering at -90 dBm checks in people who only walk past: the scenario runs with it, and fails.
        let loose = try scenario(#"{"thresholds": {"enter_rssi": -90, "leave_rssi": -100, "dwell_enter_rssi": -95}}"#)
        await #expect(throws: ExitCode.self) { try await loose.run() }
        let report = try String(contentsOf: dir.appendingPathComponent("walk-past.json"), encoding: .utf8)
        #expect(report.contains("\"checkIns\""))
        let misspelled = try scenario(#"{"thresholds": {"enter_rsi": -90}}"#)
        do {
            try await misspelled.run()
            Issue.record("ran a scenario with a misspelled config")
        } catch {
            let message = FleetSimulatorCommand.message(for: error)
            #expect(message.contains("thresholds.enter_rsi: is not a remote-config key of this app"), "\(message)")
        }
    }

    @Test func theDefaultRunIsTheDemoARealTimeMorningRush() throws {
        let o = try #require(try FleetSimulatorCommand.parseAsRoot(["run"]) as? RunCommand).fleetOptions
        #expect(o.devices == 300 && o.sites == 2 && o.durationMs == 90_000 && o.scheduleKind == .morningRush && o.phones == .rush)
        let burning = try #require(
            try FleetSimulatorCommand.parseAsRoot(
                ["run", "--duration", "10m", "--offline-share", "0.5", "--offline-time", "9m"]) as? RunCommand
        ).fleetOptions
        #expect(burning.phones.offline == 0.5 && burning.phones.offlineSeconds == 540...540)
        let days = try #require(try FleetSimulatorCommand.parseAsRoot(["run", "--detection-only"]) as? RunCommand).fleetOptions
        #expect(days.scheduleKind == .workingDays && days.durationMs == 86_400_000 && days.phones == PhoneMix())
    }

    @Test func aCaptivePortalsHTMLIsNotAVerdict() {
        #expect(
            ContractReading.deliveryResult(TransportAnswer(status: 200, contentType: "text/html"))
                != .response(status: 200, problemType: nil, retryAfterMs: nil))
        if case .transportError = ContractReading.deliveryResult(TransportAnswer(status: 302, contentType: nil)) {
        } else {
            Issue.record("a redirect without JSON must be retried")
        }
        #expect(
            ContractReading.deliveryResult(TransportAnswer(status: 201, contentType: "application/json; charset=utf-8"))
                == .response(status: 201, problemType: nil, retryAfterMs: nil))
    }
}
