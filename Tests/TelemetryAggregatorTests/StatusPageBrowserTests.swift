import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Prometheus
import ServiceRuntime
import TelemetryAggregatorCore
@testable import TelemetryAggregatorService
import Testing

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
        let all = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                   "--user-data-dir=\(base)-profile"] + arguments
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
    @Test("the live server's / shows the SLO, the budget, the firing alerts and the SVG charts")
    func statusPageInChromium() async throws {
        guard let chromium = Chromium.path else {
            Issue.record("chromium is not installed: run `deploy/local/install.sh chromium` (as root) to install Debian's chromium for this test")
            return
        }
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            var env = ProcessInfo.processInfo.environment
            env["HTTP_PORT"] = "0"
            env["HTTP_HOST"] = "127.0.0.1"
            let configuration = try ServiceConfiguration.load(service: "telemetry-aggregator", defaultHTTPPort: 0, from: EnvironmentReader(env))
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
                #expect(dom.contains("Error budget remaining (30 days): <strong class=\"bad\">-1900.00 %</strong>"))
                #expect(dom.contains("fast-burn (page) FIRING"))
                #expect(dom.contains("slow-burn (ticket) FIRING"))
                for chart in ["chart-budget", "chart-burn-rate", "chart-compliance", "chart-latency"] {
                    #expect(dom.contains("<svg id=\"\(chart)\""), "missing \(chart)")
                }
                #expect(dom.contains("data-series=\"p50\"") && dom.contains("data-series=\"p99\""))
                #expect(dom.contains("<polyline class=\"series\""))
                #expect(dom.contains("<title>p50 ") && dom.contains("<title>p99 "))   // the latency markers
                #expect(dom.contains("5m 20"))   // the 5-minute burn-rate bar's label
                #expect(dom.contains(site))

                // And the screenshot path renders without errors (the SVG is drawn, not only parsed).
                let shot = "\(NSTemporaryDirectory())telemetry-status-\(token()).png"
                let picture = try await Chromium.run(chromium, ["--screenshot=\(shot)", "--window-size=1000,1400", "http://127.0.0.1:\(port)/?site=\(site)"])
                #expect(picture.status == 0, "chromium failed: \(picture.stderr.suffix(2_000))")
                let size = (try? FileManager.default.attributesOfItem(atPath: shot)[.size] as? Int) ?? 0
                #expect(size > 10_000, "screenshot of \(size) bytes")
                try? FileManager.default.removeItem(atPath: shot)
            }
        }
    }
}
