import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import LocalStackTesting
import PolicyServiceCore
import ServiceRuntime
import Testing

@testable import PolicyService

/// The document kept beside the code (`Service/Resources/openapi.yaml`) lists exactly the routes
/// the policy service serves; schemathesis checks it against the running service in `make test`.
@Suite("Policy OpenAPI document")
struct PolicyOpenAPITests {
    @Test func everyRouteIsDocumentedAndNothingElse() async throws {
        let document = try #require(OpenAPIDocument.policy)
        #expect(document.text.hasPrefix("openapi: 3.1"))
        try await LocalStack.withPostgres { client in
            let repository = PostgresPolicyRepository(client: client, logger: LocalStack.logger)
            let refresher = PolicyBookRefresher(
                base: PolicyBook(), repository: repository, hostedRules: PolicyEngine.standard.ruleIDs, interval: .seconds(60),
                logger: LocalStack.logger
            ) { _ in }
            let router = Router(context: AdminContext.self)
            addPolicyAdminRoutes(
                to: router,
                controller: PolicyAdminController(repository: repository, refresher: refresher, hostedRules: PolicyEngine.standard.ruleIDs),
                keyVerifier: PostgresAdminKeyVerifier(client: client, schema: RegistrySchema.defaultName, logger: LocalStack.logger)
            )
            let drift = document.drift(from: router)
            #expect(drift.isEmpty, "\(drift)")
        }
    }
}
