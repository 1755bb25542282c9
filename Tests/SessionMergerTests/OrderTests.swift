import AttendanceProtocol
import Foundation
import SessionMergerCore
import Testing

import struct PresenceKit.SplitMix64

/// A working day of one user at one site (UTC), with every rule in it.
///
/// - 07:59:40 and 08:00:00 check-in candidates (K1): merged.
/// - heartbeats 08:05, 08:10.
/// - 10:00:00 check-out, heartbeat 10:00:06: noise, forgotten.
/// - 12:00 check-out, 12:03 check-in (a new device session K2): reopened within the grace.
/// - 12:30 heartbeat, 13:00 check-out; 14:00 check-in (K3): a new session.
/// - 14:05 heartbeat, 17:00 check-out.
/// - 18:00 heartbeat without key: orphan (the 17:00 check-out's grace is over); 19:00 check-out: orphan.
func workingDay() -> [AttendanceFact] {
    let received: (Date) -> Date = { $0.addingTimeInterval(1) }
    return [
        checkIn("a01", at(7, 59, 40), key: "K1", received: received(at(7, 59, 40))),
        checkIn("a02", at(8, 0, 0), key: "K1", received: received(at(8))),
        heartbeat("a03", at(8, 5), key: "K1", received: received(at(8, 5))),
        heartbeat("a04", at(8, 10), key: "K1", received: received(at(8, 10))),
        checkOut("a05", at(10), key: "K1", received: received(at(10))),
        heartbeat("a06", at(10, 0, 6), key: "K1", received: received(at(10, 0, 6))),
        checkOut("a07", at(12), key: "K1", received: received(at(12))),
        checkIn("a08", at(12, 3), key: "K2", received: received(at(12, 3))),
        heartbeat("a09", at(12, 30), key: "K2", received: received(at(12, 30))),
        checkOut("a10", at(13), key: "K2", received: received(at(13))),
        checkIn("b01", at(14), key: "K3", received: received(at(14))),
        heartbeat("b02", at(14, 5), key: "K3", received: received(at(14, 5))),
        checkOut("b03", at(17), key: "K3", received: received(at(17))),
        heartbeat("x01", at(18), received: received(at(18))),
        checkOut("x02", at(19), received: received(at(19))),
    ]
}

@Suite("Event-time order")
struct OrderTests {
    @Test("a working day in order gives the hand-computed sessions")
    func inOrder() throws {
        var timeline = try newTimeline()
        let outcomes = try timeline.applyAll(workingDay())
        timeline.closeIdle(now: at(0, day: 1))
        let sessions = timeline.sessions
        #expect(sessions.map(\.id) == [sid("a01"), sid("b01")])
        #expect(sessions.map(\.status) == [.closed, .closed])
        #expect(sessions.map(\.closeReason) == [.checkOut, .checkOut])
        try #require(sessions.count > 1)
        #expect(sessions[0].checkInAt == at(7, 59, 40))
        #expect(sessions[0].lastSeenAt == at(12, 30))
        #expect(sessions[0].checkOutAt == at(13))
        #expect(sessions[0].sessionKeys == ["K1", "K2"])
        #expect(sessions[0].eventIds == ["a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09", "a10"])
        #expect(sessions[0].reopenCount == 1)
        #expect(sessions[1].checkInAt == at(14))
        #expect(sessions[1].lastSeenAt == at(14, 5))
        #expect(sessions[1].checkOutAt == at(17))
        #expect(sessions[1].eventIds == ["b01", "b02", "b03"])
        #expect(sessions[1].reopenCount == 0)
        #expect(timeline.placement(ofIdempotencyKey: "x01") == .orphanHeartbeat)
        #expect(timeline.placement(ofIdempotencyKey: "x02") == .orphanCheckOut)
        #expect(outcomes[13].disposition == .applied(.orphanHeartbeat))
        #expect(outcomes[14].disposition == .applied(.orphanCheckOut))
    }

    @Test("any arrival order gives the same sessions and ids (50 seeded shuffles)")
    func shuffledArrival() throws {
        var reference = try newTimeline()
        try reference.applyAll(workingDay())
        let beforeClose = reference.sessions
        reference.closeIdle(now: at(0, day: 1))
        let expected = reference.sessions

        var rng = SplitMix64(seed: 0x5E55_1011)
        for round in 0..<50 {
            let events = workingDay().shuffled(using: &rng)
            var timeline = try newTimeline()
            var published: [SessionDelta] = []
            for event in events { published += try timeline.apply(event).changes }
            #expect(timeline.sessions == beforeClose, "round \(round)")
            published += timeline.closeIdle(now: at(0, day: 1))
            #expect(timeline.sessions == expected, "round \(round)")
            // A consumer folding the published changes by version ends with the same sessions.
            #expect(fold(published) == expected, "round \(round)")
            // Versions of one id only grow.
            var last: [String: Int64] = [:]
            for delta in published {
                #expect(delta.version > last[delta.session.id, default: 0])
                last[delta.session.id] = delta.version
            }
        }
    }

    /// What the merger stores per event: the session it was placed in when applied, then, for every event
    /// a later one moved (`movedKeys`), where it is after that. For any arrival order, that record equals
    /// where every event ends up: no event keeps a session it left.
    @Test("each event's recorded session follows it when a late event moves it (50 seeded shuffles and a split)")
    func recordedSessionsFollowMovedEvents() throws {
        // A late check-out of K1 at 10:00 splits the 08:00 session: the 12:00 check-in (another key, two
        // hours after the check-out) and its heartbeat move to a session of their own.
        let split = [
            checkIn("s1", at(8), key: "K1"), checkIn("s2", at(12), key: "K2"), heartbeat("s3", at(12, 10), key: "K2"),
            checkOut("s4", at(10), key: "K1", received: at(12, 20)),
        ]
        var rng = SplitMix64(seed: 0x5E55_1012)
        let orders = [split, workingDay()] + (0..<50).map { _ in workingDay().shuffled(using: &rng) }
        for (round, events) in orders.enumerated() {
            var timeline = try newTimeline()
            var recorded: [String: String?] = [:]
            var moves = 0
            for event in events {
                let outcome = try timeline.apply(event)
                recorded[event.idempotencyKey] = outcome.sessionId
                for key in outcome.movedKeys {
                    #expect(key != event.idempotencyKey && recorded[key] != nil, "round \(round): \(key)")
                    recorded[key] = timeline.placement(ofIdempotencyKey: key)?.sessionId
                    moves += 1
                }
            }
            for event in events {
                #expect(
                    recorded[event.idempotencyKey] == timeline.placement(ofIdempotencyKey: event.idempotencyKey)?.sessionId,
                    "round \(round): \(event.idempotencyKey)")
            }
            if round == 0 {
                #expect(timeline.sessions.map(\.id) == [sid("s1"), sid("s2")])
                #expect(recorded["s2"] == sid("s2") && recorded["s3"] == sid("s2") && moves == 2)
            }
            // In arrival order nothing moves.
            if round == 1 { #expect(moves == 0) }
        }
    }

    @Test("replaying the same order gives identical changes, versions included")
    func replayIsDeterministic() throws {
        var rng = SplitMix64(seed: 42)
        let events = workingDay().shuffled(using: &rng)
        func run() throws -> [SessionDelta] {
            var timeline = try newTimeline()
            return try events.flatMap { try timeline.apply($0).changes }
        }
        #expect(try run() == run())
    }

    @Test("every arrival order of three events converges (exhaustive)")
    func allPermutations() throws {
        let events = [checkIn("a", at(8)), checkOut("b", at(12), received: at(12, 4)), checkIn("c", at(12, 3))]
        let permutations = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        var results: [[SessionSnapshot]] = []
        for order in permutations {
            var timeline = try newTimeline()
            var published: [SessionDelta] = []
            for i in order { published += try timeline.apply(events[i]).changes }
            results.append(timeline.sessions)
            #expect(fold(published) == timeline.sessions)
        }
        #expect(Set(results.map { $0.map(\.id) }) == [[sid("a")]])
        try #require(results.count > 0)
        #expect(results.allSatisfy { $0 == results[0] })
        #expect(results[0].first?.reopenCount == 1)
    }
}

@Suite("Late events")
struct LateEventTests {
    /// Thursday: 08:00-12:00 and 13:00-17:00, both closed by check-out.
    func thursday() -> [AttendanceFact] {
        [
            checkIn("a", at(8)), heartbeat("ah", at(10)), checkOut("b", at(12), received: at(12, 6)),
            checkIn("c", at(13)), checkOut("d", at(17), received: at(17, 6)),
        ]
    }

    @Test("a check-in 72 h late lands in the right past session")
    func seventyTwoHoursLate() throws {
        var timeline = try newTimeline()
        try timeline.applyAll(thursday())
        timeline.closeIdle(now: at(18))
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("c")])

        // A second candidate of the morning check-in, 30 s after it, delivered 72 h later.
        let late = try timeline.apply(checkIn("a2", at(8, 0, 30), received: at(8, 0, 30, day: 3)))
        #expect(late.sessionId == sid("a"))
        #expect(late.changes.kinds == [.closed]) // a restatement of the closed morning session
        try #require(late.changes.count > 0)
        #expect(late.changes[0].session.eventIds == ["a", "a2", "ah", "b"])
        #expect(late.changes[0].version == 4)
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("c")])
        try #require(timeline.sessions.count > 1)
        #expect(timeline.sessions[1].eventIds == ["c", "d"])
        #expect(timeline.sessions.map(\.status) == [.closed, .closed])
    }

    @Test("a late check-in inside the grace after a check-out bridges two sessions into one")
    func lateBridge() throws {
        var timeline = try newTimeline()
        try timeline.applyAll(thursday())
        timeline.closeIdle(now: at(18))
        let bridge = try timeline.apply(checkIn("late", at(12, 3), received: at(12, day: 3)))
        // The morning session reopens at 12:03, the 13:00 check-in joins it, the afternoon id is gone.
        #expect(bridge.sessionId == sid("a"))
        #expect(bridge.changes.kinds == [.closed, .closed])
        #expect(bridge.changes.ids == [sid("a"), sid("c")])
        try #require(bridge.changes.count > 1)
        #expect(bridge.changes[0].session.checkOutAt == at(17))
        #expect(bridge.changes[0].session.reopenCount == 1)
        #expect(bridge.changes[1].session.closeReason == .superseded)
        #expect(bridge.changes[1].supersededBy == sid("a"))
        #expect(bridge.changes[1].session.eventIds.isEmpty)
        #expect(timeline.sessions.map(\.id) == [sid("a")])
        try #require(timeline.sessions.count > 0)
        #expect(timeline.sessions[0].eventIds == ["a", "ah", "b", "late", "c", "d"])
    }

    @Test("a late check-out splits an open session")
    func lateCheckOutSplits() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), heartbeat("h", at(8, 5)), checkIn("c", at(8, 30)), heartbeat("h2", at(9))])
        #expect(timeline.sessions.map(\.id) == [sid("a")])
        let split = try timeline.apply(checkOut("o", at(8, 10), received: at(9, 1)))
        #expect(split.changes.kinds == [.closed, .opened])
        #expect(split.changes.ids == [sid("a"), sid("c")])
        try #require(split.changes.count > 1)
        #expect(split.changes[0].session.checkOutAt == at(8, 10))
        #expect(split.changes[0].session.eventIds == ["a", "h", "o"])
        #expect(split.changes[1].session.eventIds == ["c", "h2"])
        #expect(split.sessionId == sid("a"))
    }

    @Test("an earlier late check-in re-anchors: the old id is superseded, versions keep growing when it returns")
    func reanchor() throws {
        var timeline = try newTimeline()
        let first = try timeline.apply(checkIn("b", at(8, 20)))
        #expect(first.changes.kinds == [.opened])
        let earlier = try timeline.apply(checkIn("a", at(8), received: at(8, 21)))
        #expect(earlier.changes.kinds == [.opened, .closed])
        #expect(earlier.changes.ids == [sid("a"), sid("b")])
        try #require(earlier.changes.count > 1)
        #expect(earlier.changes[1].session.closeReason == .superseded)
        #expect(earlier.changes[1].supersededBy == sid("a"))
        #expect(earlier.changes[1].version == 2)
        #expect(timeline.sessions.map(\.id) == [sid("a")])

        // A late 08:05 check-out splits them again: "b" is a session of its own once more.
        let split = try timeline.apply(checkOut("o", at(8, 5), received: at(8, 22)))
        #expect(split.changes.kinds == [.closed, .opened])
        #expect(split.changes.ids == [sid("a"), sid("b")])
        try #require(split.changes.count > 1)
        #expect(split.changes[1].version == 3)
    }
}

@Suite("Random histories (seeded)")
struct RandomHistoryTests {
    /// A random day: 12-40 events of random kinds within 08:00-20:00, a few session keys, receipts up to
    /// 72 h late.
    func history(_ rng: inout SplitMix64) -> [AttendanceFact] {
        let count = Int.random(in: 12...40, using: &rng)
        return (0..<count).map { i -> AttendanceFact in
            let kind: AttendanceFact.Kind = [.checkIn, .checkIn, .heartbeat, .heartbeat, .checkOut].randomElement(using: &rng)!
            let time = at(8).addingTimeInterval(TimeInterval(Int.random(in: 0..<(12 * 3_600), using: &rng)))
            let key: String? = Bool.random(using: &rng) ? ["K1", "K2", "K3"].randomElement(using: &rng) : nil
            let delays: [TimeInterval] = [0, 5, 30, 600, 72 * 3_600]
            let delay = delays.randomElement(using: &rng)!
            return fact("e\(1_000 + i)", kind, time, key: key, received: time.addingTimeInterval(delay))
        }
    }

    @Test("100 random histories: every arrival order converges, published changes fold to the sessions, invariants hold")
    func randomHistories() throws {
        var rng = SplitMix64(seed: 2025_09_18)
        for round in 0..<100 {
            let events = history(&rng)
            var results: [[SessionSnapshot]] = []
            for pass in 0..<4 {
                var timeline = try newTimeline()
                var published: [SessionDelta] = []
                for event in events.shuffled(using: &rng) {
                    published += try timeline.apply(event).changes
                    if pass == 0 { // after every step, the resumed derivation equals a full one
                        #expect(try SessionTimeline(restoring: timeline.state).sessions == timeline.sessions, "round \(round)")
                    }
                }
                published += timeline.closeIdle(now: at(12, day: 4))
                let sessions = timeline.sessions
                results.append(sessions)
                #expect(fold(published) == sessions, "round \(round)")

                // Sessions are ordered and do not overlap; every check-in is in one; no event is in two.
                for (a, b) in zip(sessions, sessions.dropFirst()) {
                    #expect((a.endedAt ?? a.lastSeenAt) <= b.checkInAt, "round \(round)")
                }
                let placed = sessions.flatMap(\.eventIds)
                #expect(Set(placed).count == placed.count)
                for event in events where event.kind == .checkIn {
                    #expect(timeline.placement(ofIdempotencyKey: event.idempotencyKey)?.sessionId != nil)
                }
                #expect(sessions.allSatisfy { $0.status == .closed }) // 72 h after the day, all closed
                // The resumed (incremental) derivations agree with one full derivation of the final state.
                var full = try SessionTimeline(restoring: timeline.state)
                #expect(full.sessions == sessions, "round \(round)")
                #expect(full.reconcile().isEmpty, "round \(round)")
            }
            try #require(results.count > 0)
            #expect(results.allSatisfy { $0 == results[0] }, "round \(round)")
        }
    }
}
