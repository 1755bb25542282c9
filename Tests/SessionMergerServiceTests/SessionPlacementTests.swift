import AttendanceProtocol
import Foundation
import LocalStackTesting
import PostgresNIO
import SessionMergerCore
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// Sessions as the batches build them: event time, not arrival order, decides.
    @Suite("Session placement", .timeLimit(.minutes(3)))
    struct SessionPlacementTests {
        @Test func aSeventyTwoHourLateHeartbeatLandsInItsPastSession() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", now = Date()
                let oldKey = "sk-old-\(token())", newSessionKey = "sk-new-\(token())"
                let oldCheckIn = Make.checkIn(
                    user: user, site: site, at: now.minus(hours: 75), sessionKey: oldKey, received: now.minus(hours: 75))
                let oldCheckOut = Make.checkOut(user: user, at: now.minus(hours: 70), sessionKey: oldKey, received: now.minus(hours: 70))
                let newCheckIn = Make.checkIn(user: user, site: site, at: now.minus(hours: 2), sessionKey: newSessionKey)
                try await db.process([oldCheckIn, oldCheckOut], from: 0)
                try await db.process([newCheckIn], from: 2)

                // The phone was offline for 72 hours: its heartbeat from back then arrives now.
                let late = Make.heartbeat(user: user, at: now.minus(hours: 72), sessionKey: oldKey)
                let result = try await db.process([late], from: 3)
                let oldSession = SessionSnapshot.id(anchorIdempotencyKey: oldCheckIn.raw.idempotencyKey)
                #expect(result.verdicts.first?.outcome == .accepted)
                #expect(result.verdicts.first?.sessionId == oldSession)
                #expect(result.sessionChanges.map(\.session.id) == [oldSession])

                let sessions = try await db.sessions(user: user)
                #expect(sessions.map(\.id) == [oldSession, SessionSnapshot.id(anchorIdempotencyKey: newCheckIn.raw.idempotencyKey)])
                #expect(sessions.map(\.status) == ["closed", "open"])
                #expect(sessions.first?.closeReason == "check_out")
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE idempotency_key = \(late.raw.idempotencyKey) AND session_id = \(oldSession)"
                    ) == 1)
            }
        }

        @Test func aSessionKeyKeepsTheFirstSiteItWasSeenAtWhicheverReplicaRemembersIt() async throws {
            try await MergerDB.run { db in
                let replica = VettedBatchProcessor(
                    client: db.client, configuration: db.configuration, deadLetters: db.deadLetters, logger: MergerDB.logger)
                let user = "u-\(token())", first = "site-a-\(token())", second = "site-b-\(token())", sessionKey = "sk-\(token())"
                let now = Date()
                try await db.process([Make.checkIn(user: user, site: first, at: now.minus(minutes: 30), sessionKey: sessionKey)], from: 0)
                // Another replica sees the same session key with another site: the stored site stays,
                // and the replica must not remember the site it tried to store.
                try await db.process(
                    [Make.checkIn(user: user, site: second, at: now.minus(minutes: 20), sessionKey: sessionKey)], from: 1,
                    with: replica)
                let onReplica = try await db.process(
                    [Make.heartbeat(user: user, at: now.minus(minutes: 10), sessionKey: sessionKey)], from: 2, with: replica)
                let onFirst = try await db.process([Make.heartbeat(user: user, at: now.minus(minutes: 5), sessionKey: sessionKey)], from: 3)
                #expect(onReplica.verdicts.map(\.siteId) == [first])
                #expect(onFirst.verdicts.map(\.siteId) == [first])
                let rows = try await db.count(
                    "SELECT count(*)::int FROM session_keys WHERE user_id = \(user) AND session_key = \(sessionKey) AND site_id = \(first)")
                #expect(rows == 1)
            }
        }

        @Test("a key-only heartbeat takes its key's stored site, even beside an event naming another site for that key")
        func aKeyOnlyEventTakesTheStoredSiteWhateverItsBatchNames() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", first = "site-a-\(token())", second = "site-b-\(token())", sessionKey = "sk-\(token())"
                let now = Date()
                try await db.process([Make.checkIn(user: user, site: first, at: now.minus(minutes: 30), sessionKey: sessionKey)], from: 0)
                let batch = try await db.process(
                    [
                        Make.checkIn(user: user, site: second, at: now.minus(minutes: 20), sessionKey: sessionKey),
                        Make.heartbeat(user: user, at: now.minus(minutes: 10), sessionKey: sessionKey),
                    ], from: 1)
                // As if the heartbeat had come in a batch of its own.
                #expect(batch.verdicts.map(\.siteId) == [second, first])
            }
        }

        @Test func outOfOrderEventsGiveTheSameSessionsAsInOrder() async throws {
            let site = "site-\(token())"
            // The check-out overtakes its check-in: the registry says where the user works.
            try await MergerDB.run(userSites: { _ in [site] }) { db in
                let now = Date()
                func events(user: String, site: String, keys: [String]) -> [VettedEvent] {
                    let sk = "sk-\(user)"
                    return [
                        Make.checkIn(user: user, site: site, at: now.minus(hours: 3), sessionKey: sk, key: keys[0]),
                        Make.heartbeat(user: user, at: now.minus(hours: 2.5), sessionKey: sk, key: keys[1]),
                        Make.heartbeat(user: user, at: now.minus(hours: 2), sessionKey: sk, key: keys[2]),
                        Make.checkOut(user: user, at: now.minus(hours: 1), sessionKey: sk, key: keys[3]),
                    ]
                }
                let inOrderUser = "u-\(token())", shuffledUser = "u-\(token())"
                let inOrder = events(user: inOrderUser, site: site, keys: (0..<4).map { "a\($0)-" + newKey() })
                let shuffled = events(user: shuffledUser, site: site, keys: (0..<4).map { "a\($0)-" + newKey() })
                for (i, event) in inOrder.enumerated() { try await db.process([event], from: Int64(i)) }
                // Check-out first, then a heartbeat, then the check-in, then the other heartbeat; one per batch.
                for (i, index) in [3, 2, 0, 1].enumerated() { try await db.process([shuffled[index]], partition: 1, from: Int64(i)) }

                let a = try await db.sessions(user: inOrderUser)
                let b = try await db.sessions(user: shuffledUser)
                #expect(a.count == 1)
                #expect(b.count == 1)
                #expect(a.map(\.status) == ["closed"])
                #expect(b.map(\.status) == ["closed"])
                #expect(a.first?.checkInAt == b.first?.checkInAt)
                // Every event of the shuffled user ends up pointing at the one session (orphans adopted).
                let session = try #require(b.first?.id)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM events WHERE user_id = \(shuffledUser) AND session_id = \(session)") == 4)
            }
        }

        @Test func presenceWithinTheGraceReopensASoftExit() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sk = "sk-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 20), sessionKey: sk)
                try await db.process([checkIn, Make.checkOut(user: user, at: now.minus(minutes: 2), sessionKey: sk)], from: 0)
                let session = SessionSnapshot.id(anchorIdempotencyKey: checkIn.raw.idempotencyKey)
                #expect(try await db.sessions(user: user).map(\.status) == ["soft_exit"])

                let back = try await db.process([Make.heartbeat(user: user, at: now.minus(minutes: 1), sessionKey: sk)], from: 2)
                #expect(back.verdicts.first?.sessionId == session)
                #expect(back.sessionChanges.map(\.change) == [.reopened])
                let sessions = try await db.sessions(user: user)
                #expect(sessions.map(\.id) == [session])
                #expect(sessions.map(\.status) == ["open"])
                #expect(try await db.outbox(user: user).map(\.change) == [.opened, .softExit, .reopened])
                #expect(try await db.outbox(user: user).map(\.version) == [1, 2, 3])
            }
        }

        /// A gateway whose clock runs an hour ahead stamps its receipts in the merger's future: they count
        /// as the merger's now on the timeline's clock, so a check-out two minutes ago is a soft exit
        /// within its grace, not a check-out closed at once (which a return would then reopen).
        @Test func aReceiptStampedAheadOfTheMergersClockDoesNotCloseSessionsEarly() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sk = "sk-\(token())", now = Date()
                let ahead = now.addingTimeInterval(3_600)
                try await db.process(
                    [
                        Make.checkIn(user: user, site: site, at: now.minus(minutes: 20), sessionKey: sk, received: ahead),
                        Make.checkOut(user: user, at: now.minus(minutes: 2), sessionKey: sk, received: ahead),
                    ], from: 0)
                #expect(try await db.sessions(user: user).map(\.status) == ["soft_exit"])
                // The events keep the receipt the gateway stamped.
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE user_id = \(user) AND received_at > now()") == 2)
            }
        }

        /// `merger.events.session_id` follows an event that a later one moves: a late check-out splits the
        /// session, and the events after it (another key, two hours on) now make a session of their own.
        @Test(arguments: [false, true])
        func aRecordedEventsSessionFollowsItWhenALateEventSplitsItsSession(oneBatch: Bool) async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", now = Date(), k1 = "k1-\(token())", k2 = "k2-\(token())"
                let first = Make.checkIn(user: user, site: site, at: now.minus(hours: 4), sessionKey: k1)
                let second = Make.checkIn(user: user, site: site, at: now.minus(hours: 2), sessionKey: k2)
                let heartbeat = Make.heartbeat(user: user, at: now.minus(hours: 1, minutes: 50), sessionKey: k2)
                let lateCheckOut = Make.checkOut(user: user, at: now.minus(hours: 3), sessionKey: k1)
                if oneBatch {
                    try await db.process([first, second, heartbeat, lateCheckOut], from: 0)
                } else {
                    let before = try await db.process([first, second, heartbeat], from: 0)
                    #expect(Set(before.verdicts.map(\.sessionId)) == [SessionSnapshot.id(anchorIdempotencyKey: first.raw.idempotencyKey)])
                    try await db.process([lateCheckOut], from: 3)
                }
                let firstId = SessionSnapshot.id(anchorIdempotencyKey: first.raw.idempotencyKey)
                let secondId = SessionSnapshot.id(anchorIdempotencyKey: second.raw.idempotencyKey)
                #expect(Set(try await db.sessions(user: user).map(\.id)) == [firstId, secondId])
                let recorded = try await db.recordedSessions(user: user)
                #expect(recorded[first.raw.idempotencyKey] == firstId && recorded[lateCheckOut.raw.idempotencyKey] == firstId)
                #expect(recorded[second.raw.idempotencyKey] == secondId && recorded[heartbeat.raw.idempotencyKey] == secondId)
            }
        }

        /// In one batch a late check-in supersedes a recorded session and a late check-out then brings it
        /// back: the session's own rows, and a heartbeat of it in the same batch, stay with it.
        @Test func aSessionSupersededAndBackInOneBatchKeepsItsEvents() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", now = Date(), early = "kl-\(token())", later = "kx-\(token())"
                let x = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: later)
                try await db.process([x], from: 0)
                let lateCheckIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 60), sessionKey: early)
                let lateCheckOut = Make.checkOut(user: user, at: now.minus(minutes: 59), sessionKey: early)
                let heartbeat = Make.heartbeat(user: user, at: now.minus(minutes: 25), sessionKey: later)
                let result = try await db.process([lateCheckIn, lateCheckOut, heartbeat], from: 1)
                let xId = SessionSnapshot.id(anchorIdempotencyKey: x.raw.idempotencyKey)
                let lId = SessionSnapshot.id(anchorIdempotencyKey: lateCheckIn.raw.idempotencyKey)
                // X was superseded on the way and is back.
                #expect(result.sessionChanges.contains { $0.session.id == xId && $0.session.closeReason == .superseded })
                #expect(Set(try await db.sessions(user: user).filter { $0.closeReason != "superseded" }.map(\.id)) == [xId, lId])
                let recorded = try await db.recordedSessions(user: user)
                #expect(recorded[x.raw.idempotencyKey] == xId && recorded[heartbeat.raw.idempotencyKey] == xId)
                #expect(recorded[lateCheckIn.raw.idempotencyKey] == lId && recorded[lateCheckOut.raw.idempotencyKey] == lId)
            }
        }

        @Test func theIdleSweepClosesSessionsWithoutPresence() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", now = Date()
                let checkIn = Make.checkIn(user: user, site: site, at: now.minus(hours: 11, minutes: 30), sessionKey: "sk-\(token())")
                try await db.process([checkIn], from: 0)
                #expect(try await db.sessions(user: user).map(\.status) == ["open"])
                #expect(
                    try await db.count("SELECT count(*)::int FROM timelines WHERE user_id = \(user) AND next_check_at IS NOT NULL")
                        == 1)

                let sweeper = IdleSweeper(client: db.client, configuration: db.configuration, logger: MergerDB.logger)
                // Nothing is due yet for this user.
                try await sweeper.sweep(now: now)
                #expect(try await db.sessions(user: user).map(\.status) == ["open"])
                // An hour later the 12 h cutoff has passed.
                try await sweeper.sweep(now: now.addingTimeInterval(3_600))
                let sessions = try await db.sessions(user: user)
                #expect(sessions.map(\.status) == ["closed"])
                #expect(sessions.first?.closeReason == "presence_timeout")
                #expect(try await db.outbox(user: user).map(\.change) == [.opened, .closed])
                #expect(
                    try await db.count("SELECT count(*)::int FROM timelines WHERE user_id = \(user) AND next_check_at IS NULL") == 1)
            }
        }

        @Test func aLateEarlierCheckInSupersedesTheLaterAnchor() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sk = "sk-\(token())", now = Date()
                let later = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sk)
                let earlier = Make.checkIn(user: user, site: site, at: now.minus(minutes: 50), sessionKey: sk)
                try await db.process([later], from: 0)
                let result = try await db.process([earlier], from: 1)
                let survivor = SessionSnapshot.id(anchorIdempotencyKey: earlier.raw.idempotencyKey)
                let gone = SessionSnapshot.id(anchorIdempotencyKey: later.raw.idempotencyKey)
                #expect(result.verdicts.first?.sessionId == survivor)
                let rows = try await db.sessions(user: user)
                #expect(Set(rows.map(\.id)) == [survivor, gone])
                #expect(rows.first { $0.id == gone }?.closeReason == "superseded")
                #expect(rows.first { $0.id == survivor }?.status == "open")
                // The first check-in's event row follows its session.
                #expect(
                    try await db.count("SELECT count(*)::int FROM events WHERE user_id = \(user) AND session_id = \(survivor)") == 2)
            }
        }

        @Test("two late check-ins in one batch, each earlier than the last: every event row follows the final survivor")
        func aChainOfSupersededSessionsLeadsEveryRowToTheLastSurvivor() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())", sk = "sk-\(token())", now = Date()
                let c = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sk)
                let b = Make.checkIn(user: user, site: site, at: now.minus(minutes: 40), sessionKey: sk)
                let a = Make.checkIn(user: user, site: site, at: now.minus(minutes: 50), sessionKey: sk)
                try await db.process([c], from: 0)
                // B supersedes C's session, then A supersedes B's, in the same transaction.
                try await db.process([b, a], from: 1)
                let survivor = SessionSnapshot.id(anchorIdempotencyKey: a.raw.idempotencyKey)
                #expect(try await db.sessions(user: user).filter { $0.status == "open" }.map(\.id) == [survivor])
                #expect(
                    try await db.count("SELECT count(*)::int FROM events WHERE user_id = \(user) AND session_id = \(survivor)") == 3)
            }
        }
    }
}
