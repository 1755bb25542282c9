import AttendanceProtocol
import BeaconRegistryStore
import Foundation
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import SessionMergerService
import Testing

extension SessionMergerServiceTests {
    /// `session-merger migrate`, the built executable: the operator's way to migrate ahead of a deploy
    /// (every service takes the same command line through `ServiceKit`).
    @Suite("session-merger migrate", .timeLimit(.minutes(2)))
    struct MigrateCommandTests {
        let logger = LocalStack.logger(label: "merger-migrate-tests")

        /// Runs the executable (the merger's unless `product` names another) to its end; its status and
        /// what it printed. `unset` variables are taken out of the environment.
        func run(
            _ arguments: [String], environment: [String: String], unset: [String] = [], product: String = "session-merger"
        ) async throws -> (status: Int32, output: String) {
            let path = LocalStack.builtProduct(product).path
            try #require(
                FileManager.default.isExecutableFile(atPath: path), "no \(product) at \(path) (swift build --build-tests builds it)")
            var merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            for key in unset { merged[key] = nil }
            return try await LocalStack.run(path, arguments, environment: merged)
        }

        /// The merger's and the registry's schemas are parameters (`MERGER_SCHEMA`, `REGISTRY_SCHEMA`).
        @Test(arguments: [
            (product: "session-merger", variable: "MERGER_SCHEMA", migrations: ServiceMigrations.merger),
            (product: "beacon-registry", variable: "REGISTRY_SCHEMA", migrations: ServiceMigrations.registry),
        ])
        func migrateAppliesEveryMigrationIntoItsSchemaThenExitsWithoutServing(
            product: String, variable: String, migrations: ServiceMigrations
        ) async throws {
            try LocalStack.ensureStarted()
            let schema = "migrate_\(token())"
            let series = migrations.series(schema: schema)
            try await LocalStack.withPostgres { client in
                let (status, output) = try await run(
                    ["migrate"],
                    environment: [variable: schema, "LOG_LEVEL": "info", "HTTP_PORT": "0", "KAFKA_BROKERS": LocalStack.brokers],
                    product: product)
                var applied: [Int] = []
                for try await version in try await client.query(
                    "SELECT version FROM public.schema_migrations WHERE service = \(series) ORDER BY version", logger: logger
                ).decode(Int.self) {
                    applied.append(version)
                }
                try await client.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"), logger: logger)
                try await client.query("DELETE FROM public.schema_migrations WHERE service = \(series)", logger: logger)

                #expect(status == 0, "\(output)")
                #expect(applied == (try migrations.load(schema: schema)).map(\.version), "\(output)")
                #expect(output.contains("migrations applied"), "\(output)")
            }
        }

        /// The registry needs its device-token keys to serve, not to migrate: `migrate` ends before the
        /// service reads its secrets.
        @Test func migrateNeedsNoSecrets() async throws {
            try LocalStack.ensureStarted()
            let (status, output) = try await run(
                ["migrate"], environment: ["LOG_LEVEL": "info", "KAFKA_BROKERS": LocalStack.brokers],
                unset: ["DEVICE_TOKEN_KEYS", "DEVICE_TOKEN_KEYS_FILE", "BEACON_KEY_SEAL_KEY"], product: "beacon-registry")
            #expect(status == 0, "\(output)")
            #expect(output.contains("migrations applied"), "\(output)")
        }

        @Test func anArgumentItDoesNotTakeIsAUsageErrorWithExitCode64() async throws {
            let (status, output) = try await run(["migrat"], environment: [:])
            #expect(status == 64)
            #expect(output.contains("unknown arguments 'migrat'") && output.contains("session-merger migrate"), "\(output)")
        }
    }
}
