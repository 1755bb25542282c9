import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import LocalStackTesting
import PostgresNIO
import RegistryTestFixtures
import ServiceRuntime
import Testing

/// Every test that uses the real PostgreSQL is nested in this suite. Each nested suite runs its tests
/// one at a time (each opens a pool of up to 20 connections on a shared machine and database); the
/// nested suites run beside each other, each test in a schema of its own.
@Suite("Beacon registry on the local PostgreSQL", .timeLimit(.minutes(3)))
struct RegistryDatabaseTests {}

extension RegistryDatabaseTests {
    @Suite("Migrations", .serialized)
    struct Migrations {
        @Test func migrationsAreBundledAndApplyingThemAgainIsANoOp() async throws {
            let bundled = try ServiceMigrations.registry.load()
            #expect(bundled.map(\.version) == Array(1...13))
            #expect(
                bundled.map(\.name) == [
                    "registry", "beacon_keys", "round_the_clock_shifts", "change_outbox_notify", "change_outbox_shared_notify",
                    "beacon_key_grace", "feed_refill_markers", "site_detection_configs", "enrollment_installation",
                    "sightings_seen_at_index", "change_outbox_latest_only", "site_shift_history",
                    "user_sites_changed_at",
                ])
            try await LocalStack.withMigratedSchema(.registry, prefix: "registry_test") { client, schema in
                // The harness applied them already; both entry points now find nothing to do.
                let logger = RegistryTestDatabase.logger
                #expect(try await ServiceMigrations.registry.apply(client: client, schema: schema, logger: logger).isEmpty)
                let series = ServiceMigrations.registry.series(schema: schema)
                let runner = MigrationRunner(
                    service: series, migrations: try ServiceMigrations.registry.load(schema: schema), client: client, logger: logger)
                #expect(try await runner.run().isEmpty)
                let recorded = try await client.query(
                    "SELECT count(*)::int FROM schema_migrations WHERE service = \(series)", logger: logger)
                for try await count in recorded.decode(Int.self) { #expect(count == bundled.count) }
            }
        }

        @Test func shardPoolHoldsSixtyFourDistinctAllowedVersion4UUIDs() async throws {
            try await RegistryTestDatabase.withClient { client in
                var uuids: [UUID] = []
                let rows = try await client.query(
                    "SELECT uuid FROM shard_pool ORDER BY position", logger: RegistryTestDatabase.logger)
                for try await uuid in rows.decode(UUID.self) { uuids.append(uuid) }
                #expect(uuids.count == 64)
                #expect(Set(uuids).count == 64)
                for uuid in uuids {
                    #expect(BanList.check(uuid) == nil, "\(uuid)")
                    #expect(Array(uuid.uuidString)[14] == "4", "\(uuid) is not a version 4 UUID")
                }
            }
        }

        @Test func sqlBanListAgreesWithBanList() async throws {
            try await RegistryTestDatabase.withClient { client in
                let samples = BanList.entries.map { UUID(uuidString: $0.prefix + "-0000-4000-8000-000000000001")! } + [allowedUUID()]
                for uuid in samples {
                    let rows = try await client.query("SELECT is_banned_uuid(\(uuid))", logger: RegistryTestDatabase.logger)
                    for try await banned in rows.decode(Bool.self) { #expect(banned == (BanList.check(uuid) != nil), "\(uuid)") }
                }
            }
        }

        @Test func databaseItselfRefusesBannedUUIDsAndBadRanges() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let gateId = fixture.gate.id
                let banned = UUID(uuidString: "FDA50693-A4E2-4FB1-AFCF-C6EB07647825")!
                // Straight SQL, bypassing the repository's checks: the constraints still hold.
                await #expect(throws: PSQLError.self) {
                    try await client.query(
                        "INSERT INTO beacons (id, uuid, major, minor, gate_id) VALUES ('bcn_sql_banned', \(banned), 1, 1, \(gateId))",
                        logger: RegistryTestDatabase.logger
                    )
                }
                await #expect(throws: PSQLError.self) {
                    try await client.query(
                        "INSERT INTO beacons (id, uuid, major, minor, gate_id) VALUES ('bcn_sql_range', \(allowedUUID()), 65536, 1, \(gateId))",
                        logger: RegistryTestDatabase.logger
                    )
                }
                await #expect(throws: PSQLError.self) {
                    try await client.query(
                        "UPDATE sites SET geofence_radius_m = 5 WHERE id = \(fixture.site.id)", logger: RegistryTestDatabase.logger
                    )
                }
            }
        }
    }
}
