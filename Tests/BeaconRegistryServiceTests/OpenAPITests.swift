import LocalStackTesting
import BeaconRegistryCore
import BeaconRegistryService
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

extension RegistryServiceTests {
    @Suite("OpenAPI document")
    struct OpenAPITests {
        /// `path -> methods` from the document's `paths:` block (two-space paths, four-space methods).
        static func documentedOperations(_ yaml: String) -> Set<String> {
            var operations = Set<String>()
            var inPaths = false
            var currentPath: String?
            let methods: Set<String> = ["get", "post", "put", "patch", "delete", "head", "options"]
            for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
                if line == "paths:" { inPaths = true; continue }
                guard inPaths else { continue }
                if !line.hasPrefix(" ") && !line.isEmpty { break }
                if line.hasPrefix("  /") && line.hasSuffix(":") {
                    currentPath = String(line.dropFirst(2).dropLast())
                } else if line.hasPrefix("    ") && !line.hasPrefix("     ") && line.hasSuffix(":"),
                          let path = currentPath, methods.contains(String(line.dropFirst(4).dropLast())) {
                    operations.insert("\(line.dropFirst(4).dropLast().uppercased()) \(path)")
                }
            }
            return operations
        }

        @Test func servedDocumentIsTheRepositoryFileAndIsOpenAPI31() async throws {
            let repositoryFile = LocalStack.root.appendingPathComponent("Services/beacon-registry/openapi.yaml")
            let kept = try String(contentsOf: repositoryFile, encoding: .utf8)
            let app = Application(router: buildRouter(repository: UnusedRepository()))
            try await app.test(.router) { client in
                let response = try await client.send(.get, "/openapi.yaml", key: nil)
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("application/yaml") == true)
                #expect(response.text.hasPrefix("openapi: 3.1"))
                #expect(response.text == kept)
            }
        }

        /// Every route of the router (plus health and metrics, which `ServiceApplication` adds) is
        /// documented with its method, and the document has no operation the router lacks.
        @Test func everyRouteIsDocumentedAndNothingElse() throws {
            let document = try #require(OpenAPIDocument.text)
            let documented = Self.documentedOperations(document)
            let router = buildRouter(repository: UnusedRepository())
            var routed = Set(router.routes.map { "\($0.method) \($0.path)" })
            routed.formUnion(["GET /health/live", "GET /health/ready", "GET /metrics"])
            #expect(routed.count >= 27)
            #expect(routed.subtracting(documented).isEmpty, "undocumented: \(routed.subtracting(documented).sorted())")
            #expect(documented.subtracting(routed).isEmpty, "documented but not routed: \(documented.subtracting(routed).sorted())")
        }
    }
}
