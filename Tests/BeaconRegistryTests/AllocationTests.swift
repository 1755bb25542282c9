import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryDatabaseTests {
    @Suite("Shard allocation under concurrency", .serialized)
    struct Allocation {
        @Test func hundredParallelMinorAllocationsForOneGateGetMinorsOneToHundred() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let allocations = try await withThrowingTaskGroup(of: MinorAllocation.self) { group in
                    for _ in 0..<100 {
                        group.addTask { try await repository.allocateMinor(gateId: fixture.gate.id) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(allocations.map(\.minor).sorted() == Array(1...100))
                let namespace = try await repository.allocateNamespace(organizationId: fixture.organization.id)
                #expect(allocations.allSatisfy { $0.uuid == namespace.uuid && $0.major == namespace.major && $0.gateId == fixture.gate.id })
                // One outbox row per allocation, plus the namespace allocated on the way.
                let minorRows = try await client.query(
                    """
                    SELECT count(*)::int FROM change_outbox
                    WHERE entity_type = 'minor' AND entity_id LIKE \(namespace.key + ":%")
                    """, logger: RegistryTestDatabase.logger
                )
                for try await count in minorRows.decode(Int.self) { #expect(count == 100) }
                #expect(try await outboxRows(client, type: "namespace", id: namespace.key).count == 1)
            }
        }

        @Test func hundredParallelNamespaceAllocationsForHundredOrganizationsNeverCollide() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                var organizations: [Organization] = []
                for i in 0..<100 {
                    organizations.append(
                        try await repository.createOrganization(NewOrganization(name: "Parallel \(i) \(UUID().uuidString.prefix(6))")))
                }
                let namespaces = try await withThrowingTaskGroup(of: BusinessNamespace.self) { group in
                    for organization in organizations {
                        group.addTask { try await repository.allocateNamespace(organizationId: organization.id) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(namespaces.count == 100)
                #expect(Set(namespaces.map(\.key)).count == 100)
                #expect(Set(namespaces.map(\.organizationId)) == Set(organizations.map(\.id)))
                #expect(namespaces.allSatisfy { (1...65_535).contains($0.major) && BanList.check($0.uuid) == nil })
                // Every namespace UUID is a shard of the pool.
                let pool = try await client.query("SELECT uuid FROM shard_pool", logger: RegistryTestDatabase.logger)
                var shards = Set<UUID>()
                for try await uuid in pool.decode(UUID.self) { shards.insert(uuid) }
                #expect(namespaces.allSatisfy { shards.contains($0.uuid) })
            }
        }

        @Test func twentyParallelAllocationsForOneOrganizationAgreeOnOneNamespace() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let organization = try await repository.createOrganization(NewOrganization(name: "Same org"))
                let namespaces = try await withThrowingTaskGroup(of: BusinessNamespace.self) { group in
                    for _ in 0..<20 {
                        group.addTask { try await repository.allocateNamespace(organizationId: organization.id) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(Set(namespaces).count == 1)
                let stored = try await client.query(
                    "SELECT count(*)::int FROM namespaces WHERE organization_id = \(organization.id)",
                    logger: RegistryTestDatabase.logger
                )
                for try await count in stored.decode(Int.self) { #expect(count == 1) }
                // Only the allocation that created it wrote a change.
                #expect(try await outboxRows(client, type: "namespace", id: namespaces[0].key).count == 1)
            }
        }

        @Test func theLowestFreeMinorIsReused() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                for expected in 1...3 { #expect(try await repository.allocateMinor(gateId: fixture.gate.id).minor == expected) }
                let namespace = try await repository.allocateNamespace(organizationId: fixture.organization.id)
                // Free minor 2 behind the repository's back (no release operation exists yet).
                try await client.query(
                    "DELETE FROM minor_allocations WHERE uuid = \(namespace.uuid) AND major = \(namespace.major) AND minor = 2",
                    logger: RegistryTestDatabase.logger
                )
                #expect(try await repository.allocateMinor(gateId: fixture.gate.id).minor == 2)
                #expect(try await repository.allocateMinor(gateId: fixture.gate.id).minor == 4)
            }
        }

        @Test func gatesOfOneOrganizationShareItsNamespace() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let otherSite = try await repository.createSite(
                    NewSite.dayShift(organizationId: fixture.organization.id, name: "Warehouse"))
                let otherGate = try await repository.createGate(NewGate(siteId: otherSite.id, name: "Dock"))
                let first = try await repository.allocateMinor(gateId: fixture.gate.id)
                let second = try await repository.allocateMinor(gateId: otherGate.id)
                #expect(first.uuid == second.uuid && first.major == second.major)
                #expect(first.minor == 1 && second.minor == 2)
                #expect(second.gateId == otherGate.id)
            }
        }

        /// A beacon registered in the namespace without an allocation holds its minor: the next
        /// allocation skips it rather than handing another gate an identity already broadcast.
        @Test func aMinorABeaconBroadcastsIsNotAllocatedAgain() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let namespace = try await repository.allocateNamespace(organizationId: fixture.organization.id)
                #expect(try await repository.allocateMinor(gateId: fixture.gate.id).minor == 1)
                _ = try await repository.registerBeacon(
                    NewBeacon(uuid: namespace.uuid.uuidString, major: namespace.major, minor: 2, gateId: fixture.gate.id))
                let otherGate = try await repository.createGate(NewGate(siteId: fixture.site.id, name: "Back door"))
                #expect(try await repository.allocateMinor(gateId: otherGate.id).minor == 3)
            }
        }

        /// Another organization's (uuid, major) is not registered at a gate of this one: lookups would
        /// name the other organization as the beacon's business.
        @Test func aBeaconInAnotherOrganizationsNamespaceIsRefused() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let mine = try await RegistryFixture.make(repository)
                let theirs = try await RegistryFixture.make(repository)
                let their = try await repository.allocateNamespace(organizationId: theirs.organization.id)
                let identity = BeaconIdentity(uuid: their.uuid, major: their.major, minor: 9)
                await #expect(throws: RegistryError.namespaceOfAnotherOrganization(identity, organizationId: theirs.organization.id)) {
                    try await repository.registerBeacon(
                        NewBeacon(uuid: their.uuid.uuidString, major: their.major, minor: 9, gateId: mine.gate.id))
                }
            }
        }

        /// A shard UUID with a major no organization holds yet: the next allocation could hand that
        /// namespace, the beacon in it, to another organization. A customer's own UUID stays welcome.
        @Test func aBeaconInANamespaceNobodyHoldsIsRefused() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let mine = try await RegistryFixture.make(repository)
                let held = try await repository.allocateNamespace(organizationId: mine.organization.id)
                // The first shard UUID with its last major: no test allocates that far.
                let rows = try await client.query(
                    "SELECT uuid FROM shard_pool ORDER BY position LIMIT 1", logger: RegistryTestDatabase.logger)
                var pool: UUID?
                for try await uuid in rows.decode(UUID.self) { pool = uuid }
                let shard = try #require(pool)
                let identity = BeaconIdentity(uuid: shard, major: 65_535, minor: 1)
                await #expect(throws: RegistryError.namespaceNotAllocated(identity)) {
                    try await repository.registerBeacon(NewBeacon(uuid: shard.uuidString, major: 65_535, minor: 1, gateId: mine.gate.id))
                }
                #expect(RegistryError.namespaceNotAllocated(identity).problemDetails.status == 409)
                _ = try await repository.registerBeacon(
                    NewBeacon(uuid: held.uuid.uuidString, major: held.major, minor: 1, gateId: mine.gate.id))
                _ = try await repository.registerBeacon(NewBeacon(uuid: allowedUUID().uuidString, major: 1, minor: 1, gateId: mine.gate.id))
            }
        }

        @Test func unknownOrganizationOrGateIsNotFound() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                await #expect(throws: RegistryError.notFound(.organization, id: "org_missing")) {
                    try await repository.allocateNamespace(organizationId: "org_missing")
                }
                await #expect(throws: RegistryError.notFound(.gate, id: "gate_missing")) {
                    try await repository.allocateMinor(gateId: "gate_missing")
                }
            }
        }
    }
}
