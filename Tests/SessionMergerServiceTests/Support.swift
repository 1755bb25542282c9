import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import ServiceRuntime
import SessionMergerCore
import Synchronization
import Testing

@testable import SessionMergerService

/// The real local PostgreSQL with the merger migrations applied and a processor of a group of its own.
struct MergerDB: Sendable {
    let client: PostgresClient
    let processor: VettedBatchProcessor
    let deadLetters: CollectingDeadLetters
    let configuration: SessionMergerConfiguration
    let topic: String

    static let logger = LocalStack.logger(label: "merger-tests")

    /// A schema of the caller's own, built by the merger's migrations (`LocalStack.withMigratedSchema`).
    static func withSchema<T: Sendable>(_ body: (PostgresClient, String) async throws -> T) async throws -> T {
        try await LocalStack.withMigratedSchema(.merger, prefix: "merger_test", body)
    }

    static func run(
        userSites: @escaping @Sendable (String) -> [String]? = { _ in nil }, _ body: @escaping @Sendable (MergerDB) async throws -> Void
    ) async throws {
        try await withSchema { client, schema in
            var configuration = SessionMergerConfiguration()
            configuration.consumer.groupId = LocalStack.uniqueName("merger-test")
            configuration.schema = schema
            let sink = CollectingDeadLetters()
            let db = MergerDB(
                client: client,
                processor: VettedBatchProcessor(
                    client: client, configuration: configuration, deadLetters: sink, logger: logger, userSites: userSites),
                deadLetters: sink, configuration: configuration, topic: LocalStack.uniqueName("vetted"))
            try await body(db)
        }
    }

    /// Processes `events` as one polled batch on partition `partition`, offsets from `offset` on, by
    /// this database's processor or `processor` (another replica).
    @discardableResult
    func process(
        _ events: [VettedEvent], partition: Int32 = 0, from offset: Int64, with processor: VettedBatchProcessor? = nil
    ) async throws -> VettedBatchResult {
        try await (processor ?? self.processor).process(messages(events, partition: partition, from: offset))
    }

    /// `events` as a polled batch of this database's topic, offsets from `offset` on, keyed by user.
    func messages(_ events: [VettedEvent], partition: Int32 = 0, from offset: Int64 = 0) throws -> [KafkaMessage] {
        try events.enumerated().map { index, event in
            KafkaMessage(
                topic: topic, partition: partition, offset: offset + Int64(index), key: Array(event.raw.userId.utf8),
                value: try ProtocolCodec.wire.encode(event))
        }
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await client.query(query, logger: Self.logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    struct SessionRow: Sendable, Hashable {
        var id: String
        var status: String
        var closeReason: String?
        var version: Int
        var checkInAt: Date
    }

    func sessions(user: String) async throws -> [SessionRow] {
        let rows = try await client.query(
            "SELECT session_id, status, close_reason, version, check_in_at FROM sessions WHERE user_id = \(user) ORDER BY check_in_at, session_id",
            logger: Self.logger)
        var result: [SessionRow] = []
        for try await (id, status, reason, version, checkIn) in rows.decode((String, String, String?, Int, Date).self) {
            result.append(SessionRow(id: id, status: status, closeReason: reason, version: version, checkInAt: checkIn))
        }
        return result
    }

    /// Each recorded event of `user` (by idempotency key) and the session its row names ("none" for an
    /// orphan).
    func recordedSessions(user: String) async throws -> [String: String] {
        let rows = try await client.query(
            "SELECT idempotency_key, session_id FROM events WHERE user_id = \(user)", logger: Self.logger)
        var recorded: [String: String] = [:]
        for try await (key, session) in rows.decode((String, String?).self) { recorded[key] = session ?? "none" }
        return recorded
    }

    /// The outbox's session changes of a user, in order.
    func outbox(user: String) async throws -> [SessionChange] {
        let rows = try await client.query(
            "SELECT payload FROM session_change_outbox WHERE user_id = \(user) ORDER BY id", logger: Self.logger)
        var result: [SessionChange] = []
        for try await payload in rows.decode(String.self) {
            result.append(try ProtocolCodec.wire.decode(SessionChange.self, from: payload))
        }
        return result
    }

    func storedOffset(partition: Int32 = 0) async throws -> Int64? {
        try await processor.storedOffsets(for: [TopicPartition(topic: topic, partition: partition)])[
            TopicPartition(topic: topic, partition: partition)]
    }
}

/// Vetted events as the policy service writes them.
enum Make {
    static let meta = DeviceMeta(model: "Pixel 8", os: "Android 15", appVersion: "2.4.0")

    static func accept(at date: Date = Date()) -> PolicyDecision {
        PolicyDecision(
            outcome: .accept, ruleResults: [RuleResult(ruleId: .beaconValidity, mode: .enforce, fired: false)],
            riskScore: 0.05, action: .noAction, policyVersion: 7, decidedAt: date)
    }

    static func reject(at date: Date = Date()) -> PolicyDecision {
        PolicyDecision(
            outcome: .reject,
            ruleResults: [RuleResult(ruleId: .motionGating, mode: .enforce, fired: true, reason: "no walking detected before the punch")],
            riskScore: 0.9, action: .walkToGate, retryAfterSeconds: 30, policyVersion: 7, decidedAt: date)
    }

    static func envelope(
        _ payload: RawEventPayload, user: String, site: String?, key: String, received: Date, fingerprint: String? = nil,
        gateway: String = "gw-1"
    ) -> RawEventEnvelope {
        RawEventEnvelope(
            requestId: "req-\(token())", idempotencyKey: key, userId: user, deviceId: "dev-\(user)", siteId: site,
            appVersion: "2.4.0", gatewayInstance: gateway, receivedAt: received, payloadFingerprint: fingerprint ?? "fp-\(key)",
            payload: payload)
    }

    static func checkIn(
        user: String, site: String, at time: Date, sessionKey: String, key: String = newKey(), received: Date = Date(),
        decision: PolicyDecision = accept(), fingerprint: String? = nil, gateway: String = "gw-1"
    ) -> VettedEvent {
        let payload = RawEventPayload.checkIn(
            CheckInRequest(userId: user, siteId: site, ts: time, sessionKey: sessionKey, deviceMeta: meta))
        return VettedEvent(
            raw: envelope(payload, user: user, site: site, key: key, received: received, fingerprint: fingerprint, gateway: gateway),
            decision: decision)
    }

    static func heartbeat(user: String, at time: Date, sessionKey: String, key: String = newKey(), received: Date = Date()) -> VettedEvent {
        let payload = RawEventPayload.heartbeat(HeartbeatRequest(sessionKey: sessionKey, ts: time))
        return VettedEvent(raw: envelope(payload, user: user, site: nil, key: key, received: received), decision: accept())
    }

    static func checkOut(user: String, at time: Date, sessionKey: String, key: String = newKey(), received: Date = Date()) -> VettedEvent {
        let payload = RawEventPayload.checkOut(CheckOutRequest(sessionKey: sessionKey, ts: time, reason: .regionExit))
        return VettedEvent(raw: envelope(payload, user: user, site: nil, key: key, received: received), decision: accept())
    }

    /// A `POST /v1/attendance/events` event (the device payload).
    static func event(
        _ type: AttendanceEventType, user: String, site: String, at time: Date, key: String = newKey(), received: Date = Date()
    ) -> VettedEvent {
        let event = AttendanceEvent(
            id: "evt-\(token())", idempotencyKey: key, userId: user, deviceId: "dev-\(user)", timestamp: time, type: type,
            siteId: site, beacon: BeaconIdentity(uuid: UUID(), major: 100, minor: 7))
        return VettedEvent(raw: envelope(.event(event), user: user, site: site, key: key, received: received), decision: accept())
    }
}

extension Date {
    func minus(hours: Double = 0, minutes: Double = 0, seconds: Double = 0) -> Date {
        addingTimeInterval(-(hours * 3_600 + minutes * 60 + seconds))
    }
}
