import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import LocalStackTesting
import RegistryTestFixtures
import Testing

/// The GATT key routes: rotation (admin, problem+json on bad input) and the key in the installer's
/// provisioning plan.
@Suite("Beacon GATT key routes", .serialized, .timeLimit(.minutes(3)))
struct BeaconKeyRouteTests {
    static let sealer = BeaconKeySealer(sealingKey: Array(repeating: 0x33, count: 32))!

    struct Plan: Decodable {
        struct GattKey: Decodable {
            var version: Int
            var hex: String
        }

        var frames: [String]
        var gattKey: GattKey?
    }

    static func registerBeacon(_ h: Harness) async throws -> Beacon {
        let fixture = try await RegistryFixture.make(h.repository)
        let minor = try await h.repository.allocateMinor(gateId: fixture.gate.id)
        return try await h.repository.registerBeacon(NewBeacon(identity: minor.identity, gateId: fixture.gate.id))
    }

    @Test func installerSeesTheKeyInThePlanAndAViewerDoesNot() async throws {
        try await Harness.run(beaconKeySealer: Self.sealer) { h, client in
            let beacon = try await Self.registerBeacon(h)
            let key = try #require(try await h.repository.beaconGattKey(beaconId: beacon.id))
            let hex = key.key.map { String(format: "%02x", $0) }.joined()

            let installerPlan = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan", key: h.installer).decode(
                Plan.self)
            #expect(installerPlan.frames.count == 24)
            #expect(installerPlan.gattKey?.version == 1)
            #expect(installerPlan.gattKey?.hex == hex)

            let viewerPlan = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan", key: h.viewer)
            #expect(viewerPlan.status == .ok)
            #expect(!viewerPlan.text.contains(hex))
            #expect(try viewerPlan.decode(Plan.self).gattKey == nil)
        }
    }

    @Test("a key sealed under another BEACON_KEY_SEAL_KEY is a 409 saying to rotate it, and a rotation gives the plan a key")
    func aKeySealedUnderAnotherSealingKeyIsAConflict() async throws {
        try await Harness.run(beaconKeySealer: Self.sealer) { h, client in
            // Registered while the registry ran with another sealing key.
            let before = PostgresRegistryRepository(
                client: h.db, logger: ServiceTestDatabase.logger, tokenSigner: ServiceTestDatabase.signer,
                beaconKeySealer: BeaconKeySealer(sealingKey: Array(repeating: 0x44, count: 32)))
            let fixture = try await RegistryFixture.make(before)
            let minor = try await before.allocateMinor(gateId: fixture.gate.id)
            let beacon = try await before.registerBeacon(NewBeacon(identity: minor.identity, gateId: fixture.gate.id))

            let path = "/v1/admin/beacons/\(beacon.id)/provisioning-plan"
            let problem = try await client.send(.get, path, key: h.installer).problem(.conflict)
            #expect(problem.detail?.contains("rotate it with graceHours=0") == true, "\(problem)")
            // A viewer's plan has no key to open.
            #expect(try await client.send(.get, path, key: h.viewer).decode(Plan.self).gattKey == nil)

            let rotated = try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate?graceHours=0", key: h.admin)
            #expect(rotated.status == .ok, "\(rotated.text)")
            #expect(try await client.send(.get, path, key: h.installer).decode(Plan.self).gattKey?.version == 2)
        }
    }

    @Test func adminRotatesAndThePlanShowsTheNewKey() async throws {
        try await Harness.run(beaconKeySealer: Self.sealer) { h, client in
            let beacon = try await Self.registerBeacon(h)
            let before = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan", key: h.installer).decode(Plan.self)

            let rotated = try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate", key: h.admin)
            let rotation = try rotated.decode(BeaconKeyRotation.self)
            #expect(rotation.beaconId == beacon.id && rotation.version == 2)
            // A week's grace for the replaced key by default; `graceHours` sets it, 0 ends it at once.
            let grace = try #require(rotation.previousKeyValidUntil).timeIntervalSince(rotation.rotatedAt)
            #expect(abs(grace - 168 * 3_600) < 0.002)
            // The answer never carries the key.
            #expect(!rotated.text.contains("hex"))
            // Within that grace: 409, unless the installer wrote the current key (`force`).
            let refused = try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate?graceHours=2", key: h.admin)
                .problem(.conflict)
            #expect(refused.detail?.contains("force=true") == true)
            let short = try await client.send(
                .post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate?graceHours=2&force=true", key: h.admin
            ).decode(BeaconKeyRotation.self)
            #expect(abs(try #require(short.previousKeyValidUntil).timeIntervalSince(short.rotatedAt) - 2 * 3_600) < 0.002)
            let immediate = try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate?graceHours=0", key: h.admin)
            #expect(!immediate.text.contains("previousKeyValidUntil"))
            #expect(try immediate.decode(BeaconKeyRotation.self).version == 4)

            let after = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan", key: h.installer).decode(Plan.self)
            #expect(after.gattKey?.version == 4)
            #expect(after.gattKey?.hex != before.gattKey?.hex)
        }
    }

    @Test func badRotationsAreProblems() async throws {
        try await Harness.run(beaconKeySealer: Self.sealer) { h, client in
            let beacon = try await Self.registerBeacon(h)
            try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate", key: nil).problem(.unauthorized)
            try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate", key: h.installer).problem(.forbidden)
            try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate", key: h.viewer).problem(.forbidden)
            try await client.send(.post, "/v1/admin/beacons/bcn_missing_\(token())/gatt-key/rotate", key: h.admin).problem(.notFound)
            try await client.send(.post, "/v1/admin/beacons/bad%20id!/gatt-key/rotate", key: h.admin).problem(.badRequest)
            for query in [
                "graceHours=-1", "graceHours=721", "graceHours=1.5", "graceHours=week", "graceHours=", "force=yes", "force=", "grace=5",
            ] {
                try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate?\(query)", key: h.admin)
                    .problem(.badRequest)
            }
            // Nothing was rotated by the refused calls.
            #expect(try await h.repository.beaconGattKey(beaconId: beacon.id)?.version == 1)
        }
        // A registry without BEACON_KEY_SEAL_KEY: rotation is unavailable, the plan still works without a key.
        try await Harness.run { h, client in
            let beacon = try await Self.registerBeacon(h)
            try await client.send(.post, "/v1/admin/beacons/\(beacon.id)/gatt-key/rotate", key: h.admin).problem(.serviceUnavailable)
            let plan = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan", key: h.installer).decode(Plan.self)
            #expect(plan.frames.count == 24 && plan.gattKey == nil)
        }
    }
}
