import AttendanceProtocol
import Foundation
import Testing

import struct PresenceKit.SplitMix64

@testable import SessionMergerCore

@Suite("Horizon and persisted state")
struct StateTests {
    @Test("a session's event digest is pinned: stored timelines compare it across releases")
    func eventDigestIsPinned() {
        #expect(SessionRecord.digest(["ev-1", "ev-2"]) == "436d222cd804c1aa")
        #expect(SessionRecord.digest([]) == "cbf29ce484222325")
    }

    @Test("compaction drops final history older than the horizon; older events are then beyond it")
    func compaction() throws {
        var timeline = try newTimeline()
        try timeline.applyAll(workingDay()) // day 0
        // Day 8; the latest receipt is the compaction's time (the merger is not behind). That receipt also
        // moves the clock: the day-8 session is idle then, and closes.
        try timeline.applyAll([checkIn("n1", at(8, day: 8)), heartbeat("n2", at(9, day: 8), received: at(12, day: 9))])
        let before = timeline.sessions

        // now = day 9 12:00 -> cut = day 1 12:00. Day 0's sessions ended > 12 h before the cut: dropped.
        let result = timeline.compact(now: at(12, day: 9))
        #expect(result.droppedSessionIds == [sid("a01"), sid("b01")])
        #expect(result.droppedEvents == 15)
        #expect(result.changes.isEmpty)
        #expect(result.watermark == at(12, day: 1))
        #expect(timeline.watermark == at(12, day: 1))
        #expect(timeline.sessions == Array(before.suffix(1)))
        #expect(timeline.eventCount == 2)

        // A 9-day-old event no longer changes anything; a 7-day-old one still does.
        let old = try timeline.apply(checkIn("old", at(8, day: 0), received: at(13, day: 9)))
        #expect(old.disposition == .beyondHorizon(watermark: at(12, day: 1)))
        #expect(old.changes.isEmpty)
        // (Received on day 9, it is idle on the timeline's clock at once.)
        let recent = try timeline.apply(checkIn("recent", at(8, day: 2), received: at(13, day: 9)))
        #expect(recent.changes.kinds == [.opened, .closed])
        #expect(recent.changes.ids == [sid("recent"), sid("recent")])
        #expect(recent.changes.map(\.session.closeReason) == [nil, .presenceTimeout])
    }

    @Test("compaction never cuts a session that a new event could still change")
    func compactionKeepsLiveSessions() throws {
        var timeline = try newTimeline()
        // A session closed by check-out at day 0 20:00, and one open since day 9 05:00, the latest receipt
        // at day 9 06:00.
        try timeline.applyAll([
            checkIn("a", at(8)), checkOut("b", at(20)), checkIn("c", at(5, day: 9)),
            heartbeat("h", at(5, 30, day: 9), received: at(6, day: 9)),
        ])
        // cut = day 1 06:00: session "a" ended 10 h before the cut (< 12 h idle): a new event at the cut
        // could still link to it, so it stays and the watermark moves back to its check-in.
        let result = timeline.compact(now: at(6, day: 9))
        #expect(result.droppedSessionIds.isEmpty)
        #expect(result.droppedEvents == 0)
        #expect(result.watermark == at(8))
        #expect(timeline.sessions.map(\.id) == [sid("a"), sid("c")])

        // Later (a receipt at day 9 12:00), with "a" far enough back, it goes; the open session never does.
        try timeline.apply(heartbeat("h2", at(11, 30, day: 9), received: at(12, day: 9)))
        let later = timeline.compact(now: at(12, day: 9))
        #expect(later.droppedSessionIds == [sid("a")])
        #expect(later.watermark == at(12, day: 1))
        #expect(timeline.sessions.map(\.id) == [sid("c")])
        let far = timeline.compact(now: at(0, day: 30))
        #expect(far.droppedSessionIds.isEmpty) // still open on the timeline's clock: kept
        #expect(timeline.sessions.map(\.id) == [sid("c")])
    }

    @Test("events sharing one instant, in any order: each is placed, and a retry of any is a duplicate")
    func eventsAtOneInstant() throws {
        // Ties in event time order by kind, then key; the position of a held key is found by binary
        // search over that order, so inserting mid-timeline must not disturb the others.
        var rng = SplitMix64(seed: 42)
        var events = [checkIn("in", at(9))] + (0..<200).map { heartbeat(String(format: "h%03d", $0), at(10)) }
        events.shuffle(using: &rng)
        var timeline = try newTimeline()
        for event in events {
            let outcome = try timeline.apply(event)
            guard case .applied = outcome.disposition else {
                Issue.record("\(event.idempotencyKey): \(outcome.disposition)")
                continue
            }
        }
        #expect(timeline.eventCount == 201)
        #expect(timeline.sessions.map(\.id) == [sid("in")])
        for event in events.shuffled(using: &rng) {
            #expect(timeline.placement(ofIdempotencyKey: event.idempotencyKey) == .session(sid("in")))
            let retry = try timeline.apply(event)
            #expect(retry.disposition == .duplicate(placement: .session(sid("in")), conflicting: false))
            #expect(retry.changes.isEmpty)
        }
        let moved = try timeline.apply(heartbeat("h007", at(11)))
        #expect(moved.disposition == .duplicate(placement: .session(sid("in")), conflicting: true))
    }

    @Test("orphan heartbeats in any order, then their late check-in: the same sessions as in time order")
    func orphansThenLateCheckIn() throws {
        var rng = SplitMix64(seed: 7)
        let heartbeats = (0..<60).map { heartbeat(String(format: "h%02d", $0), at(9, $0)) }
        var timeline = try newTimeline()
        for event in heartbeats.shuffled(using: &rng) {
            #expect(try timeline.apply(event).disposition == .applied(.orphanHeartbeat))
        }
        #expect(timeline.sessions.isEmpty)
        let late = try timeline.apply(checkIn("in", at(8, 55)))
        #expect(late.changes.kinds == [.opened])
        #expect(late.changes.first?.session.eventIds.count == 61)

        var inOrder = try newTimeline()
        try inOrder.applyAll([checkIn("in", at(8, 55))] + heartbeats)
        #expect(timeline.sessions == inOrder.sessions)
        for event in heartbeats { #expect(timeline.placement(ofIdempotencyKey: event.idempotencyKey) == .session(sid("in"))) }
    }

    @Test("compaction with nothing to forget moves only the watermark, and older events are then beyond it")
    func compactionWithNothingToDrop() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8, day: 8)), heartbeat("b", at(9, day: 8), received: at(12, day: 9))])
        let sessionsBefore = timeline.sessions
        let result = timeline.compact(now: at(12, day: 9))
        #expect(result.droppedEvents == 0)
        #expect(result.droppedSessionIds.isEmpty)
        #expect(result.watermark == at(12, day: 1))
        #expect(result.changes.isEmpty)
        #expect(timeline.watermark == at(12, day: 1))
        #expect(timeline.eventCount == 2)
        #expect(timeline.sessions == sessionsBefore)
        let old = try timeline.apply(checkIn("old", at(8), received: at(13, day: 9)))
        #expect(old.disposition == .beyondHorizon(watermark: at(12, day: 1)))
        // The timeline goes on as before.
        let next = try timeline.apply(heartbeat("c", at(10, day: 8)))
        #expect(next.disposition == .applied(.session(sid("a"))))
    }

    @Test("a merger catching up on days of backlog measures the horizon from the backlog's receipts, not from now")
    func compactionBehindThePipeline() throws {
        // The merger was down from day 3 to day 12. The backlog: a check-out received on day 3, an event of
        // a phone back after 6 days offline (received on day 3, timed on day -3), then one received on day 3
        // 10:00 that makes the timeline large enough to compact, while now is day 12.
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8, day: 2)), checkOut("b", at(17, day: 2))])
        try timeline.apply(heartbeat("c", at(9, day: 3), received: at(10, day: 3)))
        let compaction = timeline.compact(now: at(0, day: 12))
        // From now it would cut at day 4; from the latest receipt it cuts at day -5.
        #expect(compaction.watermark == at(10, day: -5))
        let late = try timeline.apply(checkIn("late", at(9, day: -3), received: at(11, day: 3)))
        #expect(late.disposition == .applied(.session(sid("late"))))

        // A timeline no longer written lets its history go once the longest outage the merger catches up
        // on (31 days) is past.
        #expect(SessionPolicy.longestPipelineWait == 31 * 86_400)
        let idle = timeline.compact(now: at(0, day: 60))
        #expect(idle.watermark == at(0, day: 21))
        #expect(timeline.sessions.isEmpty)
        #expect(timeline.eventCount == 0)
    }

    @Test("state round-trips through JSON: same state, same sessions, same future")
    func codableRoundTrip() throws {
        var timeline = try newTimeline()
        try timeline.applyAll(Array(workingDay().prefix(9)))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(timeline.state)
        let decoded = try JSONDecoder().decode(TimelineState.self, from: data)
        #expect(decoded == timeline.state)
        #expect(try encoder.encode(decoded) == data)

        var restored = try SessionTimeline(restoring: decoded)
        #expect(restored.sessions == timeline.sessions)
        #expect(restored.reconcile().isEmpty)
        for event in workingDay().dropFirst(9) {
            #expect(try restored.apply(event) == timeline.apply(event))
        }
        #expect(restored.state == timeline.state)

        // Small: about 100 bytes per event.
        #expect(data.count < 9 * 150 + 800)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("[\"a01\",\"i\","))
    }

    @Test("header plus the recorded events rebuild the same state")
    func headerAndEvents() throws {
        var timeline = try newTimeline()
        let day = workingDay()
        try timeline.applyAll(day)
        try timeline.applyAll([checkIn("n1", at(8, day: 8)), heartbeat("n2", at(9, day: 8), received: at(12, day: 9))])
        timeline.compact(now: at(12, day: 9))
        let tooOld = checkIn("old", at(8), received: at(13, day: 9))
        #expect(try timeline.apply(tooOld).disposition == .beyondHorizon(watermark: at(12, day: 1)))

        let header = try JSONDecoder().decode(TimelineState.Header.self, from: JSONEncoder().encode(timeline.state.header))
        #expect(header == timeline.state.header)
        #expect(header.watermarkDate == at(12, day: 1))
        // What the events table holds for the user: everything ever recorded, in any order, plus another site.
        var rng = SplitMix64(seed: 9)
        let recorded =
            (day + [
                checkIn("n1", at(8, day: 8)), heartbeat("n2", at(9, day: 8), received: at(12, day: 9)), tooOld,
                fact("elsewhere", .checkIn, at(8, day: 8), site: "S_OTHER"),
            ]).shuffled(using: &rng)
        let rebuilt = TimelineState(header: header, events: recorded)
        #expect(rebuilt == timeline.state)
        var restored = try SessionTimeline(restoring: rebuilt)
        #expect(restored.sessions == timeline.sessions)
        #expect(restored.reconcile().isEmpty)

        let headerBytes = try JSONEncoder().encode(header).count
        let stateBytes = try JSONEncoder().encode(timeline.state).count
        #expect(headerBytes < stateBytes)
        #expect(headerBytes < 600)
    }

    @Test("a restored timeline under a new policy reports what the new thresholds change")
    func policyChange() throws {
        var timeline = try newTimeline()
        try timeline.applyAll([checkIn("a", at(8)), checkOut("b", at(12)), checkIn("c", at(12, 3))])
        #expect(timeline.sessions.count == 1)
        var restored = try SessionTimeline(restoring: timeline.state, policy: SessionPolicy(softExitGrace: 60))
        let changes = restored.reconcile()
        #expect(changes.kinds == [.closed, .opened])
        #expect(changes.ids == [sid("a"), sid("c")])
        #expect(try timeline.setPolicy(SessionPolicy(softExitGrace: 60)) == changes)
    }

    @Test("a corrupt or foreign state format is refused")
    func badState() throws {
        let bad = Data(#"{"v":2,"userId":"u","siteId":"s","facts":[],"sessions":[],"retired":[]}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(TimelineState.self, from: bad) }
        let kind = Data(#"{"v":1,"userId":"u","siteId":"s","facts":[["k","z",0]],"sessions":[],"retired":[]}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(TimelineState.self, from: kind) }
    }
}

@Suite("Protocol mapping")
struct MappingTests {
    let decision = PolicyDecision(outcome: .accept, ruleResults: [], riskScore: 0, action: .noAction, policyVersion: 1, decidedAt: at(8))

    func envelope(_ payload: RawEventPayload, siteId: String?, key: String = "k1") -> RawEventEnvelope {
        RawEventEnvelope(
            requestId: "r1", idempotencyKey: key, userId: "u_auth", deviceId: "d_1", siteId: siteId, appVersion: "1.0",
            gatewayInstance: "gw-1", receivedAt: at(8, 0, 5), payloadFingerprint: "f", payload: payload)
    }

    @Test("an /events check-in becomes a fact with the device's event time and the beacon as gate")
    func eventPayload() throws {
        let event = AttendanceEvent(
            id: "e1", idempotencyKey: "k1", userId: "u_body", deviceId: "d_1", timestamp: utc("2025-09-18T08:00:00.123Z"),
            type: .checkin, siteId: "S_HQ", beacon: BeaconIdentity(uuid: "f7826da6-4fa2-4e98-8024-bc5b71e0893e", major: 10, minor: 3),
            sessionKey: "K1")
        let fact = try AttendanceFact(vetted: VettedEvent(raw: envelope(.event(event), siteId: nil), decision: decision))
        #expect(fact.idempotencyKey == "k1")
        #expect(fact.userId == "u_auth")
        #expect(fact.siteId == "S_HQ")
        #expect(fact.kind == .checkIn)
        #expect(fact.eventTime == utc("2025-09-18T08:00:00.123Z"))
        #expect(fact.receivedAt == at(8, 0, 5))
        #expect(fact.sessionKey == "K1")
        #expect(fact.gateId == "F7826DA6-4FA2-4E98-8024-BC5B71E0893E:10:3")
    }

    @Test("a check-out contract without a site resolves it through its session key")
    func checkOutResolvesSite() throws {
        let payload = RawEventPayload.checkOut(CheckOutRequest(sessionKey: "K9", ts: at(17), reason: .regionExit))
        let vetted = VettedEvent(raw: envelope(payload, siteId: nil), decision: decision)
        let fact = try AttendanceFact(vetted: vetted) { $0 == "K9" ? "S_HQ" : nil }
        #expect(fact.kind == .checkOut)
        #expect(fact.siteId == "S_HQ")
        #expect(fact.eventTime == at(17))
        #expect(throws: FactMappingError.unknownSite(idempotencyKey: "k1", sessionKey: "K9")) {
            try AttendanceFact(vetted: vetted)
        }
        let heartbeat = RawEventPayload.heartbeat(HeartbeatRequest(sessionKey: "K9", ts: at(9)))
        let onEnvelope = try AttendanceFact(vetted: VettedEvent(raw: envelope(heartbeat, siteId: "S_GW"), decision: decision))
        #expect(onEnvelope.kind == .heartbeat)
        #expect(onEnvelope.siteId == "S_GW")
    }

    @Test("a rejected event has no fact")
    func rejected() throws {
        var rejected = decision
        rejected.outcome = .reject
        rejected.ruleResults = [RuleResult(ruleId: .beaconValidity, mode: .enforce, fired: true, reason: "unknown beacon")]
        let payload = RawEventPayload.checkIn(
            CheckInRequest(
                userId: "u", siteId: "S_HQ", ts: at(8), sessionKey: "K",
                deviceMeta: DeviceMeta(model: "iPhone14,5", os: "iOS 18.0", appVersion: "1.0")))
        #expect(throws: FactMappingError.rejectedByPolicy(idempotencyKey: "k1", reasons: ["unknown beacon"])) {
            try AttendanceFact(vetted: VettedEvent(raw: envelope(payload, siteId: "S_HQ"), decision: rejected))
        }
    }

    @Test("a delta becomes the attendance.sessions message and survives its codec")
    func sessionChangeMessage() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("a", at(8), key: "K1"))
        let outcome = try timeline.apply(checkOut("b", at(12), key: "K1", received: at(12, 1)))
        try #require(outcome.changes.count > 0)
        let message = outcome.changes[0].sessionChange(changedAt: at(12, 1))
        #expect(message.sessionId == sid("a"))
        #expect(message.userId == userId)
        #expect(message.siteId == siteId)
        #expect(message.sessionKey == "K1")
        #expect(message.change == .softExit)
        #expect(message.checkInAt == at(8))
        #expect(message.checkOutAt == at(12))
        #expect(message.lastSeenAt == at(8))
        #expect(message.closeReason == nil)
        #expect(message.eventIds == ["a", "b"])
        #expect(message.version == 2)
        let decoded = try JSONDecoder().decode(SessionChange.self, from: JSONEncoder().encode(message))
        #expect(decoded == message)
    }

    @Test("a session of more events than a change carries: the latest ids and the count of all")
    func aLongSessionsChangeCarriesItsLatestIds() throws {
        var timeline = try newTimeline()
        _ = try timeline.apply(checkIn("c", at(8), key: "K1"))
        var last: SessionDelta?
        // A phone left by the gate: a heartbeat every 5 seconds here, 1,200 of them.
        for n in 0..<1_200 {
            let outcome = try timeline.apply(heartbeat("h\(n)", at(8).addingTimeInterval(Double(n + 1) * 5), key: "K1"))
            last = outcome.changes.last ?? last
        }
        let message = try #require(last).sessionChange(changedAt: at(12))
        #expect(message.eventCount == 1_201)
        #expect(message.eventIds.count == SessionChange.maxEventIds)
        #expect(message.eventIds.first == "h200" && message.eventIds.last == "h1199")
        let decoded = try JSONDecoder().decode(SessionChange.self, from: JSONEncoder().encode(message))
        #expect(decoded == message)
    }

    @Test("the superseded close reason travels as an open wire value")
    func supersededOnTheWire() throws {
        #expect(SessionCloseReason.superseded.rawValue == "superseded")
        #expect(SessionCloseReason(rawValue: "superseded") == .superseded)
        #expect(!SessionCloseReason.superseded.isKnown)
    }
}
