import AttendanceProtocol
import Foundation
import Testing

@testable import PolicyServiceCore

@Suite("Policy engine")
struct EngineTests {
    let engine = PolicyEngine.standard

    func decide(_ e: RawEventEnvelope, _ policy: SitePolicy, history: PolicyHistory = PolicyHistory()) -> PolicyDecision {
        engine.decide(e, context: World.context(history: history), policy: policy)
    }

    @Test func honestEventIsAcceptedWithEveryRuleRecorded() {
        let decision = decide(event(), enforceAll())
        #expect(decision.outcome == .accept)
        #expect(decision.action == .noAction)
        #expect(decision.retryAfterSeconds == nil)
        #expect(decision.riskScore == 0)
        #expect(decision.ruleResults.map(\.ruleId) == engine.ruleIDs)
        #expect(decision.ruleResults.allSatisfy { $0.mode == .enforce && !$0.fired && $0.reason == nil })
        #expect(decision.reasons.isEmpty)
    }

    @Test func enforcedRuleThatFiresRejects() throws {
        let decision = decide(event { $0.device = World.revokedDevice }, only(.deviceBinding))
        #expect(decision.outcome == .reject)
        #expect(decision.action == .contactAdmin)
        let result = try #require(decision.result(.deviceBinding))
        #expect(result.fired && result.mode == .enforce)
        #expect(decision.reasons == ["device d_dead was revoked"])
    }

    @Test func monitoredRuleFiresButNeverRejects() throws {
        let decision = decide(event { $0.device = World.revokedDevice }, only(.deviceBinding, .monitor))
        #expect(decision.outcome == .accept)
        #expect(decision.action == .noAction)
        let result = try #require(decision.result(.deviceBinding))
        #expect(result.fired && result.mode == .monitor)
        #expect(result.reason == "device d_dead was revoked")
        #expect(decision.reasons.isEmpty) // a 409 lists enforced reasons only
        #expect(decision.riskScore == 0.9) // but the risk counts
    }

    @Test func ruleSwitchedOffDoesNotRun() {
        var policy = enforceAll()
        policy.rules[.deviceBinding] = .off
        let decision = decide(event { $0.device = World.revokedDevice }, policy)
        #expect(decision.outcome == .accept)
        #expect(decision.result(.deviceBinding) == nil)
        #expect(decision.ruleResults.count == engine.ruleIDs.count - 1)
        // A rule the policy does not name is off as well.
        let named = decide(event { $0.device = World.revokedDevice }, only(.beaconValidity))
        #expect(named.ruleResults.map(\.ruleId) == [.beaconValidity])
    }

    @Test(arguments: [RawEventKind.event, .checkIn, .checkOut, .heartbeat])
    func killSwitchRejectsEverythingWithManualCheckIn(kind: RawEventKind) {
        var policy = enforceAll(version: 4)
        policy.automaticAttendance = false
        let e: RawEventEnvelope
        switch kind {
        case .event: e = event()
        case .checkIn: e = contractCheckIn()
        case .checkOut: e = contractCheckOut(at: World.t0, reason: .regionExit)
        case .heartbeat: e = heartbeat(at: World.t0)
        }
        let decision = decide(e, policy)
        #expect(decision.outcome == .reject)
        #expect(decision.action == .manualCheckin)
        #expect(
            decision.ruleResults == [
                RuleResult(ruleId: .killSwitch, mode: .enforce, fired: true, reason: "automatic attendance is switched off at this site")
            ])
        #expect(decision.riskScore == 0)
        #expect(decision.policyVersion == 4)
    }

    @Test func globalKillSwitchOverridesEverySite() {
        var book = PolicyBook(sites: [enforceAll(version: 3)])
        #expect(book.policy(forSite: World.hq).automaticAttendance)
        book.globalKillSwitch = true
        let policy = book.policy(forSite: World.hq)
        #expect(decide(event(), policy).action == .manualCheckin)
        #expect(book.policy(forSite: "S_OTHER").automaticAttendance == false)
    }

    @Test(arguments: [0, 1, 7, 1_234])
    func policyVersionAndDecisionTimeAreRecorded(version: Int) {
        let now = World.t0 + 0.75
        let decision = engine.decide(event(), context: World.context(now: now), policy: enforceAll(version: version))
        #expect(decision.policyVersion == version)
        #expect(decision.decidedAt == now)
        #expect(decide(event(), .default).policyVersion == 0)
    }

    @Test func actionPrecedenceIsDeterministic() {
        let history = PolicyHistory()
        decideAndRecord(event(), policy: enforceAll(), history: history)
        // 5 s later: rate limit (retry_after), outside the geofence (walk_to_gate),
        // old app (update_app), another user's device (contact_admin).
        let e = event {
            $0.time = World.t0 + 5; $0.geofence = .init(inside: false); $0.appVersion = "1.0.0"
            $0.device = World.otherUsersDevice
        }
        let policy = enforceAll { $0.minAppVersion = "1.12.0" }
        let reversed = PolicyEngine(rules: PolicyEngine.standardRules.reversed())
        let forward = engine.decide(e, context: World.context(history: history), policy: policy)
        let backward = reversed.decide(e, context: World.context(history: history), policy: policy)
        #expect(forward.action == .contactAdmin)
        #expect(backward.action == .contactAdmin)
        #expect(forward.retryAfterSeconds == nil)
        #expect(Set(forward.firedRules) == [.deviceBinding, .rateLimit, .coLocation, .appAttestation, .multiDevice])

        // Peel the findings off one by one: the next action in precedence order wins.
        let withoutDevice = event {
            $0.time = World.t0 + 5; $0.geofence = .init(inside: false); $0.appVersion = "1.0.0"
        }
        #expect(decide(withoutDevice, policy, history: history).action == .updateApp)
        let withoutApp = event {
            $0.time = World.t0 + 5; $0.geofence = .init(inside: false)
        }
        #expect(decide(withoutApp, policy, history: history).action == .walkToGate)
        let onlyTooSoon = decide(event { $0.time = World.t0 + 5 }, policy, history: history)
        #expect(onlyTooSoon.action == .retryAfter)
        #expect(onlyTooSoon.retryAfterSeconds == 55)
    }

    @Test func precedenceOrderIsTheDocumentedOne() {
        let ranks = ActionPrecedence.order.map(ActionPrecedence.rank)
        #expect(ranks == ranks.sorted())
        #expect(ActionPrecedence.rank(.manualCheckin) < ActionPrecedence.rank(.contactAdmin))
        #expect(ActionPrecedence.rank(.retryAfter) < ActionPrecedence.rank(.unrecognized("x")))
        #expect(ActionPrecedence.rank(.unrecognized("x")) < ActionPrecedence.rank(.noAction))
    }

    @Test func monitorFiringsDoNotChooseTheAction() {
        var policy = only(.deviceBinding, .monitor)
        policy.rules[.coLocation] = .enforce
        let decision = decide(
            event {
                $0.device = World.revokedDevice; $0.geofence = .init(inside: false)
            }, policy)
        #expect(decision.outcome == .reject)
        #expect(decision.action == .walkToGate) // not the monitored contact_admin
    }

    @Test func riskScoreIsANoisyOrWithinBounds() {
        #expect(RiskScore.combine([]) == 0)
        #expect(RiskScore.combine([0.5, 0.5]) == 0.75)
        #expect(RiskScore.combine([1, 0.3]) == 1)
        #expect(RiskScore.combine([7, -3, .nan, .infinity]) == 1)
        #expect(RiskScore.combine([-3, .nan]) == 0)
        // Monotone: another firing never lowers the score.
        #expect(RiskScore.combine([0.2, 0.1]) >= RiskScore.combine([0.2]))

        // Everything a device can get wrong at once stays within 0...1.
        let history = PolicyHistory()
        decideAndRecord(event(), policy: enforceAll(), history: history)
        let worst = event {
            $0.time = World.t0 + 5; $0.device = World.otherUsersDevice; $0.payloadUser = World.otherUser; $0.minor = 5
            $0.rssi = [-60, -60, -60, -60]; $0.motion = .init(state: .stationary, steps2min: 0)
            $0.geofence = .init(inside: false); $0.attestation = .init(jailbroken: true, simulatedLocation: true)
            $0.receivedAt = World.t0 + 7_200
        }
        let decision = decide(worst, enforceAll(), history: history)
        #expect(decision.outcome == .reject)
        #expect((0...1).contains(decision.riskScore))
        #expect(decision.riskScore > 0.99)
    }

    @Test func decisionRoundTripsThroughTheWireCodec() throws {
        let decision = decide(event { $0.rssi = [-70, -70, -70, -70] }, enforceAll(version: 9))
        let bytes = try ProtocolCodec.wire.encode(VettedEvent(raw: event(), decision: decision))
        let back = try ProtocolCodec.wire.decode(VettedEvent.self, from: bytes)
        #expect(back.decision.ruleResults == decision.ruleResults)
        #expect(back.decision.riskScore == decision.riskScore)
        #expect(back.decision.policyVersion == 9)
    }

    @Test func canaryRunsARuleForItsShareOfUsersOnly() {
        let users = (0..<1_000).map { "u_\($0)" }
        func runs(_ percent: Int, _ user: String) -> Bool {
            var policy = only(.deviceBinding)
            policy.rules[.deviceBinding] = RuleConfig(.enforce, canaryPercent: percent)
            let e = event {
                $0.user = user; $0.payloadUser = user; $0.device = "d_unknown"
            }
            return decide(e, policy).result(.deviceBinding) != nil
        }
        #expect(users.allSatisfy { runs(100, $0) })
        #expect(!users.contains { runs(0, $0) })
        let inTen = users.filter { runs(10, $0) }
        #expect((60...140).contains(inTen.count))
        // Growing the canary keeps everyone already in it.
        #expect(inTen.allSatisfy { runs(30, $0) })
        // Stable across processes and releases: FNV-1a of "<rule>|<user>" mod 100, not Swift's seeded
        // Hasher. The buckets below were computed outside Swift from that definition.
        #expect(RuleConfig.canaryBucket(ruleId: .motionGating, userId: "u_1024") == 99)
        #expect(RuleConfig.canaryBucket(ruleId: .motionGating, userId: "u_1") == 27)
        #expect(RuleConfig.canaryBucket(ruleId: .deviceBinding, userId: "u_1024") == 32)
        #expect(RuleConfig.canaryBucket(ruleId: .deviceBinding, userId: "alice") == 17)
    }

    @Test func unhostedRulesInThePolicyAreIgnoredAndReported() {
        var policy = enforceAll()
        policy.rules[.gattChallenge] = .enforce
        #expect(decide(event(), policy).outcome == .accept)
        #expect(decide(event(), policy).result(.gattChallenge) == nil)
        let issues = policy.validationIssues(hostedRules: engine.ruleIDs)
        #expect(issues.map(\.field) == ["rules.gatt_challenge"])
    }

    @Test func aRuleCanBeHostedFromOutside() {
        struct AlwaysFires: PolicyRule {
            var id: PolicyRuleID { .unrecognized("night_shift") }
            func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
                .fire("no automatic attendance at night", action: .unrecognized("see_manager"), risk: 0.2)
            }
        }
        let engine = PolicyEngine(rules: PolicyEngine.standardRules + [AlwaysFires()])
        var policy = enforceAll()
        policy.rules[.unrecognized("night_shift")] = .enforce
        let decision = engine.decide(event(), context: World.context(), policy: policy)
        #expect(decision.outcome == .reject)
        #expect(decision.action == .unrecognized("see_manager"))
        #expect(decision.riskScore == 0.2)
    }
}

/// Every hosted rule in each mode, on an event that trips it (and an honest one that does not).
@Suite("Rule modes")
struct RuleModeTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var rule: PolicyRuleID
        var before: [RawEventEnvelope] = []
        var tripping: RawEventEnvelope
        var testDescription: String { rule.rawValue }
    }

    static let cases: [Case] = [
        Case(rule: .beaconValidity, tripping: event { $0.minor = 5 }),
        Case(rule: .deviceBinding, tripping: event { $0.device = World.revokedDevice }),
        Case(
            rule: .siteAssignment,
            tripping: event {
                $0.user = World.otherUser; $0.device = World.otherUsersDevice; $0.site = World.branch; $0.major = 20; $0.minor = 1
            }),
        Case(
            rule: .multiDevice, before: [punch("k0")],
            tripping: event {
                $0.device = World.secondDevice; $0.time = World.t0 + 90
            }),
        Case(rule: .rateLimit, before: [punch("k0")], tripping: event { $0.time = World.t0 + 5 }),
        Case(rule: .dwell, tripping: event { $0.rssi = [-70] }),
        Case(rule: .coLocation, tripping: event { $0.geofence = .init(inside: false) }),
        Case(rule: .motionGating, tripping: event { $0.motion = .init(state: .stationary, steps2min: 3) }),
        Case(rule: .appAttestation, tripping: event { $0.attestation = .init(jailbroken: true) }),
        Case(rule: .rssiPlausibility, tripping: event { $0.rssi = [-64, 2, -63, -64] }),
        Case(
            rule: .impossibleTravel, before: [punch("k0")],
            tripping: event {
                $0.site = World.branch; $0.major = 20; $0.minor = 1; $0.time = World.t0 + 900
            }),
        Case(rule: .clockSkew, tripping: event { $0.receivedAt = World.t0 - 1_800 }),
    ]

    @Test func everyHostedRuleHasACase() {
        #expect(Self.cases.map(\.rule) == PolicyEngine.standard.ruleIDs)
    }

    func decide(_ c: Case, _ e: RawEventEnvelope, _ mode: RuleSwitch) -> PolicyDecision {
        let history = PolicyHistory.with()
        for before in c.before { history.record(PunchRecord(event: before, registry: World.registry)) }
        return PolicyEngine.standard.decide(
            e, context: World.context(history: history, now: e.receivedAt), policy: only(c.rule, mode, version: 3))
    }

    @Test(arguments: RuleModeTests.cases)
    func enforcedRejects(_ c: Case) throws {
        let decision = decide(c, c.tripping, .enforce)
        #expect(decision.outcome == .reject)
        #expect(decision.ruleResults.count == 1)
        let result = try #require(decision.result(c.rule))
        #expect(result.fired && result.mode == .enforce && result.reason != nil)
        #expect(decision.action != .noAction)
        #expect(decision.riskScore > 0 && decision.riskScore <= 1)
        #expect(decision.policyVersion == 3)
    }

    @Test(arguments: RuleModeTests.cases)
    func monitoredAccepts(_ c: Case) throws {
        let decision = decide(c, c.tripping, .monitor)
        #expect(decision.outcome == .accept)
        #expect(decision.action == .noAction)
        let result = try #require(decision.result(c.rule))
        #expect(result.fired && result.mode == .monitor)
        #expect(decision.riskScore > 0)
    }

    @Test(arguments: RuleModeTests.cases)
    func offDoesNotRun(_ c: Case) {
        let decision = decide(c, c.tripping, .off)
        #expect(decision.outcome == .accept)
        #expect(decision.ruleResults.isEmpty)
        #expect(decision.riskScore == 0)
    }

    @Test(arguments: RuleModeTests.cases)
    func honestEventPassesEnforced(_ c: Case) {
        let honest = event { $0.time = World.t0 + 7_200 }
        let decision = decide(c, honest, .enforce)
        #expect(decision.outcome == .accept)
        #expect(decision.result(c.rule)?.fired == false)
    }
}
