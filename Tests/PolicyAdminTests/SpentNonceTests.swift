import AttendanceProtocol
import Foundation
import LocalStackTesting
import PolicyServiceCore
import PostgresNIO
import ServiceRuntime
import Testing

@testable import PolicyService

/// The GATT nonce's "already used" check is durable and shared: spent nonces live in
/// the policy schema's `spent_gatt_nonces`, so a replay is refused after a restart and by another
/// instance, and a redelivery of the same event is not a reuse.
@Suite("Spent GATT nonces in PostgreSQL", .serialized, .timeLimit(.minutes(2)))
struct SpentNonceTests {
    static let codec = GattNonceCodec(key: Array(repeating: 0x11, count: 32), lifetime: 60)
    static let keyring = DerivedBeaconKeyring(master: Array(repeating: 0x22, count: 32))
    static let engine = PolicyEngine(rules: [GattChallengeRule(nonces: codec, keyring: keyring)])
    static let policy = SitePolicy(siteId: "S_NONCE", version: 1, rules: [.gattChallenge: .enforce])
    static let beacon = RegistryBeaconKey(uuid: UUID(uuidString: "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34")!, major: 10, minor: 3)!

    /// One policy instance: its own in-memory history, the shared store.
    struct Instance: Sendable {
        let history = PolicyHistory()
        let ledger: GattNonceLedger

        init(store: PostgresSpentNonceStore) {
            ledger = GattNonceLedger(store: store, nonces: SpentNonceTests.codec)
        }

        /// What `PolicyPipeline.handle` does with a polled batch: claim, then decide in order.
        func decide(_ batch: [RawEventEnvelope]) async throws -> [PolicyDecision] {
            try await ledger.prepare(batch, history: history)
            return batch.map { event in
                let context = PolicyContext(registry: RegistrySnapshot(), history: history, now: event.receivedAt)
                let decision = SpentNonceTests.engine.decide(event, context: context, policy: SpentNonceTests.policy)
                history.record(decision, for: event, registry: RegistrySnapshot())
                return decision
            }
        }
    }

    static func withStore(_ body: (PostgresSpentNonceStore, PostgresClient) async throws -> Void) async throws {
        try await LocalStack.withMigratedSchema(.policy, prefix: "policy_test_nonce") { client, _ in
            try await body(PostgresSpentNonceStore(client: client, logger: PolicyAdminHarness.logger), client)
        }
    }

    /// A device check-in at the beacon with a fresh nonce signed by the beacon.
    static func nonce(device: String = "d_1", now: Date = Date()) -> String {
        codec.issue(beacon: beacon, deviceId: device, now: now).nonce
    }

    static func checkIn(key: String, nonce: String, user: String = "u_1", device: String = "d_1", now: Date = Date()) -> RawEventEnvelope {
        let body = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: user, deviceId: device, timestamp: now, type: .checkin,
            siteId: "S_NONCE", beacon: BeaconIdentity(uuid: beacon.uuid, major: 10, minor: 3),
            rssiSeries: [-70, -66, -71], txPower: -59, motion: nil, geofence: nil, handshake: nil,
            network: .init(online: true, latencyMs: 80), app: .init(version: "1.12.0", build: 1),
            device: .init(model: "iPhone14,5", os: "iOS 18.0"), tEnd: nil, queuedOffline: nil,
            location: nil, attestation: nil, gatt: .init(nonce: nonce, hmac: keyring.proof(nonce: nonce, beacon: beacon))
        )
        return RawEventEnvelope(
            requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: "S_NONCE", appVersion: "1.12.0",
            gatewayInstance: "gateway-0", receivedAt: now, payloadFingerprint: String(repeating: "0", count: 64), payload: .event(body)
        )
    }

    static func isReuse(_ decision: PolicyDecision) -> Bool {
        decision.outcome == .reject
            && decision.ruleResults.contains { $0.ruleId == .gattChallenge && $0.reason?.contains("already used") == true }
    }

    @Test func aReplayIsRefusedAfterARestart() async throws {
        try await Self.withStore { store, _ in
            let nonce = Self.nonce()
            let before = Instance(store: store)
            #expect(try await before.decide([Self.checkIn(key: "k_first", nonce: nonce)]).map(\.outcome) == [.accept])

            // The restarted instance remembers nothing in memory.
            let restarted = Instance(store: store)
            let replay = try #require(try await restarted.decide([Self.checkIn(key: "k_replay", nonce: nonce)]).first)
            #expect(Self.isReuse(replay), "\(replay.ruleResults)")
            // The same event redelivered (at-least-once) is not a reuse.
            #expect(try await restarted.decide([Self.checkIn(key: "k_first", nonce: nonce)]).map(\.outcome) == [.accept])
        }
    }

    @Test func aReplayIsRefusedByASecondInstanceAndUnderAnotherUser() async throws {
        try await Self.withStore { store, _ in
            let nonce = Self.nonce()
            let first = Instance(store: store)
            let second = Instance(store: store)
            let original = try await first.decide([Self.checkIn(key: "k_a", nonce: nonce)])
            #expect(original.map(\.outcome) == [.accept])
            let replay = try #require(try await second.decide([Self.checkIn(key: "k_b", nonce: nonce)]).first)
            #expect(Self.isReuse(replay))
            let otherUser = try #require(try await second.decide([Self.checkIn(key: "k_c", nonce: nonce, user: "u_other")]).first)
            #expect(Self.isReuse(otherUser))
        }
    }

    @Test func twoInstancesRacingForOneNonceAcceptItOnce() async throws {
        try await Self.withStore { store, _ in
            for round in 0..<5 {
                let nonce = Self.nonce()
                let one = Instance(store: store)
                let two = Instance(store: store)
                async let a = one.decide([Self.checkIn(key: "k_one_\(round)", nonce: nonce)])
                async let b = two.decide([Self.checkIn(key: "k_two_\(round)", nonce: nonce)])
                let (first, second) = try await (a, b)
                try #require(first.count == 1 && second.count == 1)
                let outcomes = [first[0], second[0]]
                #expect(outcomes.filter { $0.outcome == .accept }.count == 1, "round \(round): \(outcomes.map(\.ruleResults))")
                #expect(outcomes.filter(Self.isReuse).count == 1)
            }
        }
    }

    @Test func aNonceTwiceInOneBatchIsAcceptedOnce() async throws {
        try await Self.withStore { store, _ in
            let nonce = Self.nonce()
            let decisions = try await Instance(store: store).decide([
                Self.checkIn(key: "k_1", nonce: nonce), Self.checkIn(key: "k_1", nonce: nonce), Self.checkIn(key: "k_2", nonce: nonce),
            ])
            #expect(decisions.map(\.outcome) == [.accept, .accept, .reject])
            try #require(decisions.count > 2)
            #expect(Self.isReuse(decisions[2]))
        }
    }

    @Test func forgedAndExpiredNoncesAreNotStoredAndExpiredOnesArePruned() async throws {
        try await Self.withStore { store, _ in
            let instance = Instance(store: store)
            let old = Date().addingTimeInterval(-3_600)
            let expired = Self.nonce(now: old)
            let forged = "1.00000000000000000000000000000000.00000000000000000000000000000000"
            let decisions = try await instance.decide([
                Self.checkIn(key: "k_expired", nonce: expired), Self.checkIn(key: "k_forged", nonce: forged),
            ])
            #expect(decisions.allSatisfy { $0.outcome == .reject })
            // Neither was claimed: a probe finds no holder.
            let probe = [expired, forged].map { NonceClaim(nonce: $0, idempotencyKey: "k_probe", userId: "u_1", expiresAt: old) }
            #expect(try await store.claim(probe) == [:])
            #expect(try await store.prune(expiredBefore: Date().addingTimeInterval(-60)) == 2)
            // A spent nonce past its expiry is pruned; a live one stays.
            let live = Self.nonce()
            _ = try await instance.decide([Self.checkIn(key: "k_live", nonce: live)])
            _ = try await store.claim([NonceClaim(nonce: "stale", idempotencyKey: "k_stale", userId: "u_1", expiresAt: old)])
            #expect(try await store.prune(expiredBefore: Date().addingTimeInterval(-60)) == 1)
            #expect(
                try await store.claim([NonceClaim(nonce: live, idempotencyKey: "k_other", userId: "u_1", expiresAt: Date())]) == [
                    live: "k_live"
                ])
        }
    }

    /// The durable check's cost: a full polled batch (500 GATT check-ins) is one statement.
    @Test func aFullBatchIsClaimedInOneStatement() async throws {
        try await Self.withStore { store, _ in
            let instance = Instance(store: store)
            let now = Date()
            let batch = (0..<500).map { i in
                Self.checkIn(key: "k_batch_\(i)", nonce: Self.nonce(device: "d_\(i)", now: now), user: "u_\(i)", device: "d_\(i)", now: now)
            }
            let claims = instance.ledger.claims(for: batch)
            #expect(claims.count == 500)
            let clock = ContinuousClock()
            let first = try await clock.measure { _ = try await store.claim(claims) }
            let again = try await clock.measure { _ = try await store.claim(claims) }
            print("spent-nonce claim of a 500-event batch: \(first) (new nonces), \(again) (all already held)")
            #expect(first < .seconds(30) && again < .seconds(30), "a sanity bound; the figure itself is printed")
            // Every nonce is now held by its own event: a redelivery of the batch is accepted.
            #expect(try await instance.decide(batch).allSatisfy { $0.outcome == .accept })
        }
    }
}
