import AccessControl
import AttendanceCtlCommands
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import Testing

/// `attendancectl api-keys mint`: a key made straight in the registry's PostgreSQL works as a bearer
/// key, and its secret lands in the file asked for.
@Suite("API key minting (break-glass)")
struct APIKeyMintTests {
    @Test func aMintedKeyVerifiesWithItsRoleAndIsWrittenToTheSecretFile() async throws {
        try LocalStack.ensureStarted()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("minted-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        // The registry's tables in a schema of this test's own, named to the CLI as to the registry.
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_mint") { postgres, schema in
            let run = await runCLI(
                ["api-keys", "mint", "--name", "ctl-test mint", "--role", "installer", "--secret-file", file, "--json"],
                environment: ["REGISTRY_SCHEMA": schema])
            #expect(run.code == 0, "\(run)")
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: String]])
            let secret = try #require(rows.first?["secret"])
            #expect(rows.first?["role"] == "installer" && rows.first?["name"] == "ctl-test mint")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == secret + "\n")
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

            let signer = try DeviceTokenSigner(activeKey: .random(id: "unused"))
            let repository = PostgresRegistryRepository(client: postgres, logger: LiveRegistry.logger, tokenSigner: signer)
            let verified = try await repository.verifyAPIKey(secret)
            #expect(verified?.role == .installer && verified?.name == "ctl-test mint")
            _ = try await repository.revokeAPIKey(id: try #require(verified?.id))
        }
    }

    @Test("a database setting naming no readable file is an error, never the defaults' database")
    func anUnreadableDatabaseURLFileIsAnError() async {
        let run = await runCLI(
            ["api-keys", "mint", "--name", "ops"],
            // Empty is unset: the suite's own DATABASE_URL would otherwise win over the file.
            environment: ["DATABASE_URL": "", "DATABASE_URL_FILE": "/nonexistent/db-url-\(UUID().uuidString)"])
        #expect(run.code == 1 && run.stderr.contains("DATABASE_URL_FILE"), "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
    }

    @Test("a database that refuses the connection is one line with the reason, within seconds")
    func aRefusedConnectionFailsAtOnceWithItsReason() async throws {
        // A port nothing listens on: the pool alone would retry for about a minute and name only its breaker.
        let start = ContinuousClock.now
        let run = await runCLI(
            ["api-keys", "mint", "--name", "ops"], environment: ["DATABASE_URL": "postgres://attendance:x@127.0.0.1:9/attendance"])
        #expect(run.code == 1, "\(run)")
        #expect(run.stderr.contains("cannot connect to PostgreSQL at 127.0.0.1:9/attendance"), "\(run)")
        #expect(!run.stderr.contains("CircuitBreaker"), "\(run)")
        // Well under the pool's own retrying (about a minute), even on a loaded machine.
        #expect(ContinuousClock.now - start < .seconds(45), "\(run)")
    }

    @Test func aBadRoleOrAnEmptyNameIsOneErrorLine() async {
        let role = await runCLI(["api-keys", "mint", "--name", "x", "--role", "root"])
        #expect(role.code == 64 && role.stderr.contains("--role must be one of viewer, installer, admin"), "\(role)")
        let name = await runCLI(["api-keys", "mint", "--name", "  "])
        #expect(name.code == 64 && name.stderr.contains("--name must be 1 to 200 characters"), "\(name)")
    }
}
