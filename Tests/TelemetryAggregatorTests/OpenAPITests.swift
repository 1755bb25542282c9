import LocalStackTesting
import ServiceRuntime
import Testing

@testable import TelemetryAggregatorService

/// The document kept beside the code (`Service/Resources/openapi.yaml`) lists exactly the routes the
/// telemetry aggregator serves; schemathesis checks it against the running service in `make test`.
@Suite("Telemetry OpenAPI document")
struct TelemetryOpenAPITests {
    @Test func everyRouteIsDocumentedAndNothingElse() async throws {
        let document = try #require(OpenAPIDocument.telemetry)
        #expect(document.text.hasPrefix("openapi: 3.1"))
        try await LocalStack.withPostgres { client in
            let router = buildRouter(
                repository: PostgresTelemetryQueryRepository(client: client, logger: LocalStack.logger))
            let drift = document.drift(from: router)
            #expect(drift.isEmpty, "\(drift)")
        }
    }
}
