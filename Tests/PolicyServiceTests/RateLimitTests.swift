import AttendanceProtocol
import Foundation
import Testing

@testable import PolicyServiceCore

@Suite("Rate limit and history")
struct RateLimitTests {
    let policy = only(.rateLimit)

    @Test func punchAfterTheMinimumIsAccepted() {
        let history = PolicyHistory()
        #expect(decideAndRecord(punch("k1"), policy: policy, history: history).outcome == .accept)
        #expect(decideAndRecord(punch("k2", at: 60), policy: policy, history: history).outcome == .accept)
    }

    @Test func punchFiveSecondsAfterThePreviousIsRefused() throws {
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        let decision = decideAndRecord(punch("k2", at: 5), policy: policy, history: history)
        #expect(decision.outcome == .reject)
        #expect(decision.action == .retryAfter)
        #expect(decision.retryAfterSeconds == 55)
        #expect(decision.reasons == ["checked in 5 s ago at this gate"])
        // A rejection is not recorded: the next punch is still measured from the first.
        #expect(history.lastPunch(userId: World.user)?.idempotencyKey == "k1")
    }

    @Test func theMinimumIsPerSite() {
        let history = PolicyHistory()
        let strict = only(.rateLimit) { $0.minSecondsBetweenPunches = 120 }
        decideAndRecord(punch("k1"), policy: strict, history: history)
        #expect(decideAndRecord(punch("k2", at: 90), policy: strict, history: history).outcome == .reject)
        #expect(decideAndRecord(punch("k3", at: 90), policy: policy, history: history).outcome == .accept)
    }

    @Test func theSameIdempotencyKeyNeverTripsTheRateLimit() {
        let history = PolicyHistory()
        let first = punch("k_same")
        #expect(decideAndRecord(first, policy: policy, history: history).outcome == .accept)
        // Redelivered (at-least-once), or retried by the device, any number of times.
        for _ in 0..<3 {
            let again = decideAndRecord(first, policy: policy, history: history)
            #expect(again.outcome == .accept)
            #expect(again.result(.rateLimit)?.fired == false)
        }
        // Even after a later punch was accepted, a replay of the first is no new punch.
        decideAndRecord(punch("k_later", at: 61), policy: policy, history: history)
        #expect(decideAndRecord(punch("k_same", at: 62), policy: policy, history: history).outcome == .accept)
        // A new key at the same moment is a new punch.
        #expect(decideAndRecord(punch("k_new", at: 62), policy: policy, history: history).outcome == .reject)
    }

    /// A check-out only ends presence: a second one within the interval (a user's other phone leaving
    /// with them, after a heartbeat of it the merger took for presence) is accepted with a note, or the
    /// session would stay open until the idle cutoff. A repeated check-in is still refused.
    @Test func aRepeatedCheckOutIsAcceptedWithANote() {
        let history = PolicyHistory()
        decideAndRecord(punch("k_in"), policy: policy, history: history)
        #expect(decideAndRecord(punch("k_out", at: 300) { $0.type = .checkout }, policy: policy, history: history).outcome == .accept)
        let again = decideAndRecord(punch("k_out2", at: 320) { $0.type = .checkout }, policy: policy, history: history)
        #expect(again.outcome == .accept)
        #expect(again.result(.rateLimit)?.fired == true)
        #expect(again.reasons == ["repeated check-out: checked out 20 s ago at this gate"])
        // The check-out contract (no gate, no site) is measured against the latest punch anywhere.
        let contract = decideAndRecord(contractCheckOut(at: World.t0 + 330, reason: .regionExit), policy: policy, history: history)
        #expect(contract.outcome == .accept)
        #expect(contract.reasons == ["repeated check-out: checked out 10 s ago at site S_HQ"])
        #expect(decideAndRecord(punch("k_in2", at: 340), policy: policy, history: history).outcome == .accept)
        #expect(decideAndRecord(punch("k_in3", at: 350), policy: policy, history: history).outcome == .reject)
    }

    @Test func aChangeOfStateWithinTheIntervalIsAcceptedWithANote() {
        let history = PolicyHistory()
        decideAndRecord(punch("k_in"), policy: policy, history: history)
        // Leaving right after arriving (a walk-past that checked in, then left the geofence).
        let short = decideAndRecord(punch("k_out", at: 20) { $0.type = .checkout }, policy: policy, history: history)
        #expect(short.outcome == .accept)
        #expect(short.result(.rateLimit)?.fired == true)
        #expect(short.reasons == ["short stay: checked in 20 s ago at this gate"])
        // A soft exit's check-out, or any other reason, alike.
        let soft = contractCheckOut(at: World.t0 + 20, reason: .softExitExpired)
        #expect(
            PolicyEngine.standard.decide(soft, context: World.context(history: PolicyHistory.with(punch("k_in"))), policy: policy).outcome
                == .accept)
    }

    @Test func aGeofenceFlappingOutInOutLosesNoPunch() {
        let history = PolicyHistory()
        decideAndRecord(punch("k_in"), policy: policy, history: history)
        #expect(decideAndRecord(punch("k_out", at: 300) { $0.type = .checkout }, policy: policy, history: history).outcome == .accept)
        // Back in 5 s after the check-out, out again 7 s later, in again.
        let back = decideAndRecord(punch("k_back", at: 305), policy: policy, history: history)
        #expect(back.outcome == .accept)
        #expect(back.reasons == ["re-entry: checked out 5 s ago at this gate"])
        let outAgain = decideAndRecord(punch("k_out_again", at: 312) { $0.type = .checkout }, policy: policy, history: history)
        #expect(outAgain.outcome == .accept)
        #expect(outAgain.reasons == ["short stay: checked in 7 s ago at this gate"])
        #expect(decideAndRecord(punch("k_in_again", at: 318), policy: policy, history: history).outcome == .accept)
        // A repeated check-in is still a repeated punch.
        #expect(decideAndRecord(punch("k_repeat", at: 325), policy: policy, history: history).outcome == .reject)
        // The session contracts at one site (punch point `site:S_HQ`): the same.
        let contracts = PolicyHistory.with(contractCheckIn())
        let out = contractCheckOut(site: World.hq, at: World.t0 + 300, reason: .regionExit)
        #expect(decideAndRecord(out, policy: policy, history: contracts).outcome == .accept)
        let contractBack = decideAndRecord(contractCheckIn(key: "k_ci_back", at: World.t0 + 310), policy: policy, history: contracts)
        #expect(contractBack.outcome == .accept)
        #expect(contractBack.reasons == ["re-entry: checked out 10 s ago at this site"])
    }

    /// A check-out contract names no site (the app sends only the session key): its punch counts at
    /// the site whose policy decided it, so a geofence flapping out and in within the interval is a
    /// re-entry there, not a repeated check-in.
    @Test func aSitelessCheckOutContractCountsAtTheSiteItEnds() {
        let history = PolicyHistory.with(contractCheckIn())
        let out = decideAndRecord(contractCheckOut(at: World.t0 + 20, reason: .geofenceExit), policy: policy, history: history)
        #expect(out.outcome == .accept)
        #expect(history.lastPunch(userId: World.user)?.siteId == World.hq)
        let back = decideAndRecord(contractCheckIn(key: "k_ci_back", at: World.t0 + 35), policy: policy, history: history)
        #expect(back.outcome == .accept, "\(back.reasons)")
        #expect(back.reasons == ["re-entry: checked out 15 s ago at this site"])
        // The site's punch point holds the re-entry now (the check-out before it was counted there too).
        #expect(history.lastPunch(userId: World.user, punchPoint: "site:" + World.hq)?.idempotencyKey == "k_ci_back")
    }

    @Test func otherGatesAndUsersAreCountedApart() {
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        // Side gate 10 s later: another punch point.
        #expect(decideAndRecord(punch("k2", at: 10) { $0.minor = 4 }, policy: policy, history: history).outcome == .accept)
        // Another user at the main gate.
        let other = punch("k3", at: 10) {
            $0.user = World.otherUser; $0.device = World.otherUsersDevice
        }
        #expect(decideAndRecord(other, policy: policy, history: history).outcome == .accept)
    }

    @Test func pingPongBetweenDoorsFoldsIntoOnePresenceByDefault() throws {
        // The default window (45 s, the merger's merge window) is on without any setting.
        #expect(PolicySettings().minSecondsBetweenGates == 45)
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        let side = decideAndRecord(punch("k2", at: 10) { $0.minor = 4 }, policy: policy, history: history)
        // Accepted, so the merger keeps one session; the verdict names the rule and why.
        #expect(side.outcome == .accept)
        #expect(side.action == .noAction)
        #expect(side.retryAfterSeconds == nil)
        #expect(side.riskScore == 0)
        let result = try #require(side.result(.rateLimit))
        #expect(result.fired)
        #expect(result.mode == .enforce)
        #expect(side.reasons == ["hysteresis: checked in 10 s ago at gate G_MAIN of this site; folded into the same presence"])
        // Back through the first door 10 s later: still the same presence, although that door saw
        // a punch 20 s ago (the last door used is the other one).
        let back = decideAndRecord(punch("k3", at: 20), policy: policy, history: history)
        #expect(back.outcome == .accept)
        #expect(back.reasons == ["hysteresis: checked in 10 s ago at gate G_SIDE of this site; folded into the same presence"])
        // A check-out at the other door is not ping-pong: it is measured at its own door.
        let out = decideAndRecord(
            punch("k4", at: 90) {
                $0.minor = 4; $0.type = .checkout
            }, policy: policy, history: history)
        #expect(out.outcome == .accept)
        #expect(out.result(.rateLimit)?.fired == false)
    }

    @Test func rapidRepeatAtOneDoorIsRefusedEvenAfterAFold() throws {
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        #expect(decideAndRecord(punch("k2", at: 10) { $0.minor = 4 }, policy: policy, history: history).outcome == .accept)
        // The same door again 5 s later, with no other door in between: a repeat, not ping-pong.
        let repeatPunch = decideAndRecord(punch("k3", at: 15) { $0.minor = 4 }, policy: policy, history: history)
        #expect(repeatPunch.outcome == .reject)
        #expect(repeatPunch.action == .retryAfter)
        #expect(repeatPunch.retryAfterSeconds == 55)
        #expect(repeatPunch.reasons == ["checked in 5 s ago at this gate"])
    }

    @Test func doorChangeOutsideTheWindowIsAnOrdinaryPunch() {
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        let later = decideAndRecord(punch("k2", at: 50) { $0.minor = 4 }, policy: policy, history: history)
        #expect(later.outcome == .accept)
        #expect(later.result(.rateLimit)?.fired == false)
    }

    @Test func hysteresisOffCountsEachDoorApart() {
        let perDoor = only(.rateLimit) { $0.minSecondsBetweenGates = 0 }
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: perDoor, history: history)
        let side = decideAndRecord(punch("k2", at: 10) { $0.minor = 4 }, policy: perDoor, history: history)
        #expect(side.outcome == .accept)
        #expect(side.result(.rateLimit)?.fired == false)
        let back = decideAndRecord(punch("k3", at: 20), policy: perDoor, history: history)
        #expect(back.outcome == .reject)
        #expect(back.reasons == ["checked in 20 s ago at this gate"])
    }

    @Test func foldIsRecordedButNeverRefusesInMonitorMode() {
        let monitored = only(.rateLimit, .monitor)
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: monitored, history: history)
        let side = decideAndRecord(punch("k2", at: 10) { $0.minor = 4 }, policy: monitored, history: history)
        #expect(side.outcome == .accept)
        #expect(side.result(.rateLimit)?.fired == true)
        #expect(side.result(.rateLimit)?.mode == .monitor)
    }

    @Test func lateOfflineEventIsJudgedByEventTime() {
        let history = PolicyHistory()
        decideAndRecord(punch("k_now", at: 3 * 3_600), policy: policy, history: history)
        // Sent three hours later from the outbox, with its original time: far from the recorded punch.
        let late = punch("k_old") {
            $0.time = World.t0; $0.receivedAt = World.t0 + 3 * 3_600 + 5; $0.queuedOffline = true
        }
        #expect(decideAndRecord(late, policy: policy, history: history).outcome == .accept)
        // The latest punch stays the newest by event time.
        #expect(history.lastPunch(userId: World.user)?.idempotencyKey == "k_now")
        // A late event 30 s from a recorded one is still too close.
        let close = punch("k_close", at: 3 * 3_600 - 30) { $0.queuedOffline = true }
        #expect(decideAndRecord(close, policy: policy, history: history).outcome == .reject)
    }

    @Test func contractCheckInsCountPerSite() {
        let history = PolicyHistory()
        decideAndRecord(contractCheckIn(key: "c1"), policy: policy, history: history)
        let again = decideAndRecord(contractCheckIn(key: "c2", at: World.t0 + 30), policy: policy, history: history)
        #expect(again.reasons == ["checked in 30 s ago at this site"])
    }

    @Test func heartbeatsAreNotPunches() {
        let history = PolicyHistory()
        decideAndRecord(punch("k1"), policy: policy, history: history)
        let beat = decideAndRecord(heartbeat(at: World.t0 + 5), policy: policy, history: history)
        #expect(beat.outcome == .accept)
        #expect(history.hasAccepted(idempotencyKey: "k_hb", userId: World.user) == false)
    }

    @Test func historyRecordsOnlyAccepts() {
        let history = PolicyHistory()
        let rejected = decideAndRecord(punch("k_bad") { $0.device = World.revokedDevice }, policy: only(.deviceBinding), history: history)
        #expect(rejected.outcome == .reject)
        #expect(history.userCount == 0)
        decideAndRecord(punch("k_good"), policy: only(.deviceBinding), history: history)
        let last = history.lastPunch(userId: World.user)
        #expect(last?.gateId == "G_MAIN")
        #expect(last?.siteId == World.hq)
        #expect(last?.punchPoint == "G_MAIN")
        #expect(history.lastPunch(userId: World.user, punchPoint: "G_MAIN")?.idempotencyKey == "k_good")
        #expect(history.devicesSeen(userId: World.user, around: World.t0, within: 60) == [World.device])
    }

    @Test func historyIsBoundedAndPrunable() {
        let history = PolicyHistory(keysPerUser: 4)
        for i in 0..<10 {
            history.record(
                PunchRecord(
                    event: punch("k\(i)", at: Double(i) * 100), registry: World.registry))
        }
        #expect(history.hasAccepted(idempotencyKey: "k9", userId: World.user))
        #expect(history.hasAccepted(idempotencyKey: "k6", userId: World.user))
        #expect(!history.hasAccepted(idempotencyKey: "k5", userId: World.user))
        history.prune(before: World.t0 + 10_000)
        #expect(history.userCount == 0)
    }
}

extension PolicyHistory {
    /// A history holding the given accepted events.
    static func with(_ events: RawEventEnvelope...) -> PolicyHistory {
        let history = PolicyHistory()
        for e in events { history.record(PunchRecord(event: e, registry: World.registry)) }
        return history
    }
}
