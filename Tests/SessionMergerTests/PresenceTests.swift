import AttendanceProtocol
import Foundation
import SessionMergerCore
import Testing

@Suite("Heartbeats and idle close")
struct HeartbeatIdleTests {
    @Test("heartbeats extend an open session")
    func heartbeatExtends() throws {
        var timeline = try newTimeline()
        let outcomes = try timeline.applyAll([
            checkIn("a", at(8), key: "K"), heartbeat("h1", at(8, 5), key: "K"), heartbeat("h2", at(8, 10), key: "K"),
        ])
        #expect(outcomes.map(\.changes.kinds) == [[.opened], [.extended], [.extended]])
        #expect(outcomes.flatMap(\.changes).map(\.version) == [1, 2, 3])
        #expect(outcomes.map(\.sessionId) == [sid("a"), sid("a"), sid("a")])
        let session = try #require(timeline.currentSession)
        #expect(session.lastSeenAt == at(8, 10))
        #expect(session.checkInAt == at(8))
        #expect(session.eventIds == ["a", "h1", "h2"])
    }

    @Test("an open session without presence past 12 h closes with presence_timeout")
    func idleClose() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), heartbeat("h", at(8, 5))])
        #expect(timeline.closeIdle(now: at(20, 5, 0)).isEmpty) // exactly 12 h: not yet
        let closes = timeline.closeIdle(now: at(20, 5, 1))
        #expect(closes.kinds == [.closed])
        let close = try #require(closes.first)
        #expect(close.version == 3)
        let closed = close.session
        #expect(closed.closeReason == .presenceTimeout)
        #expect(closed.checkOutAt == nil)
        #expect(closed.endedAt == at(8, 5)) // presence ended at the last heartbeat, not at the cutoff
        #expect(timeline.currentSession == nil)
        #expect(timeline.closeIdle(now: at(23)).isEmpty) // nothing more to close

        let message = close.sessionChange(changedAt: at(20, 5, 1))
        #expect(message.change == .closed)
        #expect(message.closeReason == .presenceTimeout)
        #expect(message.closeReason?.rawValue == "presence_timeout")
        #expect(message.lastSeenAt == at(8, 5))
        #expect(message.version == 3)
    }

    @Test("presence after the idle gap starts over: a heartbeat is an orphan, a check-in opens a new session")
    func afterIdleGap() throws {
        var timeline = try newTimeline()
        let outcomes = try timeline.applyAll([
            checkIn("a", at(6)), heartbeat("late-hb", at(18, 0, 1)), checkIn("b", at(19)),
        ])
        try #require(outcomes.count == 3)
        #expect(outcomes[1].disposition == .applied(.orphanHeartbeat))
        #expect(outcomes[1].changes.kinds == [.closed])
        try #require(outcomes[1].changes.count > 0)
        #expect(outcomes[1].changes[0].session.closeReason == .presenceTimeout)
        #expect(outcomes[2].changes.kinds == [.opened])
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("b")])
    }

    @Test("a heartbeat with no session is an orphan")
    func orphanHeartbeat() throws {
        var timeline = try newTimeline()
        let outcome = try timeline.apply(heartbeat("h", at(9), key: "K"))
        #expect(outcome.disposition == .applied(.orphanHeartbeat))
        #expect(outcome.changes.isEmpty)
        #expect(timeline.sessions.isEmpty)
        #expect(timeline.eventCount == 1)
    }
}

@Suite("Duplicates")
struct DuplicateTests {
    @Test("re-applying an idempotency key is a no-op that reports the first copy's session")
    func duplicateNoOp() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), heartbeat("h", at(8, 5))])
        let before = timeline.state
        let again = try timeline.apply(checkIn("a", at(8), received: at(9)))
        #expect(again.disposition == .duplicate(placement: .session(sid("a")), conflicting: false))
        #expect(again.isDuplicate)
        #expect(again.changes.isEmpty)
        #expect(again.sessionId == sid("a"))
        #expect(timeline.state == before) // not even the clock moved
    }

    @Test("the same key with different content is flagged, still changes nothing")
    func conflictingDuplicate() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("a", at(8)))
        let before = timeline.state
        let other = try timeline.apply(checkOut("a", at(17)))
        #expect(other.disposition == .duplicate(placement: .session(sid("a")), conflicting: true))
        #expect(other.changes.isEmpty)
        #expect(timeline.state == before)
    }

    @Test("a duplicate orphan reports the orphan placement")
    func duplicateOrphan() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkOut("o", at(17)))
        #expect(try timeline.apply(checkOut("o", at(17))).disposition == .duplicate(placement: .orphanCheckOut, conflicting: false))
    }

    @Test("an event of another user or site is refused")
    func foreignEvent() throws {
        var timeline = try newTimeline()
        #expect(throws: SessionTimelineError.self) {
            _ = try timeline.apply(fact("x", .checkIn, at(8), user: "u_2"))
        }
        #expect(throws: SessionTimelineError.self) {
            _ = try timeline.apply(fact("y", .checkIn, at(8), site: "S_OTHER"))
        }
        #expect(timeline.eventCount == 0)
    }
}

@Suite("Orphans and session keys")
struct OrphanAndKeyTests {
    @Test("an orphan check-out is recorded, then a late earlier check-in adopts it")
    func orphanCheckOutAdopted() throws {
        var timeline = try newTimeline()
        let orphan = try timeline.apply(checkOut("o", at(17), key: "K"))
        #expect(orphan.isOrphanCheckOut)
        #expect(orphan.disposition == .applied(.orphanCheckOut))
        #expect(orphan.changes.isEmpty)
        #expect(orphan.sessionId == nil)
        #expect(timeline.sessions.isEmpty)

        // The check-in of that morning arrives after the check-out (received 17:03).
        let late = try timeline.apply(checkIn("i", at(8), key: "K", received: at(17, 3)))
        #expect(late.changes.kinds == [.opened, .softExit])
        #expect(late.changes.map(\.version) == [1, 2])
        try #require(late.changes.count > 1)
        #expect(late.changes[0].session.status == .open)
        #expect(late.changes[0].session.checkOutAt == nil)
        #expect(late.changes[1].session.checkOutAt == at(17))
        #expect(timeline.placement(ofIdempotencyKey: "o") == .session(sid("i")))

        let closes = timeline.closeIdle(now: at(17, 5, 1))
        #expect(closes.kinds == [.closed])
        let close = try #require(closes.first)
        #expect(close.session.closeReason == .checkOut)
        #expect(close.session.eventIds == ["i", "o"])
        #expect(close.version == 3)
    }

    @Test("orphan heartbeats are adopted by a late check-in before them")
    func orphanHeartbeatsAdopted() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([heartbeat("h1", at(8, 5), key: "K"), heartbeat("h2", at(8, 10), key: "K")])
        #expect(timeline.sessions.isEmpty)
        let late = try timeline.apply(checkIn("i", at(8), key: "K", received: at(8, 11)))
        #expect(late.changes.kinds == [.opened])
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].eventIds == ["i", "h1", "h2"])
        #expect(timeline.sessions[0].lastSeenAt == at(8, 10))
    }

    @Test("the session key wins over the soft-exit grace")
    func keyBeatsGrace() throws {
        var keyed = try newTimeline()
        try keyed.applyAll([
            checkIn("a", at(8), key: "K1"), checkOut("b", at(12), key: "K1"), heartbeat("h", at(12, 20), key: "K1"),
        ])
        #expect(keyed.sessions.count == 1)
        try #require(keyed.sessions.count > 0)
        #expect(keyed.sessions[0].status == .open)
        #expect(keyed.sessions[0].reopenCount == 1)

        var unkeyed = try newTimeline()
        let outcomes = try unkeyed.applyAll([
            checkIn("a", at(8)), checkOut("b", at(12)), heartbeat("h", at(12, 20)),
        ])
        #expect(outcomes[2].disposition == .applied(.orphanHeartbeat))
        #expect(unkeyed.sessions.map(\.status) == [.closed])
    }

    @Test("the session key never wins over the idle cutoff")
    func keyDoesNotBeatIdle() throws {
        var timeline = try newTimeline()
        let outcomes = try timeline.applyAll([checkIn("a", at(6), key: "K"), heartbeat("h", at(18, 1), key: "K")])
        #expect(outcomes[1].disposition == .applied(.orphanHeartbeat))
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].closeReason == .presenceTimeout)
    }

    @Test("a check-out carrying an earlier session's key does not end the current session")
    func staleKeyCheckOut() throws {
        var timeline = try newTimeline()
        let outcomes = try timeline.applyAll([
            checkIn("a", at(8), key: "K1"), checkOut("b", at(9), key: "K1"),
            checkIn("c", at(10), key: "K2"),
            checkOut("stale", at(10, 30), key: "K1"),
            heartbeat("h", at(10, 40), key: "K2"),
        ])
        #expect(outcomes[3].disposition == .applied(.orphanCheckOut))
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("c")])
        #expect(timeline.sessions.map(\.status) == [.closed, .open])
        try #require(timeline.sessions.count > 1)
        #expect(timeline.sessions[1].reopenCount == 0)

        // The same check-out with no key ends the current session.
        var unkeyed = try newTimeline()
        try unkeyed.applyAll([
            checkIn("a", at(8), key: "K1"), checkOut("b", at(9), key: "K1"), checkIn("c", at(10), key: "K2"),
            checkOut("plain", at(10, 30)),
        ])
        unkeyed.closeIdle(now: at(11))
        #expect(unkeyed.sessions.map(\.status) == [.closed, .closed])
    }

    @Test("a second check-out within the grace moves the end of presence")
    func laterCheckOutWins() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(12)), checkOut("c", at(12, 2))])
        timeline.closeIdle(now: at(13))
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].checkOutAt == at(12, 2))
        #expect(timeline.sessions[0].eventIds == ["a", "b", "c"])
    }
}
