import Foundation
import Hummingbird
import HummingbirdTesting
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import Prometheus
import ServiceRuntime
import Testing

/// A service's HTTP side over a real socket, ready only when its real dependencies answer.
@Suite("Service application on the local stack")
struct ServiceApplicationTests {
    @Test func readyWithRealDependenciesAndServesMetricsAndOwnRoutes() async throws {
        try LocalStack.ensureStarted()
        let configuration = try LocalStack.serviceConfiguration(service: "test-service")
        let logger = LocalStack.logger
        let registry = PrometheusCollectorRegistry()
        let postgres = configuration.postgres.makeClient(logger: logger)
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: configuration.kafka), logger: logger)
        var app = ServiceApplication.build(
            configuration: configuration, registry: registry,
            readiness: [PostgresReadinessCheck(client: postgres), KafkaReadinessCheck(producer: producer)],
            logger: logger, openAPI: OpenAPIDocument(text: "openapi: 3.1.0\n")
        ) { router in
            router.get("/v1/hello") { _, _ in "hello" }
        }
        app.addServices(postgres, producer)
        try await app.test(.live) { client in
            // Ready once both dependencies answer; like an orchestrator, the test asks until then
            // (a starved pool can delay the first metadata answer past the check's own timeout).
            var last = ""
            let ready = try await poll(every: .milliseconds(200), timeout: .seconds(60)) {
                try await client.execute(uri: "/health/ready", method: .get) { response in
                    last = "\(response.status.code) \(String(buffer: response.body))"
                    return response.status == .ok
                }
            }
            #expect(ready, "\(last)")
            try await client.execute(uri: "/v1/hello", method: .get) { response in
                #expect(String(buffer: response.body) == "hello")
            }
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
            }
        }
    }
}
