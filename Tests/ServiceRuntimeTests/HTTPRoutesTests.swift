import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import Prometheus
import Testing

@testable import ServiceRuntime

struct FakeCheck: ReadinessCheck {
    let name: String
    let healthy: Bool
    struct Down: Error, CustomStringConvertible { var description: String { "connection refused" } }
    func check() async throws { if !healthy { throw Down() } }
}

@Suite("Health and metrics routes")
struct HTTPRoutesTests {
    func app(checks: [any ReadinessCheck], registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) -> some ApplicationProtocol {
        let router = Router()
        HealthController(service: "test", checks: checks).addRoutes(to: router)
        MetricsController(registry: registry).addRoutes(to: router)
        return Application(router: router)
    }

    @Test func liveAndReadyWhenEveryCheckPasses() async throws {
        try await app(checks: [FakeCheck(name: "postgres", healthy: true), FakeCheck(name: "kafka", healthy: true)]).test(.router) { client in
            try await client.execute(uri: "/health/live", method: .get) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/health/ready", method: .get) { response in
                #expect(response.status == .ok)
                let report = try JSONDecoder().decode(HealthReport.self, from: Data(buffer: response.body))
                #expect(report.checks == ["postgres": "ok", "kafka": "ok"])
            }
        }
    }

    @Test func notReadyNamesTheFailingDependency() async throws {
        try await app(checks: [FakeCheck(name: "postgres", healthy: true), FakeCheck(name: "kafka", healthy: false)]).test(.router) { client in
            try await client.execute(uri: "/health/ready", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                let report = try JSONDecoder().decode(HealthReport.self, from: Data(buffer: response.body))
                #expect(report.checks["kafka"] == "failing: connection refused")
                #expect(report.status == "unavailable")
            }
            // Liveness does not depend on the broker: restarting the process would not fix it.
            try await client.execute(uri: "/health/live", method: .get) { response in
                #expect(response.status == .ok)
            }
        }
    }

    @Test func metricsExposesPrometheusText() async throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(name: "events_total", labels: [("outcome", "accepted")]).increment(by: Int64(3))
        try await app(checks: [], registry: registry).test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                #expect(String(buffer: response.body).contains(#"events_total{outcome="accepted"} 3"#))
            }
        }
    }
}

@Suite("JSON logs")
struct JSONLogHandlerTests {
    @Test func oneJSONObjectPerLineWithMetadata() throws {
        final class Lines: @unchecked Sendable {
            let lock = NSLock()
            var items: [String] = []
        }
        let lines = Lines()
        var logger = Logger(label: "test.logger") { label in
            JSONLogHandler(label: label, service: "svc", logLevel: .info) { line in lines.lock.withLock { lines.items.append(line) } }
        }
        logger[metadataKey: "request"] = "r-1"
        logger.info("hello", metadata: ["user": "u-1"])
        logger.debug("dropped")
        #expect(lines.items.count == 1)
        let object = try JSONSerialization.jsonObject(with: Data(lines.items[0].utf8)) as! [String: Any]
        #expect(object["msg"] as? String == "hello")
        #expect(object["level"] as? String == "info")
        #expect(object["service"] as? String == "svc")
        #expect(object["request"] as? String == "r-1")
        #expect(object["user"] as? String == "u-1")
        #expect((object["ts"] as? String)?.hasSuffix("Z") == true)
    }
}
