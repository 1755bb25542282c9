import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Crypto
import Foundation
import KafkaClient
import LocalStackTesting
import PolicyService
import PolicyServiceCore
import PostgresNIO
import RegistryFeed
import ServiceRuntime
import Testing

@testable import BeaconRegistryStore

/// `gatt_challenge` verifies with the key the registry keeps: the key arrives sealed in
/// the beacon's record on `registry.changes`, only `BEACON_KEY_SEAL_KEY` opens it, and a rotated
/// key applies as soon as its record is read.
@Suite("GATT keys from the registry feed", .serialized, .timeLimit(.minutes(2)))
struct RegistryFeedKeyringTests {
    static let sealer = BeaconKeySealer(sealingKey: Array(repeating: 0x44, count: 32))!
    static let codec = GattNonceCodec(key: Array(repeating: 0x55, count: 32), lifetime: 60)
    static let uuid = UUID(uuidString: "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34")!
    static let identity = RegistryBeaconKey(uuid: uuid, major: 10, minor: 3)!

    /// A beacon record as the registry publishes it, with `gattKey` when given.
    static func beaconRecord(
        id: String, version: Int64, gattKey: SealedBeaconKey?, previousGattKey: SealedBeaconKey? = nil
    ) throws -> RegistryRecord {
        var members: [String: JSONValue] = [
            "id": .string(id), "uuid": .string(uuid.uuidString), "major": .integer(10), "minor": .integer(3),
            "status": .string("active"), "gateId": .string("G_MAIN"),
        ]
        if let gattKey { members["gattKey"] = try JSONValue(encoding: gattKey) }
        if let previousGattKey { members["previousGattKey"] = try JSONValue(encoding: previousGattKey) }
        return .upsert(RegistryChange(entityType: .beacon, entityId: id, version: version, changedAt: Date(), payload: .object(members)))
    }

    /// A check-in proved with `beaconKey` (what a beacon holding that key answers).
    static func provedCheckIn(
        beaconKey: [UInt8], beacon: RegistryBeaconKey = identity, now: Date = Date(), receivedAt: Date? = nil, nonceIssuedAt: Date? = nil
    ) -> RawEventEnvelope {
        let nonce = codec.issue(beacon: beacon, deviceId: "d_1", now: nonceIssuedAt ?? now).nonce
        let hmac = GattProof.hmac(nonce: nonce, beaconKey: .init(data: beaconKey))
        let body = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: "k_\(UUID().uuidString)", userId: "u_1", deviceId: "d_1", timestamp: now, type: .checkin,
            siteId: "S_HQ", beacon: BeaconIdentity(uuid: beacon.uuid, major: Int(beacon.major), minor: Int(beacon.minor)),
            rssiSeries: [-70, -66, -71], txPower: -59, motion: nil, geofence: nil, handshake: nil,
            network: .init(online: true, latencyMs: 80), app: .init(version: "1.12.0", build: 1),
            device: .init(model: "iPhone14,5", os: "iOS 18.0"), tEnd: nil, queuedOffline: nil,
            location: nil, attestation: nil, gatt: .init(nonce: nonce, hmac: hmac)
        )
        return RawEventEnvelope(
            requestId: "req_1", idempotencyKey: body.idempotencyKey, userId: "u_1", deviceId: "d_1", siteId: "S_HQ", appVersion: "1.12.0",
            gatewayInstance: "gateway-0", receivedAt: receivedAt ?? now, payloadFingerprint: String(repeating: "0", count: 64),
            payload: .event(body)
        )
    }

    static func verdict(_ rule: GattChallengeRule, _ event: RawEventEnvelope) -> RuleOutcome {
        rule.evaluate(event, context: PolicyContext(registry: RegistrySnapshot(), history: PolicyHistory(), now: event.receivedAt))
    }

    @Test func theRuleVerifiesWithThePublishedKeyAndARotationAppliesAtOnce() throws {
        let cache = RegistryCache()
        let rule = GattChallengeRule(nonces: Self.codec, keyring: RegistryFeedBeaconKeyring(cache: cache, sealer: Self.sealer))
        let first = BeaconKeySealer.generateBeaconKey()
        cache.apply(try Self.beaconRecord(id: "bcn_1", version: 1, gattKey: Self.sealer.seal(first, beaconId: "bcn_1", version: 1)))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: first)) == .passed)
        // Another beacon's key (a cloned identity without the real key) is refused.
        #expect(
            Self.verdict(rule, Self.provedCheckIn(beaconKey: BeaconKeySealer.generateBeaconKey())).firing?.reason.contains("does not match")
                == true)

        // Rotated: the next record carries version 2; the old key stops verifying immediately.
        let second = BeaconKeySealer.generateBeaconKey()
        cache.apply(try Self.beaconRecord(id: "bcn_1", version: 2, gattKey: Self.sealer.seal(second, beaconId: "bcn_1", version: 2)))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: first)).didFire)
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: second)) == .passed)
    }

    /// The physical beacon signs with the key it holds until an installer writes the new one, and a
    /// refused check-in is lost for good: the replaced key verifies, with a note, until its grace ends.
    @Test func aReplacedKeyVerifiesWithANoteUntilItsGraceEnds() throws {
        let cache = RegistryCache()
        let rule = GattChallengeRule(nonces: Self.codec, keyring: RegistryFeedBeaconKeyring(cache: cache, sealer: Self.sealer))
        let old = BeaconKeySealer.generateBeaconKey()
        let new = BeaconKeySealer.generateBeaconKey()
        let now = Date()
        let graceEnd = now.addingTimeInterval(3_600)
        var previous = try Self.sealer.seal(old, beaconId: "bcn_1", version: 1)
        previous.validUntil = graceEnd
        cache.apply(
            try Self.beaconRecord(
                id: "bcn_1", version: 2, gattKey: Self.sealer.seal(new, beaconId: "bcn_1", version: 2), previousGattKey: previous))

        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: new, now: now)) == .passed)
        let noted = try #require(Self.verdict(rule, Self.provedCheckIn(beaconKey: old, now: now)).firing)
        #expect(!noted.refuses)
        #expect(noted.reason.contains("replaced key (version 1)") && noted.reason.contains("write the new key"))
        // Proved within the grace, delivered after it (queued offline): the proof holds.
        let queued = Self.provedCheckIn(beaconKey: old, now: graceEnd.addingTimeInterval(-30), receivedAt: graceEnd.addingTimeInterval(600))
        #expect(Self.verdict(rule, queued).firing?.refuses == false)
        // A nonce issued after the grace, in an event dated within it (inside the allowed clock skew):
        // backdating does not stretch the grace.
        let backdated = Self.provedCheckIn(
            beaconKey: old, now: graceEnd.addingTimeInterval(-60), receivedAt: graceEnd.addingTimeInterval(61),
            nonceIssuedAt: graceEnd.addingTimeInterval(60))
        let stretched = try #require(Self.verdict(rule, backdated).firing)
        #expect(stretched.refuses && stretched.reason.contains("does not match"))
        // Proved after the grace: refused, as is a key that is neither.
        let late = try #require(Self.verdict(rule, Self.provedCheckIn(beaconKey: old, now: graceEnd.addingTimeInterval(1))).firing)
        #expect(late.refuses && late.reason.contains("does not match"))
        let stranger = try #require(
            Self.verdict(rule, Self.provedCheckIn(beaconKey: BeaconKeySealer.generateBeaconKey(), now: now)).firing)
        #expect(stranger.refuses)

        // A previous box without an end, or one that does not open, never verifies.
        previous.validUntil = nil
        cache.apply(
            try Self.beaconRecord(
                id: "bcn_1", version: 3, gattKey: Self.sealer.seal(new, beaconId: "bcn_1", version: 2), previousGattKey: previous))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: old, now: now)).firing?.refuses == true)
        var foreign = try Self.sealer.seal(old, beaconId: "bcn_other", version: 1)
        foreign.validUntil = graceEnd
        cache.apply(
            try Self.beaconRecord(
                id: "bcn_1", version: 4, gattKey: Self.sealer.seal(new, beaconId: "bcn_1", version: 2), previousGattKey: foreign))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: old, now: now)).firing?.refuses == true)
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: new, now: now)) == .passed)
    }

    @Test func aKeyThatDoesNotOpenIsNoKey() throws {
        let cache = RegistryCache()
        let rule = GattChallengeRule(nonces: Self.codec, keyring: RegistryFeedBeaconKeyring(cache: cache, sealer: Self.sealer))
        let key = BeaconKeySealer.generateBeaconKey()
        // Sealed under another sealing key, or copied from another beacon's record.
        let foreign = try BeaconKeySealer(sealingKey: Array(repeating: 0x01, count: 32))!.seal(key, beaconId: "bcn_1", version: 1)
        cache.apply(try Self.beaconRecord(id: "bcn_1", version: 1, gattKey: foreign))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: key)).firing?.reason.contains("has no GATT key") == true)
        cache.apply(try Self.beaconRecord(id: "bcn_1", version: 2, gattKey: Self.sealer.seal(key, beaconId: "bcn_other", version: 1)))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: key)).firing?.reason.contains("has no GATT key") == true)
        // A beacon published without a key.
        cache.apply(try Self.beaconRecord(id: "bcn_1", version: 3, gattKey: nil))
        #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: key)).didFire)
    }

    /// From the registry's own write to the policy's verdict: register a beacon and rotate its key
    /// with the real repository, read the outbox rows as the publisher would produce them, apply
    /// them to a feed cache, and verify proofs made with the key the installer gets.
    @Test func keysWrittenByTheRegistryVerifyInThePolicy() async throws {
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_keyring") { client, _ in
            let logger = LocalStack.logger
            let signer = try DeviceTokenSigner(activeKey: try DeviceSigningKey(id: "feed-key-test", secret: Array(repeating: 3, count: 32)))
            let registry = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer, beaconKeySealer: Self.sealer)
            let organization = try await registry.createOrganization(NewOrganization(name: "Keyring org \(UUID().uuidString.prefix(8))"))
            let site = try await registry.createSite(
                NewSite(
                    organizationId: organization.id, name: "HQ", timezone: "Asia/Ho_Chi_Minh",
                    geofence: Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200),
                    shift: ShiftSettings(
                        start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!, checkInBeforeStartMinutes: 60,
                        checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5
                    )
                ))
            let gate = try await registry.createGate(NewGate(siteId: site.id, name: "Main"))
            let minor = try await registry.allocateMinor(gateId: gate.id)
            let beacon = try await registry.registerBeacon(NewBeacon(identity: minor.identity, gateId: gate.id))
            let identity = try #require(RegistryBeaconKey(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor))

            let cache = RegistryCache()
            let rule = GattChallengeRule(nonces: Self.codec, keyring: RegistryFeedBeaconKeyring(cache: cache, sealer: Self.sealer))
            func readFeed() async throws {
                let rows = try await client.query(
                    """
                    SELECT id, entity_type, entity_id, op, payload::text, created_at FROM change_outbox
                    WHERE entity_type = 'beacon' AND entity_id = \(beacon.id) ORDER BY id
                    """, logger: logger
                )
                for try await (id, type, entityId, op, payload, createdAt) in rows.decode(
                    (Int64, String, String, String, String?, Date).self)
                {
                    let message = try RegistryOutboxRow(
                        id: id, entityType: type, entityId: entityId, op: op, payload: payload, createdAt: createdAt
                    ).message()
                    cache.apply(
                        try RegistryRecord.decode(key: message.key.map { String(decoding: $0, as: UTF8.self) } ?? "", value: message.value))
                }
            }
            try await readFeed()
            // Other feed readers (gateway, fleet) hold only the sealed box.
            let published = try #require(cache.resolve(identity)?.beacon.gattKey)
            let installed = try #require(try await registry.beaconGattKey(beaconId: beacon.id))
            #expect(!published.sealed.contains(Data(installed.key).base64EncodedString()))
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: installed.key, beacon: identity)) == .passed)

            // Rotated with the default grace: the beacon still holding the replaced key verifies,
            // with a note, until an installer writes the new one.
            _ = try await registry.rotateBeaconKey(beaconId: beacon.id, graceHours: BeaconKeyRotation.defaultGraceHours, force: false)
            try await readFeed()
            let rotated = try #require(try await registry.beaconGattKey(beaconId: beacon.id))
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: installed.key, beacon: identity)).firing?.refuses == false)
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: rotated.key, beacon: identity)) == .passed)
            // Rotated because the key leaked: the replaced key is refused at once.
            _ = try await registry.rotateBeaconKey(beaconId: beacon.id, graceHours: 0, force: false)
            try await readFeed()
            let replacement = try #require(try await registry.beaconGattKey(beaconId: beacon.id))
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: rotated.key, beacon: identity)).firing?.refuses == true)
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: installed.key, beacon: identity)).firing?.refuses == true)
            #expect(Self.verdict(rule, Self.provedCheckIn(beaconKey: replacement.key, beacon: identity)) == .passed)
        }
    }
}
