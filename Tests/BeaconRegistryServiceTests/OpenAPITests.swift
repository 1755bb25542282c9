import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import Foundation
import LocalStackTesting
import ServiceRuntime
import Testing

extension RegistryServiceTests {
    @Suite("OpenAPI document", .serialized)
    struct OpenAPITests {
        @Test func theBundledDocumentIsTheRepositoryFileAndIsOpenAPI31() throws {
            let document = try #require(OpenAPIDocument.registry)
            let kept = try String(
                contentsOf: LocalStack.root.appendingPathComponent("Services/beacon-registry/Service/Resources/openapi.yaml"),
                encoding: .utf8
            )
            #expect(document.text == kept)
            #expect(document.text.hasPrefix("openapi: 3.1"))
        }

        /// Every route of the router (plus what `ServiceApplication` adds) is documented with its
        /// method, and the document has no operation the router lacks.
        @Test func everyRouteIsDocumentedAndNothingElse() throws {
            let drift = try #require(OpenAPIDocument.registry).drift(
                from: buildRouter(repository: UnusedRepository(), devices: ServiceTestDatabase.devices))
            #expect(drift.routed >= 27)
            #expect(drift.isEmpty, "\(drift)")
        }
    }
}
