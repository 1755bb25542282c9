import AttendanceProtocol
import Foundation
import SessionMergerCore
import Testing

@Suite("Merge window")
struct MergeWindowTests {
    @Test("two check-ins 20 s apart are one session")
    func twentySecondsApart() throws {
        var timeline = try newTimeline()
        let first = try timeline.apply(checkIn("a", at(8, 0, 0)))
        let second = try timeline.apply(checkIn("b", at(8, 0, 20)))

        #expect(first.changes.kinds == [.opened])
        #expect(first.changes.map(\.version) == [1])
        #expect(second.changes.kinds == [.extended])
        #expect(second.changes.map(\.version) == [2])
        #expect(first.sessionId == sid("a"))
        #expect(second.sessionId == sid("a"))

        let sessions = timeline.sessions
        #expect(sessions.count == 1)
        try #require(sessions.count > 0)
        #expect(sessions[0].id == sid("a"))
        #expect(sessions[0].status == .open)
        #expect(sessions[0].checkInAt == at(8, 0, 0))
        #expect(sessions[0].lastSeenAt == at(8, 0, 20))
        #expect(sessions[0].eventIds == ["a", "b"])
    }

    @Test("check-ins 90 s apart with a check-out between are two sessions (grace 60 s)")
    func ninetySecondsApartAfterCheckOut() throws {
        // Gap check-out -> check-in is 70 s: past the 60 s grace and the 45 s merge window.
        var timeline = try newTimeline(SessionPolicy(softExitGrace: 60))
        _ = try timeline.apply(checkIn("a", at(8, 0, 0)))
        let out = try timeline.apply(checkOut("b", at(8, 0, 20)))
        let second = try timeline.apply(checkIn("c", at(8, 1, 30)))

        // The check-out is younger than the 10 s noise threshold when applied: still open.
        #expect(out.changes.kinds == [.extended])
        try #require(out.changes.count > 0)
        #expect(out.changes[0].session.status == .open)
        #expect(second.changes.kinds == [.closed, .opened])
        #expect(second.changes.ids == [sid("a"), sid("c")])
        try #require(second.changes.count > 1)
        #expect(second.changes[0].session.closeReason == .checkOut)
        #expect(second.changes[0].session.checkOutAt == at(8, 0, 20))
        #expect(second.changes[0].version == 3)
        #expect(second.changes[1].version == 1)

        let sessions = timeline.sessions
        #expect(sessions.map(\.id) == [sid("a"), sid("c")])
        #expect(sessions.map(\.status) == [.closed, .open])
        try #require(sessions.count > 1)
        #expect(sessions[0].eventIds == ["a", "b"])
        #expect(sessions[1].eventIds == ["c"])
    }

    @Test("the same 90 s with the default 5 min grace reopen the session")
    func ninetySecondsDefaultGrace() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("a", at(8, 0, 0)))
        // Received 20 s after it happened: past the noise threshold, so it is a soft exit.
        let out = try timeline.apply(checkOut("b", at(8, 0, 20), received: at(8, 0, 40)))
        let back = try timeline.apply(checkIn("c", at(8, 1, 30)))
        #expect(out.changes.kinds == [.softExit])
        #expect(back.changes.kinds == [.reopened])
        #expect(timeline.sessions.count == 1)
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].reopenCount == 1)
        #expect(timeline.sessions[0].eventIds == ["a", "b", "c"])
    }

    /// The merger's host ran 30 minutes ahead, then NTP stepped it back: the clock the timeline kept
    /// from then would close every check-out at once (past its 5-minute grace), and a person back from
    /// a break would get a second session. The present replaces a clock that far ahead.
    @Test("a clock left ahead by a host whose clock was stepped back takes the present")
    func clockSteppedBack() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("a", at(8, 0, 0)))
        timeline.closeIdle(now: at(8, 40, 0)) // the host 30 minutes ahead
        _ = try timeline.apply(checkOut("b", at(8, 10, 0), received: at(8, 10, 20))) // stepped back
        #expect(timeline.sessions.last?.status == .closed) // the clock of 8:40 closed it at once
        let settled = timeline.closeIdle(now: at(8, 10, 30))
        #expect(settled.kinds == [.softExit])
        let back = try timeline.apply(checkIn("c", at(8, 12, 0)))
        #expect(back.changes.kinds == [.reopened])
        #expect(timeline.sessions.count == 1)
        // Within the tolerance (two hosts' skew), the clock does not go back.
        timeline.closeIdle(now: at(8, 13, 0))
        #expect(timeline.closeIdle(now: at(8, 12, 30)).isEmpty)
        #expect(timeline.clock == at(8, 13, 0))
    }

    @Test("a check-in within the merge window of a check-out joins even when the grace is shorter")
    func mergeWindowBeatsShortGrace() throws {
        // Grace 10 s; check-in 40 s after the check-out: past the grace, inside the 45 s merge window.
        var timeline = try newTimeline(SessionPolicy(softExitGrace: 10))
        try timeline.applyAll([
            checkIn("a", at(8, 0, 0)), checkOut("b", at(8, 0, 20), received: at(8, 0, 35)), checkIn("c", at(8, 1, 0)),
        ])
        #expect(timeline.sessions.map(\.id) == [sid("a")])
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].status == .open)

        // 50 s after the check-out is outside both: a new session.
        var other = try newTimeline(SessionPolicy(softExitGrace: 10))
        try other.applyAll([
            checkIn("a", at(8, 0, 0)), checkOut("b", at(8, 0, 20), received: at(8, 0, 35)), checkIn("c", at(8, 1, 10)),
        ])
        #expect(other.sessions.map(\.id) == [sid("a"), sid("c")])
    }

    @Test("different session keys inside the merge window are still one session")
    func keysDoNotSplit() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8, 0, 0), key: "K1"), checkIn("b", at(8, 0, 30), key: "K2")])
        #expect(timeline.sessions.count == 1)
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].sessionKeys == ["K1", "K2"])
        #expect(timeline.sessions[0].primarySessionKey == "K1")
    }
}

@Suite("Soft exit")
struct SoftExitTests {
    @Test("presence within the grace reopens the same session")
    func reopenWithinGrace() throws {
        var timeline = try newTimeline()
        let opened = try timeline.apply(checkIn("a", at(8), key: "K1"))
        let exit = try timeline.apply(checkOut("b", at(12), key: "K1", received: at(12, 3)))
        let back = try timeline.apply(checkIn("c", at(12, 4, 59), key: "K2"))

        #expect(opened.changes.kinds == [.opened])
        #expect(exit.changes.kinds == [.softExit])
        try #require(exit.changes.count > 0)
        #expect(exit.changes[0].session.status == .softExit)
        #expect(exit.changes[0].session.checkOutAt == at(12))
        #expect(back.changes.kinds == [.reopened])
        #expect(back.changes.map(\.version) == [3])
        let session = try #require(timeline.currentSession)
        #expect(session.id == sid("a"))
        #expect(session.status == .open)
        #expect(session.checkOutAt == nil)
        #expect(session.reopenCount == 1)
        #expect(session.sessionKeys == ["K1", "K2"])
    }

    @Test("a heartbeat within the grace reopens too")
    func heartbeatReopens() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(12), received: at(12, 1))])
        let back = try timeline.apply(heartbeat("h", at(12, 5)))
        #expect(back.changes.kinds == [.reopened])
        #expect(timeline.sessions.map(\.status) == [.open])
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].lastSeenAt == at(12, 5))
    }

    @Test("after the grace the check-out closes the session and a check-in opens a new one")
    func newSessionAfterGrace() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(12), received: at(12, 3))])
        #expect(timeline.closeIdle(now: at(12, 5, 0)).isEmpty) // exactly 5 min: still in grace
        let closes = timeline.closeIdle(now: at(12, 5, 1))
        #expect(closes.kinds == [.closed])
        let close = try #require(closes.first)
        #expect(close.session.closeReason == .checkOut)
        #expect(close.session.checkOutAt == at(12))
        #expect(close.session.endedAt == at(12))

        let next = try timeline.apply(checkIn("c", at(12, 6)))
        #expect(next.changes.kinds == [.opened])
        #expect(next.changes.ids == [sid("c")])
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("c")])
        #expect(timeline.sessions.map(\.status) == [.closed, .open])
    }

    @Test("a check-in after the grace closes the soft exit in the same step")
    func closeAndOpenTogether() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(12), received: at(12, 3))])
        let next = try timeline.apply(checkIn("c", at(12, 6)))
        #expect(next.changes.kinds == [.closed, .opened])
        #expect(next.changes.ids == [sid("a"), sid("c")])
    }

    @Test("a gap exactly at the grace reopens, one second more does not")
    func graceBoundary() throws {
        var inside = try newTimeline()
        try inside.applyAll([checkIn("a", at(8)), checkOut("b", at(12)), heartbeat("h", at(12, 5, 0))])
        #expect(inside.sessions.count == 1)
        try #require(inside.sessions.count > 0)
        #expect(inside.sessions[0].reopenCount == 1)

        var outside = try newTimeline()
        let outcomes = try outside.applyAll([checkIn("a", at(8)), checkOut("b", at(12)), heartbeat("h", at(12, 5, 1))])
        #expect(outside.sessions.map(\.status) == [.closed])
        #expect(outcomes[2].disposition == .applied(.orphanHeartbeat))
    }
}

@Suite("Noise shorter than 10 s never checks out")
struct NoiseTests {
    @Test("a check-out followed by presence within 10 s never becomes a check-out")
    func noiseNeverChecksOut() throws {
        var timeline = try newTimeline()
        var all: [SessionDelta] = []
        for outcome in try timeline.applyAll([
            checkIn("a", at(8)), checkOut("b", at(9, 0, 0)), heartbeat("c", at(9, 0, 9)),
        ]) { all += outcome.changes }
        all += timeline.closeIdle(now: at(9, 30))

        #expect(all.kinds == [.opened, .extended, .extended])
        let session = try #require(timeline.currentSession)
        #expect(session.status == .open)
        #expect(session.checkOutAt == nil)
        #expect(session.reopenCount == 0)
        #expect(session.eventIds == ["a", "b", "c"])
        #expect(timeline.placement(ofIdempotencyKey: "b") == .session(sid("a")))
    }

    @Test("every gap below 10 s, in either arrival order, leaves no check-out", arguments: [0, 1, 5, 9, 9.999])
    func everyGapBelowTen(gap: Double) throws {
        let events = [
            checkIn("a", at(8)),
            checkOut("b", at(9)),
            checkIn("c", at(9).addingTimeInterval(gap)),
        ]
        for order in [[0, 1, 2], [0, 2, 1], [2, 1, 0], [1, 0, 2]] {
            var timeline = try newTimeline()
            var all: [SessionDelta] = []
            for i in order { all += try timeline.apply(events[i]).changes }
            all += timeline.closeIdle(now: at(9, 1))
            // (A session superseded by an earlier check-in is not a check-out.)
            #expect(!all.contains { $0.change == .closed && $0.session.closeReason != .superseded }, "gap \(gap) order \(order)")
            #expect(!all.contains { $0.change == .softExit })
            #expect(timeline.sessions.count == 1)
            try #require(timeline.sessions.count > 0)
            #expect(timeline.sessions[0].status == .open)
            #expect(timeline.sessions[0].checkOutAt == nil)
            #expect(timeline.sessions[0].reopenCount == 0)
        }
    }

    @Test("a check-out received late is a soft exit until the noise shows up, then reopened, never closed")
    func lateNoiseCorrects() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("a", at(8)))
        let exit = try timeline.apply(checkOut("b", at(9), received: at(9, 3)))
        #expect(exit.changes.kinds == [.softExit])
        let noise = try timeline.apply(heartbeat("c", at(9, 0, 5), received: at(9, 4)))
        #expect(noise.changes.kinds == [.reopened])
        try #require(noise.changes.count > 0)
        try #require(timeline.sessions.count > 0)
        #expect(noise.changes[0].session.checkOutAt == nil)
        #expect(timeline.sessions[0].reopenCount == 0) // it was noise, not a real soft exit
    }

    @Test("a gap of exactly 10 s is a real soft exit (reopened within grace)")
    func tenSecondsIsNotNoise() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(9)), heartbeat("c", at(9, 0, 10))])
        #expect(timeline.sessions.count == 1)
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].reopenCount == 1)
    }

    @Test("a pending check-out becomes a soft exit once 10 s have passed on the clock")
    func pendingThenSoftExit() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(9))])
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].status == .open)
        #expect(timeline.closeIdle(now: at(9, 0, 9)).isEmpty)
        let changes = timeline.closeIdle(now: at(9, 0, 10))
        #expect(changes.kinds == [.softExit])
        try #require(changes.count > 0)
        #expect(changes[0].session.checkOutAt == at(9))
    }
}
