import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import PolicyService
import ServiceRuntime
import SessionMergerService
import TelemetryAggregatorService
import Testing

/// Every service's migrations, loaded the one way (`ServiceMigrations`), for the production schema:
/// the text must be exactly what deployments already applied, or every one of them would refuse to
/// start ("changed after it was applied"). The pinned checksums are those recorded in
/// `schema_migrations` by the releases that applied them.
@Suite("Migration checksums of the production schemas")
struct MigrationChecksumTests {
    static let applied: [String: [String]] = [
        "beacon-registry": [
            "a5a1ecce8a1878176ebfd6965fac772d715af81290dd0fecf28aff9343ab1efe",
            "2d67c6403e326fc9c111017fb00f9a44eb9037a9e50be2e34da13b38f5706dc9",
            "8f3f5b33513934792c18453e5c428732f4a89b866ba4d09b0d1f50b24df42a53",
            "8c32b708f336dc923a48574ec06992be28f28d3a3789f28b560cc3f629075fe3",
        ],
        "session-merger": [
            "0816b01a9795d16e7846155b244760f6ee7629d08b3091c06094a4dd7e13af9f",
            "2d169955086800f5ae4f568d0ff2cde11a2c62cd356ee421686bffa47c6b50f0",
            "75499d21425f90a6b0cb7c7c69dacea786bc73d078084c4070b375dde396e29b",
            "3743e6285f97bf7a7b7da7ba41f0c5528b908e856cd3cd71d235758ed5ee6e9e",
            // 0005: its statements are now `StoredOffsetsTable.byLaneMigration`, named by a placeholder.
            "102e8cf5b51eea98c19403c296757011a6b206948f0adc55d0d20e408c5cc2ac",
        ],
        "telemetry-aggregator": [
            "e59ea607b073bcd3741d116966266659e75200f15574d0421f0ccc9866764bc2",
            // 0002: the same statements as the merger's 0005, from the same placeholder.
            "d9ae371007ba9af7cbb50175a1a2e5cb9bb509c46689d292af2ce30f8080546d",
        ],
        "policy-service": [
            "152a522673a1f194d91dd6234cd10ebae680a1631edfec7a4ea4c688a2101f98",
            "93d7959edc57452cd7c3d157e2c9a8c183b4b59db6529f89b175102b8b06342b",
        ],
    ]

    @Test(arguments: [ServiceMigrations.registry, .merger, .telemetry, .policy])
    func theProductionSchemaIsWhatWasApplied(_ migrations: ServiceMigrations) throws {
        let pinned = try #require(Self.applied[migrations.service])
        let loaded = try migrations.load()
        // A new migration appends; the applied ones keep their text.
        #expect(loaded.count >= pinned.count)
        #expect(Array(loaded.prefix(pinned.count).map(\.checksum)) == pinned)
        #expect(loaded.allSatisfy { !$0.sql.contains(ServiceMigrations.schemaPlaceholder) })
        #expect(loaded.allSatisfy { migration in ServiceMigrations.fragments.keys.allSatisfy { !migration.sql.contains($0) } })
    }

    @Test(arguments: [ServiceMigrations.registry, .merger, .telemetry, .policy])
    func anotherSchemaIsBuiltThereAndRecordedAsItsOwnSeries(_ migrations: ServiceMigrations) throws {
        let loaded = try migrations.load(schema: "suite_x1")
        #expect(loaded.first?.sql.contains("CREATE SCHEMA IF NOT EXISTS suite_x1") == true)
        #expect(migrations.series(schema: "suite_x1") == "\(migrations.service)@suite_x1")
        #expect(migrations.series(schema: migrations.defaultSchema) == migrations.service)
    }

    @Test(arguments: ["", "Merger", "1abc", "a-b", "a;drop", String(repeating: "a", count: 64)])
    func aSchemaNameThatCannotBeSplicedIntoSQLIsRefused(_ name: String) {
        let error = #expect(throws: MigrationError.self) { try ServiceMigrations.merger.load(schema: name) }
        #expect(error?.description.hasPrefix("invalid schema name \"\(name)\" for ") == true, "\(String(describing: error))")
    }
}
