import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PolicyServiceCore
import PostgresNIO
import ServiceRuntime
import Testing

@testable import PolicyService

/// The history rules remember across restarts and rebalances: accepted punches live in the policy
/// schema's `accepted_punches`, read for each user first seen after an assignment.
@Suite("Accepted punches in PostgreSQL", .serialized, .timeLimit(.minutes(2)))
struct PunchLedgerTests {
    static let engine = PolicyEngine(rules: [RateLimitRule()])
    static let policy = SitePolicy(siteId: "S_PUNCH", version: 1, rules: [.rateLimit: .enforce])

    /// One policy instance: its own in-memory history, the shared store, decided as `PolicyPipeline`
    /// does (warm, decide in order, store the accepted punches).
    struct Instance: Sendable {
        let history = PolicyHistory()
        let ledger: PunchLedger

        init(store: PostgresPunchStore) {
            ledger = PunchLedger(store: store, retention: PolicyPipeline.historyRetention)
        }

        func decide(_ batch: [RawEventEnvelope], warm: Bool = true) async throws -> [PolicyDecision] {
            if warm { try await ledger.warm(batch, history: history, now: Date()) }
            var punches: [PunchRecord] = []
            let decisions = batch.map { event in
                let context = PolicyContext(registry: RegistrySnapshot(), history: history, now: event.receivedAt)
                let decision = PunchLedgerTests.engine.decide(event, context: context, policy: PunchLedgerTests.policy)
                if let punch = history.record(decision, for: event, registry: RegistrySnapshot()) { punches.append(punch) }
                return decision
            }
            try await ledger.store(punches)
            return decisions
        }
    }

    static func withStore(_ body: (PostgresPunchStore) async throws -> Void) async throws {
        try await LocalStack.withMigratedSchema(.policy, prefix: "policy_test_punch") { client, _ in
            try await body(PostgresPunchStore(client: client, logger: PolicyAdminHarness.logger))
        }
    }

    static func punch(
        key: String, type: AttendanceEventType = .checkin, user: String = "u_1", device: String = "d_1", at time: Date
    ) -> RawEventEnvelope {
        let body = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: user, deviceId: device, timestamp: time, type: type,
            siteId: "S_PUNCH", beacon: BeaconIdentity(uuid: "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34", major: 10, minor: 3),
            rssiSeries: [-70, -66, -71], txPower: -59, motion: nil, geofence: nil, handshake: nil,
            network: .init(online: true, latencyMs: 80), app: .init(version: "1.12.0", build: 1),
            device: .init(model: "iPhone14,5", os: "iOS 18.0"), tEnd: nil, queuedOffline: nil, location: nil, attestation: nil, gatt: nil
        )
        return RawEventEnvelope(
            requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: "S_PUNCH", appVersion: "1.12.0",
            gatewayInstance: "gateway-0", receivedAt: time.addingTimeInterval(0.2), payloadFingerprint: String(repeating: "0", count: 64),
            payload: .event(body)
        )
    }

    static func isRepeat(_ decision: PolicyDecision) -> Bool {
        decision.outcome == .reject && decision.ruleResults.contains { $0.ruleId == .rateLimit && $0.fired }
    }

    /// A time on the wire's millisecond comes back as it went in (PostgreSQL's microseconds would make
    /// `…12.001Z` come back 1 µs early), so a restart does not move a punch across a rule's boundary.
    @Test func aPunchComesBackAtItsMillisecond() async throws {
        try await Self.withStore { store in
            let times = ["2025-09-18T06:35:12.001Z", "2025-09-18T06:35:12.008Z", "2025-09-18T06:35:12.011Z"].compactMap(
                WireTimestamp.date(from:))
            try #require(times.count == 3)
            let punches = times.enumerated().map { index, time in
                PunchRecord(
                    idempotencyKey: "k_ms_\(index)", userId: "u_ms", deviceId: "d_1", siteId: "S_PUNCH", gateId: "g_1", type: .checkin,
                    time: time)
            }
            try await store.append(punches)
            let read = try await store.punches(userIds: ["u_ms"], since: times[0].addingTimeInterval(-1))
            #expect(read.map(\.time) == times)
        }
    }

    @Test func aRestartedInstanceStillRefusesARepeatedCheckIn() async throws {
        try await Self.withStore { store in
            let t0 = Date().addingTimeInterval(-30)
            let before = Instance(store: store)
            #expect(try await before.decide([Self.punch(key: "k_first", at: t0)]).map(\.outcome) == [.accept])

            // Without the stored punches (the history in memory alone), a restart forgets the first one.
            let forgetful = try await Instance(store: store).decide(
                [Self.punch(key: "k_again", at: t0.addingTimeInterval(10))], warm: false)
            #expect(forgetful.map(\.outcome) == [.accept])

            let restarted = Instance(store: store)
            let repeated = try await restarted.decide([Self.punch(key: "k_repeat", at: t0.addingTimeInterval(10))])
            #expect(repeated.count == 1 && Self.isRepeat(repeated[0]), "\(repeated.map(\.ruleResults))")
            // The first event redelivered (at-least-once) is not judged against itself.
            #expect(try await restarted.decide([Self.punch(key: "k_first", at: t0)]).map(\.outcome) == [.accept])
            // A user is read once per assignment: one query, not one per batch.
            #expect(restarted.ledger.readUserCount == 1)
        }
    }

    @Test func afterAnAssignmentUsersAreReadAgain() async throws {
        try await Self.withStore { store in
            let t0 = Date().addingTimeInterval(-60)
            let a = Instance(store: store)
            let b = Instance(store: store)
            // A decides the user first (nothing stored yet), then loses the partition; B accepts a check-in.
            #expect(try await a.decide([Self.punch(key: "k_a", type: .checkout, at: t0)]).map(\.outcome) == [.accept])
            _ = try await a.ledger.partitionsRevoked([TopicPartition(topic: "raw", partition: 0)])
            #expect(try await b.decide([Self.punch(key: "k_b", at: t0.addingTimeInterval(20))]).map(\.outcome) == [.accept])
            // A gets the partition back: it reads the user again and sees B's check-in.
            _ = try await a.ledger.partitionsAssigned([TopicPartition(topic: "raw", partition: 0)])
            #expect(a.ledger.readUserCount == 0)
            let repeated = try await a.decide([Self.punch(key: "k_a2", at: t0.addingTimeInterval(30))])
            #expect(repeated.count == 1 && Self.isRepeat(repeated[0]), "\(repeated.map(\.ruleResults))")
        }
    }

    @Test func storingIsIdempotentKeepsWhatIsUnknownAndPrunesByEventTime() async throws {
        try await Self.withStore { store in
            let now = Date()
            let old = PunchRecord(
                idempotencyKey: "k_old", userId: "u_2", deviceId: "d_2", siteId: nil, gateId: nil, type: .checkout,
                time: now.addingTimeInterval(-PolicyPipeline.historyRetention - 60))
            let recent = PunchRecord(
                idempotencyKey: "k_recent", userId: "u_2", deviceId: "d_2", siteId: "S_PUNCH", gateId: "g_1", type: .checkin,
                time: now.addingTimeInterval(-60))
            try await store.append([old, recent])
            try await store.append([recent, old])
            let all = try await store.punches(userIds: ["u_2", "u_nobody"], since: .distantPast)
            #expect(all.map(\.idempotencyKey) == ["k_old", "k_recent"])
            #expect(all.first?.siteId == nil && all.first?.gateId == nil && all.first?.type == .checkout)
            #expect(all.last == recent || abs((all.last?.time.timeIntervalSince(recent.time)) ?? 1) < 0.001)
            #expect(try await store.punches(userIds: ["u_2"], since: now.addingTimeInterval(-3_600)).map(\.idempotencyKey) == ["k_recent"])
            #expect(try await store.prune(before: now.addingTimeInterval(-PolicyPipeline.historyRetention)) == 1)
            #expect(try await store.punches(userIds: ["u_2"], since: .distantPast).map(\.idempotencyKey) == ["k_recent"])
        }
    }
}

/// A read of stored punches that an assignment overtakes does not count: the users are read again.
@Suite("Punch ledger: a read overtaken by an assignment")
struct PunchLedgerAssignmentRaceTests {
    /// A store whose read waits until the test lets it answer (nothing stored).
    final class GatedStore: PunchStore {
        let entered = AsyncStream<Void>.makeStream()
        let release = AsyncStream<Void>.makeStream()

        func append(_ punches: [PunchRecord]) async throws {}
        func prune(before cutoff: Date) async throws -> Int { 0 }
        func punches(userIds: [String], since: Date) async throws -> [PunchRecord] {
            entered.continuation.yield()
            for await _ in release.stream { break }
            return []
        }
    }

    @Test func usersReadAcrossAnAssignmentAreReadAgain() async throws {
        let store = GatedStore()
        let ledger = PunchLedger(store: store)
        let history = PolicyHistory()
        let event = PunchLedgerTests.punch(key: "k_1", at: Date())
        async let warmed: Void = ledger.warm([event], history: history, now: Date())
        for await _ in store.entered.stream { break }
        // The partition moved away and back while the read was in flight.
        _ = try await ledger.partitionsAssigned([TopicPartition(topic: "raw", partition: 0)])
        store.release.continuation.yield()
        try await warmed
        #expect(ledger.readUserCount == 0)
        // Without an assignment meanwhile, a read counts.
        async let again: Void = ledger.warm([event], history: history, now: Date())
        for await _ in store.entered.stream { break }
        store.release.continuation.yield()
        try await again
        #expect(ledger.readUserCount == 1)
    }
}
