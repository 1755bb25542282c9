import Hummingbird
import IngestGatewayService
import ServiceRuntime
import Testing

/// The device API's document kept beside the code (`Service/Resources/openapi.yaml`) lists exactly
/// the routes the gateway serves; schemathesis checks it against the running gateway in `make test`.
@Suite("Gateway OpenAPI document")
struct GatewayOpenAPITests {
    @Test func everyRouteIsDocumentedAndNothingElse() throws {
        let document = try #require(OpenAPIDocument.gateway)
        #expect(document.text.hasPrefix("openapi: 3.1"))
        let drift = document.drift(from: RouterHarness.router())
        #expect(drift.routed >= 12)
        #expect(drift.isEmpty, "\(drift)")
    }
}
