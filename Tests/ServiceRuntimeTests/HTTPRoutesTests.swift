import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import NIOFoundationEssentialsCompat
import Prometheus
import Synchronization
import Testing

@testable import ServiceRuntime

struct FakeCheck: ReadinessCheck {
    let name: String
    let healthy: Bool
    struct Down: Error, CustomStringConvertible { var description: String { "connection refused" } }
    func check() async throws { if !healthy { throw Down() } }
}

/// A dependency that takes a while to answer, counting how many checks run at once.
final class SlowCheck: ReadinessCheck, Sendable {
    let name = "broker"
    private let counts = Mutex<(running: Int, most: Int, calls: Int)>((0, 0, 0))

    var mostAtOnce: Int { counts.withLock { $0.most } }
    var calls: Int { counts.withLock { $0.calls } }

    func check() async throws {
        counts.withLock {
            $0.running += 1
            $0.calls += 1
            $0.most = max($0.most, $0.running)
        }
        try await Task.sleep(for: .milliseconds(300))
        counts.withLock { $0.running -= 1 }
    }
}

@Suite("Health and metrics routes")
struct HTTPRoutesTests {
    func app(
        checks: [any ReadinessCheck], registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
    ) -> some ApplicationProtocol {
        let router = Router()
        HealthController(service: "test", checks: checks).addRoutes(to: router)
        MetricsController(registry: registry).addRoutes(to: router)
        return Application(router: router)
    }

    @Test func liveAndReadyWhenEveryCheckPasses() async throws {
        try await app(checks: [FakeCheck(name: "postgres", healthy: true), FakeCheck(name: "kafka", healthy: true)]).test(.router) {
            client in
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
        try await app(checks: [FakeCheck(name: "postgres", healthy: true), FakeCheck(name: "kafka", healthy: false)]).test(.router) {
            client in
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

    /// Probes that arrive while a check runs share its answer: a broker that takes its whole timeout
    /// to fail is asked once at a time, however many probes come.
    @Test func concurrentProbesShareOneCheck() async throws {
        let check = SlowCheck()
        let controller = HealthController<BasicRequestContext>(service: "test", checks: [check])
        let reports = await withTaskGroup(of: HealthReport.self) { group in
            for _ in 0..<20 { group.addTask { await controller.readiness() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(reports.count == 20)
        #expect(reports.allSatisfy { $0.checks["broker"] == "ok" })
        #expect(check.mostAtOnce == 1)
        #expect(check.calls < 20, "\(check.calls) checks for 20 probes")
    }

    @Test func metricsExposesPrometheusText() async throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: "events", unitName: "total", helpText: "Events"), labels: [("outcome", "accepted")]
        ).increment(by: Int64(3))
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
        let line = try #require(lines.items.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["msg"] as? String == "hello")
        #expect(object["level"] as? String == "info")
        #expect(object["service"] as? String == "svc")
        #expect(object["request"] as? String == "r-1")
        #expect(object["user"] as? String == "u-1")
        #expect((object["ts"] as? String)?.hasSuffix("Z") == true)
    }
}

@Suite("Routes every service shares: the OpenAPI document, 405 for a method a path lacks")
struct SharedRoutesTests {
    func app() throws -> some ApplicationProtocol {
        let configuration = try ServiceConfiguration.load(service: "test-service", defaultHTTPPort: 0, from: EnvironmentReader([:]))
        return ServiceApplication.build(
            configuration: configuration, registry: PrometheusCollectorRegistry(), readiness: [], logger: Logger(label: "test"),
            openAPI: OpenAPIDocument(text: "openapi: 3.1.0\npaths:\n  /v1/things/{id}:\n    get:\n    put:\n")
        ) { router in
            router.get("/v1/things/:id") { _, _ in "a thing" }
            router.put("/v1/things/:id") { _, _ in "put" }
            router.get("/v1/files/**") { _, _ in "a file" }
            router.get("/v1/events/:key") { _, _ in "an event" }
            router.post("/v1/events/batch") { _, _ in "a batch" }
        }
    }

    @Test func theDocumentIsServedAsYAML() async throws {
        try await app().test(.router) { client in
            try await client.execute(uri: "/openapi.yaml", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("application/yaml") == true)
                #expect(String(buffer: response.body).hasPrefix("openapi: 3.1.0"))
                #expect(response.headers[.xContentTypeOptions] == "nosniff")
            }
        }
    }

    @Test func aMethodThePathLacksIs405WithAllow() async throws {
        try await app().test(.router) { client in
            for method: HTTPRequest.Method in [.delete, .post, .patch, .trace, .options] {
                try await client.execute(uri: "/v1/things/42", method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method)")
                    #expect(response.headers[.allow] == "GET, HEAD, PUT")
                    #expect(response.headers[.contentType] == "application/problem+json")
                    #expect(String(buffer: response.body).contains("method-not-allowed"))
                }
            }
            try await client.execute(uri: "/health/live", method: .post) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "GET, HEAD")
            }
            try await client.execute(uri: "/v1/files/a/b/c", method: .delete) { response in
                #expect(response.status == .methodNotAllowed)
            }
            // The literal route wins, as in the router: GET on /events/batch is not the :key route.
            try await client.execute(uri: "/v1/events/batch", method: .get) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "POST")
            }
            try await client.execute(uri: "/v1/events/k1", method: .post) { response in
                #expect(response.headers[.allow] == "GET, HEAD")
            }
        }
    }

    /// A load balancer's health check often sends `HEAD`: it gets what `GET` would, without the body.
    @Test func headIsServedWhereverGetIs() async throws {
        try await app().test(.router) { client in
            for uri in ["/health/live", "/v1/things/42", "/openapi.yaml"] {
                try await client.execute(uri: uri, method: .head) { response in
                    #expect(response.status == .ok, "\(uri)")
                    #expect(response.body.readableBytes == 0, "\(uri)")
                }
            }
            try await client.execute(uri: "/openapi.yaml", method: .head) { response in
                #expect(response.headers[.contentType]?.hasPrefix("application/yaml") == true)
            }
            // A path served only with POST still refuses HEAD, naming what it has.
            try await client.execute(uri: "/v1/events/batch", method: .head) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "POST")
            }
        }
        // Over a real connection too: the answer ends where a HEAD's answer ends, and the connection
        // serves the next request.
        try await app().test(.live) { client in
            try await client.execute(uri: "/health/live", method: .head) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/v1/things/42", method: .get) { response in
                #expect(String(buffer: response.body) == "a thing")
            }
        }
    }

    @Test func aPathNoRouteServesStays404AndRoutedMethodsAnswer() async throws {
        try await app().test(.router) { client in
            try await client.execute(uri: "/v1/things/42/more", method: .delete) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/v1/nothing", method: .get) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/v1/things/42", method: .put) { response in
                #expect(response.status == .ok)
            }
        }
    }

    @Test func documentOperationsUseTheRoutersSpelling() {
        let document = OpenAPIDocument(
            text: "openapi: 3.1.0\npaths:\n  /a/{id}/b:\n    get:\n      summary: x\n    post:\ncomponents:\n  /x:\n    get:\n")
        #expect(document.operations == ["GET /a/{id}/b", "POST /a/{id}/b"])
        let router = Router()
        router.get("/a/:id/b") { _, _ in "" }
        router.post("/a/{id}/b") { _, _ in "" }
        #expect(OpenAPIDocument.operations(of: router) == document.operations.union(ServiceApplication.sharedOperations))
    }
}
