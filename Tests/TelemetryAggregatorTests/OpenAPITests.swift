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
            let routed = OpenAPIDocument.operations(of: router)
            #expect(routed.subtracting(document.operations).isEmpty, "undocumented: \(routed.subtracting(document.operations).sorted())")
            #expect(document.operations.subtracting(routed).isEmpty, "not routed: \(document.operations.subtracting(routed).sorted())")
        }
    }
}
