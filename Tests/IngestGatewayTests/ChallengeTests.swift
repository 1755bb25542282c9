import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayService
import PolicyServiceCore
import RegistryFeed
import Testing

/// `GET /v1/attendance/challenge?beacon=`: nonces the policy's GATT rule accepts, and clear errors.
@Suite("GATT challenge endpoint")
struct ChallengeTests {
    static let codec = GattNonceCodec(key: Array(repeating: 9, count: 32), lifetime: 60)
    static let keyring = DerivedBeaconKeyring(master: Array(repeating: 4, count: 32))
    static let beacon = "\(Sample.beaconUUID):10:3"

    @Test func issuesANonceThePolicyAcceptsWithTheBeaconsProof() async throws {
        try await RouterHarness.run(challenges: Self.codec) { h, client in
            let device = TestDevice.make()
            RegistryRecords.device(h.cache, device, status: "enrolled", version: 1)
            RegistryRecords.place(h.cache, beaconUUID: Sample.beaconUUID, major: 10, minor: 3, site: "S_HQ")
            let before = Date()
            let response = try await client.device(.get, "/v1/attendance/challenge?beacon=\(Self.beacon)", as: device)
            let after = Date()
            let challenge = try response.decode(ChallengeResponse.self, status: 200)
            #expect(response.headers[.cacheControl] == "no-store")
            #expect(challenge.beaconId == Self.beacon)
            // 60 s from when the gateway answered (rounded up to a whole second).
            #expect(challenge.expiresAt >= before.addingTimeInterval(59) && challenge.expiresAt <= after.addingTimeInterval(61))
            let key = RegistryBeaconKey(uuid: UUID(uuidString: Sample.beaconUUID)!, major: 10, minor: 3)!
            #expect(
                Self.codec.check(challenge.nonce, beacon: key, deviceId: device.deviceId, at: Date())
                    == .valid(expiresAt: challenge.expiresAt))
            // Another device cannot use it.
            #expect(Self.codec.check(challenge.nonce, beacon: key, deviceId: "someone_else", at: Date()) == .forged)
            // Nor another spelling of it (a sign or leading zero in the expiry, an upper-case tag): the
            // spent-nonce ledger keys on the text, so each would count as a nonce of its own.
            let parts = challenge.nonce.split(separator: ".").map(String.init)
            try #require(parts.count == 3)
            for respelled in [
                "+\(parts[0]).\(parts[1]).\(parts[2])", "0\(parts[0]).\(parts[1]).\(parts[2])",
                "\(parts[0]).\(parts[1]).\(parts[2].uppercased())",
            ] {
                #expect(Self.codec.check(respelled, beacon: key, deviceId: device.deviceId, at: Date()) == .forged, "\(respelled)")
            }

            // The device returns it with the beacon's HMAC: the policy's rule accepts the event.
            var event = Sample.event(for: device)
            event.gatt = .init(nonce: challenge.nonce, hmac: Self.keyring.proof(nonce: challenge.nonce, beacon: key))
            let envelope = RawEventEnvelope(
                requestId: "r", idempotencyKey: event.idempotencyKey, userId: device.userId, deviceId: device.deviceId, siteId: "S_HQ",
                appVersion: "1.12.0", gatewayInstance: "gw", receivedAt: Date(), payloadFingerprint: String(repeating: "0", count: 64),
                payload: .event(event)
            )
            let rule = GattChallengeRule(nonces: Self.codec, keyring: Self.keyring)
            let outcome = rule.evaluate(
                envelope, context: PolicyContext(registry: RegistrySnapshot(), history: PolicyHistory(), now: Date()))
            #expect(outcome == .passed)
        }
    }

    @Test func badBeaconsAreRefusedWithProblemDetails() async throws {
        try await RouterHarness.run(challenges: Self.codec) { h, client in
            let device = TestDevice.make()
            RegistryRecords.device(h.cache, device, status: "enrolled", version: 1)
            for query in [
                "", "?beacon=", "?beacon=nonsense", "?beacon=\(Sample.beaconUUID):70000:1", "?beacon=\(Sample.beaconUUID):1",
                "?beacon=\(Sample.beaconUUID):-1:2",
            ] {
                let response = try await client.device(.get, "/v1/attendance/challenge\(query)", as: device)
                let problem = try response.problem(400, .validation)
                #expect(problem.errors?.first?.field == "beacon", "\(query)")
            }
            let unknown = try await client.device(.get, "/v1/attendance/challenge?beacon=\(Sample.beaconUUID):99:99", as: device)
            try unknown.problem(404, .notFound)
            let anonymous = try await client.device(.get, "/v1/attendance/challenge?beacon=\(Self.beacon)", as: nil)
            try anonymous.problem(401)
        }
    }

    @Test func aGatewayWithoutTheKeyHasNoChallenges() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            RegistryRecords.device(h.cache, device, status: "enrolled", version: 1)
            RegistryRecords.place(h.cache, beaconUUID: Sample.beaconUUID, major: 10, minor: 3, site: "S_HQ")
            let response = try await client.device(.get, "/v1/attendance/challenge?beacon=\(Self.beacon)", as: device)
            let problem = try response.problem(404, .notFound)
            #expect(problem.detail?.contains("not enabled") == true)
        }
    }
}
