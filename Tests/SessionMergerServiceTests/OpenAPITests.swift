import AccessControl
import AttendanceProtocol
import Foundation
import LocalStackTesting
import RegistryFeed
import ServiceRuntime
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// The document kept beside the code (`Service/Resources/openapi.yaml`) lists exactly the routes
    /// the merger serves; schemathesis checks it against the running service in `make test`.
    @Suite("OpenAPI document")
    struct OpenAPITests {
        @Test func everyRouteIsDocumentedAndNothingElse() async throws {
            let document = try #require(OpenAPIDocument.merger)
            #expect(document.text.hasPrefix("openapi: 3.1"))
            try await LocalStack.withPostgres { client in
                let router = buildRouter(
                    sessions: PostgresSessionQueryRepository(client: client, logger: LocalStack.logger),
                    shifts: RegistryCacheShiftProvider(cache: RegistryCache(), isReady: { true }),
                    keyVerifier: PostgresAdminKeyVerifier(client: client, schema: RegistrySchema.defaultName, logger: LocalStack.logger)
                )
                let drift = document.drift(from: router)
                #expect(drift.isEmpty, "\(drift)")
            }
        }
    }
}
