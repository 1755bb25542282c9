import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryDatabaseTests {
    @Suite("Beacons, ban list and broadcast verification", .serialized)
    struct Beacons {
        @Test func registeredBeaconIsStoredNormalizedAndPublished() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let minor = try await repository.allocateMinor(gateId: fixture.gate.id)
                let mac = Self.randomMAC()
                let beacon = try await repository.registerBeacon(
                    NewBeacon(
                        uuid: minor.uuid.uuidString.lowercased(), major: minor.major, minor: minor.minor, serial: " CP28-0001 ",
                        mac: mac.lowercased().replacingOccurrences(of: ":", with: "-"), txPower: -59, advIntervalMs: 1_000,
                        batteryReplacedOn: CalendarDate("2025-09-18"), gateId: fixture.gate.id
                    ))
                #expect(beacon.uuid == minor.uuid)
                #expect(beacon.mac == mac)
                #expect(beacon.serial == "CP28-0001")
                #expect(beacon.status == .active)
                #expect(beacon.batteryReplacedOn == CalendarDate(year: 2025, month: 9, day: 18))
                #expect(try await repository.beacon(id: beacon.id) == beacon)

                let changes = try await outboxRows(client, type: "beacon", id: beacon.id)
                #expect(changes.count == 1)
                #expect(changes.first?.op == "upsert")
                let published = try ProtocolCodec.wire.decode(Beacon.self, from: try #require(changes.first?.payload))
                #expect(published.identity == beacon.identity)
                #expect(published.mac == mac)
                #expect(published.batteryReplacedOn == beacon.batteryReplacedOn)
            }
        }

        @Test func everyBannedPrefixIsRefusedNamingItsVendorAndAGoodUUIDIsAccepted() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                for entry in BanList.entries {
                    let uuid = entry.prefix + "-0000-4000-8000-" + String(UUID().uuidString.suffix(12))
                    do {
                        _ = try await repository.registerBeacon(NewBeacon(uuid: uuid, major: 1, minor: 1, gateId: fixture.gate.id))
                        Issue.record("\(uuid) was accepted")
                    } catch let error as RegistryError {
                        #expect(error == .bannedUUID(entry))
                        let problem = error.problemDetails
                        #expect(problem.status == 422)
                        #expect(problem.type == ProblemType.bannedBeaconUUID.uri)
                        #expect(problem.detail?.contains(entry.vendor) == true)
                    }
                }
                let good = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 7, minor: 7, gateId: fixture.gate.id))
                #expect(good.status == .active)
                // Only the accepted beacon reached the outbox.
                let rows = try await client.query(
                    """
                    SELECT count(*)::int FROM change_outbox c
                    JOIN beacons b ON b.id = c.entity_id AND c.entity_type = 'beacon'
                    WHERE b.gate_id = \(fixture.gate.id)
                    """, logger: RegistryTestDatabase.logger
                )
                for try await count in rows.decode(Int.self) { #expect(count == 1) }
            }
        }

        @Test func duplicateIdentityOrMACIsRefusedAndNothingIsWritten() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let uuid = allowedUUID()
                let mac = Self.randomMAC()
                let first = try await repository.registerBeacon(
                    NewBeacon(uuid: uuid.uuidString, major: 10, minor: 3, mac: mac, gateId: fixture.gate.id))

                await #expect(throws: RegistryError.duplicateBeaconIdentity(first.identity)) {
                    try await repository.registerBeacon(
                        NewBeacon(id: "bcn_dup_identity_\(first.id)", uuid: uuid.uuidString, major: 10, minor: 3, gateId: fixture.gate.id))
                }
                await #expect(throws: RegistryError.duplicateMAC(mac)) {
                    try await repository.registerBeacon(
                        NewBeacon(
                            id: "bcn_dup_mac_\(first.id)", uuid: uuid.uuidString, major: 10, minor: 4,
                            mac: mac.lowercased().replacingOccurrences(of: ":", with: ""), gateId: fixture.gate.id
                        ))
                }
                await #expect(throws: RegistryError.alreadyExists(.beacon, id: first.id)) {
                    try await repository.registerBeacon(
                        NewBeacon(id: first.id, uuid: uuid.uuidString, major: 10, minor: 5, gateId: fixture.gate.id))
                }
                for refused in ["bcn_dup_identity_\(first.id)", "bcn_dup_mac_\(first.id)"] {
                    await #expect(throws: RegistryError.notFound(.beacon, id: refused)) { try await repository.beacon(id: refused) }
                    #expect(try await outboxRows(client, type: "beacon", id: refused).isEmpty)
                }
                #expect(RegistryError.duplicateMAC(mac).problemDetails.status == 409)
            }
        }

        @Test func aMinorAllocatedToAnotherGateIsRefused() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let otherGate = try await repository.createGate(NewGate(siteId: fixture.site.id, name: "Back door"))
                let minor = try await repository.allocateMinor(gateId: fixture.gate.id)
                await #expect(throws: RegistryError.minorAllocatedToAnotherGate(minor.identity, gateId: fixture.gate.id)) {
                    try await repository.registerBeacon(NewBeacon(identity: minor.identity, gateId: otherGate.id))
                }
                #expect(
                    try await repository.registerBeacon(NewBeacon(identity: minor.identity, gateId: fixture.gate.id)).gateId
                        == fixture.gate.id)
            }
        }

        @Test func invalidInputNamesEveryField() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                do {
                    _ = try await repository.registerBeacon(
                        NewBeacon(
                            id: "bad id", uuid: "not-a-uuid", major: 70_000, minor: -1, mac: "00:11:22", txPower: 40,
                            advIntervalMs: 5, gateId: "gate"
                        ))
                    Issue.record("accepted")
                } catch let error as RegistryError {
                    guard case .invalidInput(let errors) = error else { Issue.record("\(error)"); return }
                    #expect(Set(errors.map(\.field)) == ["id", "uuid", "major", "minor", "mac", "txPower", "advIntervalMs"])
                    #expect(error.problemDetails.status == 400)
                }
                await #expect(throws: RegistryError.notFound(.gate, id: "gate_missing")) {
                    try await repository.registerBeacon(
                        NewBeacon(uuid: allowedUUID().uuidString, major: 1, minor: 1, gateId: "gate_missing"))
                }
            }
        }

        @Test func statusChangesArePublished() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let beacon = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 1, minor: 2, gateId: fixture.gate.id))
                let lost = try await repository.updateBeaconStatus(beaconId: beacon.id, status: .lost)
                #expect(lost.status == .lost)
                #expect(try await repository.beacon(id: beacon.id).status == .lost)
                let changes = try await outboxRows(client, type: "beacon", id: beacon.id)
                #expect(changes.count == 2)
                #expect(try ProtocolCodec.wire.decode(Beacon.self, from: try #require(changes.last?.payload)).status == .lost)
                // The same status again (a retried request) changes nothing the policy dates a status by.
                try await Task.sleep(for: .milliseconds(20))
                #expect(try await repository.updateBeaconStatus(beaconId: beacon.id, status: .lost).updatedAt == lost.updatedAt)
                #expect(try await repository.updateBeaconStatus(beaconId: beacon.id, status: .retired).updatedAt > lost.updatedAt)
                await #expect(throws: RegistryError.notFound(.beacon, id: "bcn_missing")) {
                    try await repository.updateBeaconStatus(beaconId: "bcn_missing", status: .retired)
                }
            }
        }

        @Test func broadcastIsVerifiedBySightingsInsideTheWindow() async throws {
            let now = Date(timeIntervalSince1970: 1_760_000_000)
            try await RegistryTestDatabase.withRepository(now: { now }) { repository, client in
                let beacon = BeaconIdentity(uuid: allowedUUID(), major: 42, minor: 7)
                let unseen = try await repository.verifyBroadcast(beacon, withinMinutes: 5)
                #expect(unseen == BroadcastVerification(verified: false, lastSeen: nil, deviceCount: 0, windowMinutes: 5))

                let sightings: [(String, TimeInterval)] = [("dev_a", -30 * 60), ("dev_b", -180), ("dev_c", -120), ("dev_b", -50)]
                for (device, offset) in sightings {
                    try await repository.recordSighting(
                        BeaconSighting(beacon: beacon, deviceId: device, seenAt: now.addingTimeInterval(offset)))
                }
                // Another beacon's sightings do not count.
                try await repository.recordSighting(
                    BeaconSighting(
                        beacon: BeaconIdentity(uuid: beacon.uuid, major: 42, minor: 8), deviceId: "dev_z", seenAt: now
                    ))

                // A time far ahead of the clock (it would keep the beacon verified for years), or over a
                // week old, is refused by the admin route and skipped by the collector's bulk insert.
                for offset: TimeInterval in [600, 365 * 86_400, -8 * 86_400] {
                    let sighting = BeaconSighting(beacon: beacon, deviceId: "dev_f", seenAt: now.addingTimeInterval(offset))
                    await #expect(throws: RegistryError.self) { try await repository.recordSighting(sighting) }
                    #expect(try await repository.recordSightings([sighting]) == 0)
                }

                let fiveMinutes = try await repository.verifyBroadcast(beacon, withinMinutes: 5)
                #expect(fiveMinutes.verified)
                #expect(fiveMinutes.deviceCount == 2)
                #expect(fiveMinutes.lastSeen == now.addingTimeInterval(-50))
                #expect(try await repository.verifyBroadcast(beacon, withinMinutes: 1).deviceCount == 1)
                #expect(try await repository.verifyBroadcast(beacon, withinMinutes: 60).deviceCount == 3)

                // An hour later nothing is inside a 5-minute window, but the last sighting is still known.
                let later = PostgresRegistryRepository(
                    client: client, logger: RegistryTestDatabase.logger,
                    tokenSigner: RegistryTestDatabase.signer, now: { now.addingTimeInterval(3_600) }
                )
                let stale = try await later.verifyBroadcast(beacon, withinMinutes: 5)
                #expect(
                    stale == BroadcastVerification(verified: false, lastSeen: now.addingTimeInterval(-50), deviceCount: 0, windowMinutes: 5)
                )

                await #expect(throws: RegistryError.self) { try await repository.verifyBroadcast(beacon, withinMinutes: 0) }
            }
        }

        /// A phone of another organization that reports a beacon (its user has no site there) does not
        /// make it look alive; a phone of the beacon's organization, and an installer's tool the registry
        /// does not know, do.
        @Test func onlyTheBeaconsOrganizationsPhonesVerifyIt() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let theirs = try await BeaconedSite.make(repository)
                let other = try await RegistryFixture.make(repository)
                let outsider = try await repository.enrolledUser(name: "Outsider", siteIds: [other.site.id])
                let insider = try await repository.enrolledUser(name: "Insider", siteIds: [theirs.site.id])
                let now = Date()
                try await repository.recordSighting(
                    BeaconSighting(beacon: theirs.identity, deviceId: outsider.credentials.device.id, seenAt: now.addingTimeInterval(-30)))
                let byOutsider = try await repository.verifyBroadcast(theirs.identity, withinMinutes: 5)
                #expect(!byOutsider.verified && byOutsider.deviceCount == 0 && byOutsider.lastSeen == nil)

                try await repository.recordSighting(
                    BeaconSighting(beacon: theirs.identity, deviceId: insider.credentials.device.id, seenAt: now.addingTimeInterval(-20)))
                try await repository.recordSighting(BeaconSighting(beacon: theirs.identity, deviceId: "installer-tool-1", seenAt: now))
                let verified = try await repository.verifyBroadcast(theirs.identity, withinMinutes: 5)
                #expect(verified.verified && verified.deviceCount == 2)
            }
        }

        static func randomMAC() -> String {
            (0..<6).map { _ in String(format: "%02X", UInt8.random(in: 0...255)) }.joined(separator: ":")
        }
    }
}
