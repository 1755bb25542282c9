import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryDatabaseTests {
    /// The registry owns the beacons' GATT keys: created with the beacon, stored and
    /// published sealed, shown in plain text only through `beaconGattKey`, rotated on demand.
    @Suite("Beacon GATT keys", .serialized)
    struct BeaconKeys {
        static let sealer = BeaconKeySealer(sealingKey: Array(repeating: 0x5A, count: 32))!

        static func withKeyedRepository<T: Sendable>(
            _ body: (PostgresRegistryRepository, PostgresClient) async throws -> T
        ) async throws -> T {
            try await RegistryTestDatabase.withClient { client in
                let repository = PostgresRegistryRepository(
                    client: client, logger: RegistryTestDatabase.logger, tokenSigner: RegistryTestDatabase.signer, beaconKeySealer: sealer
                )
                return try await body(repository, client)
            }
        }

        /// The sealed key of the latest beacon record in the outbox.
        static func publishedKey(_ client: PostgresClient, beaconId: String, member: String = "gattKey") async throws -> SealedBeaconKey? {
            let rows = try await outboxRows(client, type: "beacon", id: beaconId)
            let payload = try ProtocolCodec.wire.decode(JSONValue.self, from: try #require(rows.last?.payload))
            return try payload[member].map { try $0.decode(as: SealedBeaconKey.self) }
        }

        @Test func aRegisteredBeaconGetsARandomKeyPublishedSealedAndShownToTheInstaller() async throws {
            try await Self.withKeyedRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let first = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 1, minor: 1, gateId: fixture.gate.id))
                let second = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 1, minor: 2, gateId: fixture.gate.id))
                let key = try #require(try await repository.beaconGattKey(beaconId: first.id))
                #expect(key.version == 1)
                #expect(key.key.count == 32)
                #expect(try await repository.beaconGattKey(beaconId: second.id)?.key != key.key)

                // On the feed: sealed, opening only for this beacon, to the same key.
                let published = try #require(try await Self.publishedKey(client, beaconId: first.id))
                #expect(published.version == 1)
                #expect(!published.sealed.contains(Data(key.key).base64EncodedString()))
                #expect(Self.sealer.open(published, beaconId: first.id) == key.key)
                #expect(Self.sealer.open(published, beaconId: second.id) == nil)
                #expect(BeaconKeySealer(sealingKey: Array(repeating: 1, count: 32))!.open(published, beaconId: first.id) == nil)
                // At rest: the same box, never the key.
                let stored = try await client.query(
                    "SELECT sealed_key FROM beacon_keys WHERE beacon_id = \(first.id)", logger: RegistryTestDatabase.logger
                ).collect()
                #expect(try stored.first?.decode(String.self) == published.sealed)

                // A status change publishes the beacon again, key included (the feed keeps the last record).
                _ = try await repository.updateBeaconStatus(beaconId: first.id, status: .lost)
                #expect(try await Self.publishedKey(client, beaconId: first.id) == published)
            }
        }

        @Test func rotationCreatesANewVersionAndPublishesIt() async throws {
            try await Self.withKeyedRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let beacon = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 2, minor: 1, gateId: fixture.gate.id))
                let before = try #require(try await repository.beaconGattKey(beaconId: beacon.id))
                let rotation = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 168, force: false)
                #expect(rotation.beaconId == beacon.id)
                #expect(rotation.version == 2)
                let after = try #require(try await repository.beaconGattKey(beaconId: beacon.id))
                #expect(after.version == 2)
                #expect(after.key != before.key)
                let published = try #require(try await Self.publishedKey(client, beaconId: beacon.id))
                #expect(published.version == 2)
                #expect(published.validUntil == nil)
                #expect(Self.sealer.open(published, beaconId: beacon.id) == after.key)
                // The replaced key is published beside it until the grace ends: the beacon signs with
                // it until an installer writes the new one.
                let graceEnd = try #require(rotation.previousKeyValidUntil)
                #expect(abs(graceEnd.timeIntervalSince(rotation.rotatedAt) - 168 * 3_600) < 0.001)
                let previous = try #require(try await Self.publishedKey(client, beaconId: beacon.id, member: "previousGattKey"))
                // On the feed to the millisecond.
                #expect(previous.version == 1)
                #expect(abs(try #require(previous.validUntil).timeIntervalSince(graceEnd)) < 0.001)
                #expect(Self.sealer.open(previous, beaconId: beacon.id) == before.key)
                // A status change publishes both again (the feed keeps only the last record).
                _ = try await repository.updateBeaconStatus(beaconId: beacon.id, status: .lost)
                #expect(try await Self.publishedKey(client, beaconId: beacon.id, member: "previousGattKey") == previous)

                // Within the grace a new rotation is refused: the beacon holds version 1 or 2, whichever
                // the installer got to, and only one replaced key is kept.
                do {
                    _ = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 168, force: false)
                    Issue.record("a rotation within the grace was accepted")
                } catch {
                    guard case .beaconKeyInGrace(let id, let until)? = error as? RegistryError else { Issue.record("\(error)"); return }
                    #expect(id == beacon.id && abs(until.timeIntervalSince(graceEnd)) < 0.001)
                    #expect((error as? RegistryError)?.problemDetails.status == 409)
                }
                #expect(try await repository.beaconGattKey(beaconId: beacon.id)?.version == 2)

                // A leaked key is replaced with no grace, grace or not: nothing but the new key is published.
                let immediate = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 0, force: false)
                #expect(immediate.version == 3 && immediate.previousKeyValidUntil == nil)
                #expect(try await Self.publishedKey(client, beaconId: beacon.id)?.version == 3)
                #expect(try await Self.publishedKey(client, beaconId: beacon.id, member: "previousGattKey") == nil)
                // A rotation keeps only the key it replaces (version 3), not the one before.
                let third = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 1, force: false)
                #expect(third.version == 4)
                #expect(try await Self.publishedKey(client, beaconId: beacon.id, member: "previousGattKey")?.version == 3)
                // `force`: the installer wrote version 4, so that is the key to keep.
                let forced = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 1, force: true)
                #expect(forced.version == 5 && forced.previousKeyValidUntil != nil)
                #expect(try await Self.publishedKey(client, beaconId: beacon.id, member: "previousGattKey")?.version == 4)
            }
        }

        @Test func badRotationsAreTypedErrors() async throws {
            try await Self.withKeyedRepository { repository, _ in
                let missing = "bcn_missing_\(UInt32.random(in: 0...UInt32.max))"
                do {
                    _ = try await repository.rotateBeaconKey(beaconId: missing, graceHours: 168, force: false)
                    Issue.record("an unknown beacon was rotated")
                } catch {
                    #expect(error as? RegistryError == .notFound(.beacon, id: missing))
                }
                do {
                    _ = try await repository.rotateBeaconKey(beaconId: "bad id!", graceHours: 168, force: false)
                    Issue.record("a malformed id was accepted")
                } catch {
                    guard case .invalidInput(let errors)? = error as? RegistryError else { Issue.record("\(error)"); return }
                    #expect(errors.map(\.field) == ["beaconId"])
                }
                for graceHours in [-1, 721] {
                    do {
                        _ = try await repository.rotateBeaconKey(beaconId: missing, graceHours: graceHours, force: false)
                        Issue.record("a grace of \(graceHours) hours was accepted")
                    } catch {
                        guard case .invalidInput(let errors)? = error as? RegistryError else { Issue.record("\(error)"); return }
                        #expect(errors.map(\.field) == ["graceHours"])
                    }
                }
            }
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let beacon = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 4, minor: 1, gateId: fixture.gate.id))
                do {
                    _ = try await repository.rotateBeaconKey(beaconId: beacon.id, graceHours: 168, force: false)
                    Issue.record("a registry without a sealing key rotated a key")
                } catch {
                    #expect(error as? RegistryError == .beaconKeysNotConfigured)
                    #expect(RegistryError.beaconKeysNotConfigured.problemDetails.status == 503)
                }
            }
        }

        @Test func beaconsWithoutAKeyAreBackfilled() async throws {
            try await RegistryTestDatabase.withClient { client in
                // Registered while the registry had no sealing key (as before this feature).
                let unkeyed = PostgresRegistryRepository(
                    client: client, logger: RegistryTestDatabase.logger, tokenSigner: RegistryTestDatabase.signer)
                let fixture = try await RegistryFixture.make(unkeyed)
                let beaconId = try await unkeyed.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 3, minor: 1, gateId: fixture.gate.id)
                ).id
                let repository = PostgresRegistryRepository(
                    client: client, logger: RegistryTestDatabase.logger, tokenSigner: RegistryTestDatabase.signer,
                    beaconKeySealer: Self.sealer)
                #expect(try await repository.beaconGattKey(beaconId: beaconId) == nil)
                #expect(try await Self.publishedKey(client, beaconId: beaconId) == nil)
                #expect(try await repository.backfillBeaconKeys(beaconIds: [beaconId]) == 1)
                let key = try #require(try await repository.beaconGattKey(beaconId: beaconId))
                #expect(key.version == 1)
                let published = try #require(try await Self.publishedKey(client, beaconId: beaconId))
                #expect(Self.sealer.open(published, beaconId: beaconId) == key.key)
                // Idempotent.
                #expect(try await repository.backfillBeaconKeys(beaconIds: [beaconId]) == 0)
            }
        }
    }
}
