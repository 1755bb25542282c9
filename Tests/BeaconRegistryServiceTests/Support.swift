import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Logging
import NIOCore
import PostgresNIO
import RegistryTestFixtures
import ServiceRuntime
import Testing

/// The real local PostgreSQL (started by `deploy/local/stack.sh start`) with the registry
/// migrations applied to a schema of the test's own, the registry router over it, and one fresh API
/// key per role.
enum ServiceTestDatabase {
    static let logger = LocalStack.logger(label: "registry-service-tests")

    static let signer: DeviceTokenSigner = {
        let key = try! DeviceSigningKey(id: "svc-test", secret: Array(repeating: 9, count: 32))
        return try! DeviceTokenSigner(activeKey: key)
    }()
    static let devices = DeviceAuthentication(signer: signer)
}

/// What a test gets: the repository, the raw client for count queries, and a secret per role.
struct Harness: Sendable {
    let repository: PostgresRegistryRepository
    let db: PostgresClient
    let admin: String
    let installer: String
    let viewer: String

    /// Runs `body` with the router under test (`app.test(.router)`).
    static func run(
        beaconKeySealer: BeaconKeySealer? = nil, _ body: @escaping @Sendable (Harness, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_svc") { client, _ in
            let repository = PostgresRegistryRepository(
                client: client, logger: ServiceTestDatabase.logger, tokenSigner: ServiceTestDatabase.signer,
                beaconKeySealer: beaconKeySealer
            )
            let harness = Harness(
                repository: repository, db: client,
                admin: try await repository.createAPIKey(name: "svc-test admin", role: .admin).secret,
                installer: try await repository.createAPIKey(name: "svc-test installer", role: .installer).secret,
                viewer: try await repository.createAPIKey(name: "svc-test viewer", role: .viewer).secret
            )
            let app = Application(router: buildRouter(repository: repository, devices: ServiceTestDatabase.devices))
            try await app.test(.router) { testClient in
                try await body(harness, testClient)
            }
        }
    }

    /// `SELECT count(*)::int …` (the query must return one integer).
    func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await db.query(query, logger: ServiceTestDatabase.logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}

extension TestClientProtocol {
    /// One request; `json` is sent verbatim as the body.
    func send(
        _ method: HTTPRequest.Method, _ uri: String, key: String?, json: String? = nil, headers extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        var headers = extra
        if let key { headers[.authorization] = "Bearer \(key)" }
        if json != nil { headers[.contentType] = "application/json" }
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    /// The body as `T`, expecting `status`.
    func decode<T: Decodable>(
        _ type: T.Type, status expected: HTTPResponse.Status = .ok, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> T {
        #expect(status == expected, "\(text)", sourceLocation: sourceLocation)
        return try AdminJSON.decoder().decode(T.self, from: Data(text.utf8))
    }

    /// The problem+json body, expecting `status` and the problem+json media type.
    @discardableResult
    func problem(_ expected: HTTPResponse.Status, sourceLocation: SourceLocation = #_sourceLocation) throws -> ProblemDetails {
        #expect(status == expected, "\(text)", sourceLocation: sourceLocation)
        #expect(headers[.contentType] == ProblemDetails.mediaType, sourceLocation: sourceLocation)
        let problem = try JSONDecoder().decode(ProblemDetails.self, from: Data(text.utf8))
        #expect(problem.status == expected.code, sourceLocation: sourceLocation)
        return problem
    }
}

/// Bodies of valid entities.
enum Sample {
    static func site(organizationId: String, name: String, id: String? = nil) -> String {
        """
        {\(id.map { "\"id\":\"\($0)\"," } ?? "")"organizationId":"\(organizationId)","name":"\(name)","timezone":"Asia/Ho_Chi_Minh",
         "geofence":{"latitude":10.7769,"longitude":106.7009,"radiusMeters":200},
         "shift":{"start":"08:30","end":"17:30","checkInBeforeStartMinutes":60,"checkOutAfterEndMinutes":120,
                  "lateEntryGraceMinutes":10,"earlyExitGraceMinutes":5}}
        """
    }
}

/// A UUID that is not on the ban list.
func allowedUUID() -> UUID {
    while true {
        let uuid = UUID()
        if BanList.check(uuid) == nil { return uuid }
    }
}

/// Decoding helpers for responses whose type is not public API.
struct PageBody<Item: Decodable>: Decodable {
    var items: [Item]
    var nextCursor: String?
}

struct IdOnly: Decodable {
    var id: String
}
