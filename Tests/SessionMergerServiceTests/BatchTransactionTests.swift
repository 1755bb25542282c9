import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import SessionMergerCore
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// The batch transaction against the real local PostgreSQL (no broker: batches are built by hand).
    @Suite("Batch transaction", .timeLimit(.minutes(3)))
    struct BatchTransactionTests {
        @Test func oneBatchWritesEventsSessionsOutboxAndOffsetsTogether() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: "sk-\(token())")
                let result = try await db.process([checkIn], from: 41)
                #expect(result.verdicts.count == 1)
                let verdict = try #require(result.verdicts.first)
                #expect(verdict.outcome == .accepted)
                #expect(verdict.httpStatus == 201)
                #expect(verdict.serverReceiptId == ServerReceipt.id(forIdempotencyKey: checkIn.raw.idempotencyKey))
                #expect(verdict.sessionId == SessionSnapshot.id(anchorIdempotencyKey: checkIn.raw.idempotencyKey))
                #expect(verdict.gatewayInstance == "gw-1")

                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE user_id = \(user) AND outcome = 'accepted' AND http_status = 201")
                        == 1)
                let sessions = try await db.sessions(user: user)
                #expect(sessions.map(\.id) == [try #require(verdict.sessionId)])
                #expect(sessions.first?.status == "open")
                #expect(try await db.outbox(user: user).map(\.change) == [.opened])
                #expect(try await db.storedOffset() == 42)
                #expect(try await db.count("SELECT count(*)::int FROM timelines WHERE user_id = \(user) AND site_id = \(site)") == 1)
            }
        }

        @Test func aReceiptIsTheFirst128BitsOfTheKeysSHA256InLowercaseHex() {
            // Receipts recorded by earlier versions must be derived again identically: a fixed vector.
            #expect(ServerReceipt.id(forIdempotencyKey: "abc") == "rcpt_ba7816bf8f01cfea414140de5dae2223")
            #expect(ServerReceipt.id(forIdempotencyKey: "") == "rcpt_e3b0c44298fc1c149afbf4c8996fb924")
        }

        @Test func theSameEventThreeTimesIsRecordedOnceAndAnsweredWithTheOriginalReceipt() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", key = newKey(), now = Date()
                let event = Make.checkIn(user: user, site: site, at: now.minus(minutes: 10), sessionKey: "sk-\(token())", key: key)
                var retryOtherGateway = event
                retryOtherGateway.raw.gatewayInstance = "gw-2"
                retryOtherGateway.raw.requestId = "req-retry"

                // Three copies in one batch (concurrent retries).
                let first = try await db.process([event, event, retryOtherGateway], from: 0)
                #expect(first.verdicts.map(\.outcome) == [.accepted, .duplicate, .duplicate])
                #expect(first.verdicts.map(\.httpStatus) == [201, 200, 200])
                try #require(first.verdicts.count == 3)
                let receipt = try #require(first.verdicts[0].serverReceiptId)
                let session = try #require(first.verdicts[0].sessionId)
                #expect(first.verdicts.allSatisfy { $0.serverReceiptId == receipt && $0.sessionId == session })
                // Each verdict goes back to the gateway holding that request.
                #expect(first.verdicts.map(\.gatewayInstance) == ["gw-1", "gw-1", "gw-2"])
                #expect(first.verdicts[2].requestId == "req-retry")

                // Three more across later batches.
                for offset in Int64(3)...5 {
                    let again = try await db.process([event], from: offset)
                    #expect(again.verdicts.map(\.outcome) == [.duplicate])
                    #expect(again.verdicts.first?.serverReceiptId == receipt)
                    #expect(again.verdicts.first?.sessionId == session)
                }
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE idempotency_key = \(key)") == 1)
                #expect(try await db.sessions(user: user).count == 1)
                #expect(try await db.outbox(user: user).count == 1)
                #expect(try await db.storedOffset() == 6)
            }
        }

        @Test func aRedeliveredKeyAmongNewOnesIsAnsweredFromItsRecord() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sessionKey = "sk-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sessionKey)
                let first = try await db.process([checkIn], from: 0)
                #expect(first.attempts == 1)

                // Tried as all new, the insert finds the check-in recorded: the batch is decided again
                // with its keys looked up.
                let mixed = try await db.process(
                    [
                        Make.heartbeat(user: user, at: now.minus(minutes: 20), sessionKey: sessionKey), checkIn,
                        Make.heartbeat(user: user, at: now.minus(minutes: 15), sessionKey: sessionKey),
                    ], from: 1)
                #expect(mixed.verdicts.map(\.outcome) == [.accepted, .duplicate, .accepted])
                try #require(mixed.verdicts.count > 1)
                #expect(mixed.verdicts[1].serverReceiptId == first.verdicts.first?.serverReceiptId)
                #expect(mixed.attempts == 2)
                // After a redelivery the next batch is looked up first (once), then tried as all new again.
                for offset in Int64(4)...5 {
                    let next = try await db.process(
                        [Make.heartbeat(user: user, at: now.minus(minutes: Double(14 - offset)), sessionKey: sessionKey)], from: offset)
                    #expect(next.verdicts.map(\.outcome) == [.accepted])
                    #expect(next.attempts == 1)
                }
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE user_id = \(user)") == 5)
                #expect(try await db.sessions(user: user).count == 1)
                #expect(try await db.storedOffset() == 6)
            }
        }

        @Test func aDifferentPayloadUnderTheSameKeyIsAMismatch() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", key = newKey(), now = Date()
                let original = Make.checkIn(user: user, site: site, at: now.minus(minutes: 5), sessionKey: "sk-1", key: key)
                let altered = Make.checkIn(
                    user: user, site: site, at: now.minus(minutes: 4), sessionKey: "sk-1", key: key, fingerprint: "fp-other")
                let batch = try await db.process([original, altered], from: 0)
                #expect(batch.verdicts.map(\.outcome) == [.accepted, .payloadMismatch])
                try #require(batch.verdicts.count > 1)
                #expect(batch.verdicts[1].httpStatus == 422)
                let later = try await db.process([altered], from: 2)
                #expect(later.verdicts.map(\.httpStatus) == [422])
                #expect(later.verdicts.first?.serverReceiptId == nil)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE idempotency_key = \(key) AND payload_fingerprint = \("fp-\(key)")")
                        == 1)
            }
        }

        @Test func aPolicyRejectionIsRecordedAndReplayed() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", key = newKey(), now = Date()
                let rejected = Make.checkIn(
                    user: user, site: site, at: now.minus(minutes: 3), sessionKey: "sk-r", key: key, decision: Make.reject())
                let first = try await db.process([rejected], from: 0)
                let verdict = try #require(first.verdicts.first)
                #expect(verdict.outcome == .rejected)
                #expect(verdict.httpStatus == 409)
                #expect(verdict.reasons == ["no walking detected before the punch"])
                #expect(verdict.action == .walkToGate)
                #expect(verdict.retryAfterSeconds == 30)
                #expect(verdict.policyVersion == 7)
                #expect(verdict.sessionId == nil)

                // The retry replays the 409, from the table.
                let replay = try await db.process([rejected], from: 1)
                #expect(replay.verdicts.first?.outcome == .rejected)
                #expect(replay.verdicts.first?.reasons == verdict.reasons)
                #expect(replay.verdicts.first?.action == .walkToGate)
                #expect(replay.verdicts.first?.retryAfterSeconds == 30)
                // A mismatching retry of a rejected key is still a mismatch.
                var altered = rejected
                altered.raw.payloadFingerprint = "fp-different"
                #expect(try await db.process([altered], from: 2).verdicts.first?.outcome == .payloadMismatch)

                #expect(
                    try await db.count(
                        """
                        SELECT count(*)::int FROM events WHERE idempotency_key = \(key) AND outcome = 'rejected' AND http_status = 409
                          AND reasons = '["no walking detected before the punch"]'::jsonb AND action = 'walk_to_gate' AND retry_after_seconds = 30
                        """) == 1)
                // Never reaches a timeline.
                #expect(try await db.sessions(user: user).isEmpty)
                #expect(try await db.count("SELECT count(*)::int FROM timelines WHERE user_id = \(user)") == 0)
            }
        }

        @Test func anUndecodableMessageIsDeadLetteredAndItsOffsetAdvances() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())"
                let good = Make.checkIn(user: user, site: site, at: Date().minus(minutes: 1), sessionKey: "sk-\(token())")
                let messages = [
                    KafkaMessage(topic: db.topic, partition: 0, offset: 10, key: Array(user.utf8), value: Array("{not json".utf8)),
                    KafkaMessage(
                        topic: db.topic, partition: 0, offset: 11, key: Array(user.utf8), value: try ProtocolCodec.wire.encode(good)),
                    KafkaMessage(
                        topic: db.topic, partition: 0, offset: 12, key: Array(user.utf8), value: Array(#"{"schemaVersion":1}"#.utf8)),
                ]
                let result = try await db.processor.process(messages)
                #expect(result.verdicts.map(\.outcome) == [.accepted])
                let letters = db.deadLetters.all
                #expect(letters.map(\.offset) == [10, 12])
                #expect(letters.allSatisfy { $0.sourceTopic == db.topic && $0.key == user })
                #expect(letters.first?.reason == .decodeFailed)
                #expect(letters.last?.errorField != nil)
                #expect(try await db.storedOffset() == 13)
            }
        }

        @Test func aHeartbeatWhoseSessionKeyIsUnknownIsRejectedNotLost() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())"
                let heartbeat = Make.heartbeat(user: user, at: Date().minus(minutes: 1), sessionKey: "sk-never-\(token())")
                let result = try await db.process([heartbeat], from: 0)
                #expect(result.verdicts.first?.outcome == .rejected)
                #expect(result.verdicts.first?.reasons.first?.hasPrefix("unknown_site") == true)
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE user_id = \(user) AND outcome = 'rejected'") == 1)
            }
        }

        @Test func checkOutsAndHeartbeatsFindTheirSiteThroughTheSessionKey() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sessionKey = "sk-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 40), sessionKey: sessionKey)
                // Same batch: the heartbeat's site comes from the check-in next to it.
                let first = try await db.process(
                    [
                        checkIn, Make.heartbeat(user: user, at: now.minus(minutes: 35), sessionKey: sessionKey),
                    ], from: 0)
                let session = SessionSnapshot.id(anchorIdempotencyKey: checkIn.raw.idempotencyKey)
                #expect(first.verdicts.map(\.sessionId) == [session, session])
                // Later batch: from merger.session_keys.
                let later = try await db.process([Make.heartbeat(user: user, at: now.minus(minutes: 30), sessionKey: sessionKey)], from: 2)
                #expect(later.verdicts.first?.sessionId == session)
                #expect(later.verdicts.first?.siteId == site)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE user_id = \(user) AND site_id = \(site) AND session_id = \(session)")
                        == 3)
            }
        }

        /// Every column as the batch decided it, NULLs included (the rows travel as one typed array per
        /// column, nullable ones with a placeholder and a null bit), and the envelope exactly as the
        /// policy service sent it.
        @Test func eachColumnOfAnAcceptedAndARejectedRowIsStoredAsDecided() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sessionKey = "sk-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 20), sessionKey: sessionKey)
                let orphan = Make.heartbeat(user: user, at: now.minus(minutes: 5), sessionKey: "sk-never-\(token())")
                let result = try await db.process([checkIn, orphan], from: 7)
                #expect(result.verdicts.map(\.outcome) == [.accepted, .rejected])
                // What the merger received: times at the wire's millisecond precision.
                func onTheWire(_ event: VettedEvent) throws -> RawEventEnvelope {
                    let decoded: VettedEvent = try ProtocolCodec.wire.decode(from: try ProtocolCodec.wire.encode(event))
                    return decoded.raw
                }

                struct Row: Equatable {
                    var site: String?, sessionKey: String?, sessionId: String?, retryAfter: Int?, policyVersion: Int?, risk: Double?
                    var topic: String?, partition: Int?, offset: Int64?, eventTime: Date, envelope: String
                }
                func row(_ key: String) async throws -> Row {
                    let rows = try await db.client.query(
                        """
                        SELECT site_id, session_key, session_id, retry_after_seconds, policy_version, risk_score, source_topic,
                               source_partition, source_offset, event_time, envelope::text
                        FROM events WHERE idempotency_key = \(key)
                        """, logger: MergerDB.logger)
                    for try await (site, sessionKey, sessionId, retry, version, risk, topic, partition, offset, time, envelope)
                        in rows.decode((String?, String?, String?, Int?, Int?, Double?, String?, Int?, Int64?, Date, String).self)
                    {
                        return Row(
                            site: site, sessionKey: sessionKey, sessionId: sessionId, retryAfter: retry, policyVersion: version,
                            risk: risk, topic: topic, partition: partition, offset: offset, eventTime: time, envelope: envelope)
                    }
                    throw MergerWriteConflict(what: "no row for \(key)")
                }

                let accepted = try await row(checkIn.raw.idempotencyKey)
                #expect(accepted.site == site)
                #expect(accepted.sessionKey == sessionKey)
                #expect(accepted.sessionId == SessionSnapshot.id(anchorIdempotencyKey: checkIn.raw.idempotencyKey))
                #expect(accepted.retryAfter == nil)
                #expect(accepted.policyVersion == 7)
                #expect(accepted.risk == 0.05)
                #expect(accepted.topic == db.topic && accepted.partition == 0 && accepted.offset == 7)
                // Stored exactly at the wire's millisecond (a Date read back may differ in its last bits).
                #expect(abs(accepted.eventTime.timeIntervalSince(try onTheWire(checkIn).payload.eventTime)) < 0.000_000_5)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE idempotency_key = \(checkIn.raw.idempotencyKey) AND extract(microseconds FROM event_time)::int % 1000 = 0"
                    ) == 1)
                #expect(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: accepted.envelope) == (try onTheWire(checkIn)))
                #expect(accepted.envelope == (try ProtocolCodec.wire.encodeToString(checkIn.raw)))

                let rejected = try await row(orphan.raw.idempotencyKey)
                #expect(rejected.site == nil)
                #expect(rejected.sessionKey == orphan.raw.payload.sessionKey)
                #expect(rejected.sessionId == nil)
                #expect(rejected.retryAfter == nil)
                #expect(rejected.policyVersion == 7)
                #expect(rejected.offset == 8)
                #expect(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: rejected.envelope) == (try onTheWire(orphan)))
            }
        }
    }
}
