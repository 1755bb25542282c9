import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Prometheus
import ServiceRuntime
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// Debian's chromium, installed by `deploy/local/install.sh chromium`. Missing is a failure that
/// says how to install it, never a silent skip.
enum Chromium {
    static var path: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    struct Run: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs chromium headless on `arguments` on a thread of its own (it takes seconds; the server
    /// under test needs the cooperative pool meanwhile). Output goes through temporary files.
    static func run(_ binary: String, _ arguments: [String]) async throws -> Run {
        let base = "\(NSTemporaryDirectory())telemetry-chromium-\(token())"
        // --no-sandbox: the tests may run as root, where chromium's sandbox refuses to start.
        let all =
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--user-data-dir=\(base)-profile",
            ] + arguments
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                let outPath = base + ".out", errPath = base + ".err"
                _ = FileManager.default.createFile(atPath: outPath, contents: nil)
                _ = FileManager.default.createFile(atPath: errPath, contents: nil)
                defer {
                    try? FileManager.default.removeItem(atPath: outPath)
                    try? FileManager.default.removeItem(atPath: errPath)
                    try? FileManager.default.removeItem(atPath: base + "-profile")
                }
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: binary)
                    process.arguments = all
                    process.standardOutput = FileHandle(forWritingAtPath: outPath)
                    process.standardError = FileHandle(forWritingAtPath: errPath)
                    try process.run()
                    process.waitUntilExit()
                    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
                    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
                    continuation.resume(returning: Run(status: process.terminationStatus, stdout: out, stderr: err))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }
}

@Suite("Status page in headless Chromium", .serialized)
struct StatusPageBrowserTests {
    @Test("the live server's / shows the data span, the SLO, the budget in words, the firing alerts, the charts and the site")
    func statusPageInChromium() async throws {
        guard let chromium = Chromium.path else {
            Issue.record(
                "chromium is not installed: run `deploy/local/install.sh chromium` (as root) to install Debian's chromium for this test")
            return
        }
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            let configuration = try LocalStack.serviceConfiguration(service: "telemetry-aggregator")
            let app = buildApplication(
                configuration: configuration, repository: db.repository, objective: .standard, readiness: [],
                metrics: PrometheusCollectorRegistry(), logger: TelemetryDB.logger, now: { fixtureNow })
            try await app.test(.live) { client in
                let port = try #require(client.port)
                let run = try await Chromium.run(chromium, ["--dump-dom", "http://127.0.0.1:\(port)/?site=\(site)"])
                #expect(run.status == 0, "chromium failed: \(run.stderr.suffix(2_000))")
                let dom = run.stdout
                // The DOM chromium rendered, not just the bytes we sent: the parser closed it and kept the SVG.
                #expect(dom.contains("<title>Beacon attendance: telemetry and SLO</title>"))
                #expect(dom.contains("99.0 % of events reach the server within 5 minutes of the trigger, offline cases included"))
                #expect(dom.contains("30-day compliance: <strong>80.00 %</strong>"))
                // 20 bad of 100 events, 1 allowed: the budget in words, never a negative percentage.
                #expect(dom.contains("<strong class=\"bad\">exhausted: 20 bad events against 1 allowed, 20× the budget</strong>"))
                #expect(try PageReader.negativePercentage(in: dom) == nil)
                #expect(dom.contains(">exhausted: 20× the budget</text>")) // the budget bar's label
                // The time the data covers: the triggers of the seeded check-ins, 10:21:20 to 10:30:29.
                #expect(
                    dom.contains(
                        "Data from <strong>2026-11-20 10:21 UTC</strong> to <strong>2026-11-20 10:30 UTC</strong> "
                            + "(30-day window; 100 events at 1 site)"))
                #expect(dom.contains("fast-burn (page) FIRING"))
                #expect(dom.contains("slow-burn (ticket) FIRING"))
                for chart in ["chart-budget", "chart-burn-rate", "chart-compliance", "chart-latency"] {
                    #expect(dom.contains("<svg id=\"\(chart)\""), "missing \(chart)")
                }
                #expect(dom.contains("data-series=\"p50\"") && dom.contains("data-series=\"p99\""))
                #expect(dom.contains("<polyline class=\"series\""))
                #expect(dom.contains("<title>p50 ") && dom.contains("<title>p99 ")) // the latency markers
                #expect(dom.contains(">20×</text>") && dom.contains(">fast-burn 5m</text>")) // a burn-rate bar's value and window
                #expect(dom.contains(">now</text>") && dom.contains(">−24 h</text>")) // the time axis
                // The site's row over the 30 days: events, good, compliance, budget, bad events.
                #expect(
                    dom.contains(
                        "<tr data-site=\"\(site)\"><td>\(site)</td><td>100</td><td>80</td><td class=\"bad\">80.00 %</td>"
                            + "<td class=\"bad\">exhausted (20×)</td><td>20</td>"))
                #expect(dom.contains("<td>2026-11-20 10:30</td></tr>")) // its last event

                // And the screenshot path renders without errors (the SVG is drawn, not only parsed).
                let shot = "\(NSTemporaryDirectory())telemetry-status-\(token()).png"
                let picture = try await Chromium.run(
                    chromium, ["--screenshot=\(shot)", "--window-size=1000,1400", "http://127.0.0.1:\(port)/?site=\(site)"])
                #expect(picture.status == 0, "chromium failed: \(picture.stderr.suffix(2_000))")
                let size = (try? FileManager.default.attributesOfItem(atPath: shot)[.size] as? Int) ?? 0
                #expect(size > 10_000, "screenshot of \(size) bytes")
                try? FileManager.default.removeItem(atPath: shot)
            }
        }
    }
}
