import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import LocalStackTesting
import Logging
import PostgresNIO
import ServiceRuntime

/// The real local PostgreSQL (started by `deploy/local/stack.sh start`, as the integration tests
/// do) with the registry migrations applied to a schema of the test's own.
enum RegistryTestDatabase {
    static let logger = LocalStack.logger(label: "registry-tests")

    static let signer: DeviceTokenSigner = {
        let key = try! DeviceSigningKey(id: "test-2025", secret: Array(repeating: 7, count: 32))
        return try! DeviceTokenSigner(activeKey: key)
    }()

    /// A client running for the duration of `body`, over a schema of its own built by the registry's
    /// migrations (`LocalStack.withMigratedSchema`).
    static func withClient<T: Sendable>(_ body: (PostgresClient) async throws -> T) async throws -> T {
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_test") { client, _ in try await body(client) }
    }

    /// A repository over a fresh client; `now` is its clock.
    static func withRepository<T: Sendable>(
        now: @escaping @Sendable () -> Date = { Date() },
        _ body: (PostgresRegistryRepository, PostgresClient) async throws -> T
    ) async throws -> T {
        try await withClient { client in
            try await body(PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer, now: now), client)
        }
    }
}

/// A UUID that is not on the ban list (a random v4 UUID starts with a banned prefix with
/// probability about 7 / 2^32; redraw to be exact).
func allowedUUID() -> UUID {
    while true {
        let uuid = UUID()
        if BanList.check(uuid) == nil { return uuid }
    }
}

/// Rows of `change_outbox` for one entity, oldest first: (op, payload as JSON text).
func outboxRows(_ client: PostgresClient, type: String, id: String) async throws -> [(op: String, payload: String?)] {
    let rows = try await client.query(
        "SELECT op, payload::text FROM change_outbox WHERE entity_type = \(type) AND entity_id = \(id) ORDER BY id",
        logger: RegistryTestDatabase.logger
    )
    var result: [(String, String?)] = []
    for try await (op, payload) in rows.decode((String, String?).self) { result.append((op, payload)) }
    return result
}
