import AttendanceProtocol
import Foundation

/// Runs a site's rules on an event and turns their outcomes into a `PolicyDecision`.
///
/// - Kill switch: when the policy's `automaticAttendance` is off, no rule runs; the decision is a
///   reject with action `manual_checkin`, one result (`kill_switch`, enforce, fired) and risk 0
///   (an operational switch, not a fraud signal). It applies to every payload kind, check-outs and
///   heartbeats included.
/// - Every hosted rule whose mode for this user is not off runs, in the engine's order (the order
///   of `ruleResults`); unhosted rules named by the policy are ignored (validation reports them).
/// - Outcome: reject when at least one `enforce` rule fired with a refusing finding; `monitor`
///   rules, and findings that do not refuse (`RuleOutcome.note`, the hysteresis fold), are
///   recorded but never reject.
/// - Action: on reject, the most relevant action among the enforce firings (`ActionPrecedence`);
///   `retryAfterSeconds` is the largest among `retry_after` firings and set only when the action
///   is `retry_after`. On accept the action is `none`, even when monitor rules fired.
/// - Risk score (`RiskScore`): every fired rule, enforce or monitor, contributes its risk r in
///   0...1; the score is 1 - Π(1 - r) (a noisy OR: order-independent, within 0...1, never lower
///   when another rule fires), rounded to 4 decimals. No rule fired: 0.
/// - `policyVersion` is the policy's version; `decidedAt` is `context.now`.
package struct PolicyEngine: Sendable {
    package let rules: [any PolicyRule]

    /// Every rule this build implements, in evaluation order. (GATT challenge-response is not here:
    /// it needs the nonce key and the beacons' keys; see `withGatt(_:)`.)
    package static let standardRules: [any PolicyRule] = [
        BeaconValidityRule(),
        DeviceBindingRule(),
        SiteAssignmentRule(),
        MultiDeviceRule(),
        RateLimitRule(),
        DwellRule(),
        CoLocationRule(),
        MotionGatingRule(),
        AppAttestationRule(),
        RssiPlausibilityRule(),
        ImpossibleTravelRule(),
        ClockSkewRule(),
    ]

    package static let standard = PolicyEngine()

    /// The standard rules plus `gatt_challenge`, right after beacon validity so a verdict lists the
    /// beacon's checks together (every rule runs either way; order only breaks action ties).
    package static func withGatt(_ gatt: GattChallengeRule?) -> PolicyEngine {
        guard let gatt else { return .standard }
        var rules = standardRules
        rules.insert(gatt, at: 1)
        return PolicyEngine(rules: rules)
    }

    /// - Precondition: rule ids are unique, and none is `kill_switch` (the engine's own).
    package init(rules: [any PolicyRule] = PolicyEngine.standardRules) {
        let ids = rules.map(\.id)
        precondition(Set(ids).count == ids.count, "duplicate rule ids: \(ids.map(\.rawValue))")
        precondition(!ids.contains(.killSwitch), "kill_switch is the engine's own, not a rule")
        self.rules = rules
    }

    /// The ids of the hosted rules, in evaluation order.
    package var ruleIDs: [PolicyRuleID] { rules.map(\.id) }

    package func decide(_ event: RawEventEnvelope, context: PolicyContext, policy: SitePolicy) -> PolicyDecision {
        guard policy.automaticAttendance else {
            return PolicyDecision(
                outcome: .reject,
                ruleResults: [
                    RuleResult(
                        ruleId: .killSwitch, mode: .enforce, fired: true, reason: "automatic attendance is switched off at this site")
                ],
                riskScore: 0, action: .manualCheckin, policyVersion: policy.version, decidedAt: context.now
            )
        }
        var context = context
        context.settings = policy.settings

        var results: [RuleResult] = []
        results.reserveCapacity(rules.count)
        var risk = RiskScore()
        var action: AppAction?
        var retryAfter: Int?
        for rule in rules {
            guard let mode = policy.mode(of: rule.id, userId: event.userId) else { continue }
            switch rule.evaluate(event, context: context) {
            case .passed:
                results.append(RuleResult(ruleId: rule.id, mode: mode, fired: false))
            case .fired(let firing):
                results.append(RuleResult(ruleId: rule.id, mode: mode, fired: true, reason: firing.reason))
                risk.add(firing.risk)
                guard mode == .enforce, firing.refuses else { continue }
                if action.map({ ActionPrecedence.rank(firing.action) < ActionPrecedence.rank($0) }) ?? true {
                    action = firing.action
                }
                if firing.action == .retryAfter, let seconds = firing.retryAfterSeconds {
                    retryAfter = max(retryAfter ?? 0, seconds)
                }
            }
        }
        return PolicyDecision(
            outcome: action == nil ? .accept : .reject,
            ruleResults: results,
            riskScore: risk.value,
            action: action ?? .noAction,
            retryAfterSeconds: action == .retryAfter ? retryAfter : nil,
            policyVersion: policy.version,
            decidedAt: context.now
        )
    }
}

/// Which app action wins when several enforce rules fire (lower rank wins; ties keep the earlier
/// rule's). The blocking problem the user cannot get past alone comes first; `retry_after` comes
/// last, since waiting helps only when nothing else is wrong:
///
/// 1. `manual_checkin`: automatic attendance is off.
/// 2. `contact_admin`: device, beacon or integrity problems only an admin can resolve.
/// 3. `update_app`: the app is too old.
/// 4. `enable_bluetooth`: the beacon was not heard.
/// 5. `walk_to_gate`: not at a registered gate of this site (location, dwell, motion).
/// 6. `retry_after`: too soon after the previous punch.
/// 7. an action this build does not know, then `none`.
package enum ActionPrecedence {
    package static let order: [AppAction] = [
        .manualCheckin, .contactAdmin, .updateApp, .enableBluetooth, .walkToGate, .retryAfter,
    ]

    package static func rank(_ action: AppAction) -> Int {
        switch action {
        case .manualCheckin: return 0
        case .contactAdmin: return 1
        case .updateApp: return 2
        case .enableBluetooth: return 3
        case .walkToGate: return 4
        case .retryAfter: return 5
        case .unrecognized: return 6
        case .noAction: return 7
        }
    }
}

/// The risk score: a noisy OR of the fired rules' contributions, 1 - Π(1 - rᵢ), each rᵢ clamped
/// to 0...1 (NaN counts as 0), the result rounded to 4 decimals.
package struct RiskScore: Hashable, Sendable {
    private var survival = 1.0

    package init() {}

    package mutating func add(_ risk: Double) { survival *= 1 - Self.clamp(risk) }

    package var value: Double {
        let raw = 1 - survival
        return min(1, max(0, (raw * 10_000).rounded() / 10_000))
    }

    package static func combine(_ risks: [Double]) -> Double {
        var score = RiskScore()
        for risk in risks { score.add(risk) }
        return score.value
    }

    static func clamp(_ risk: Double) -> Double {
        risk.isNaN ? 0 : min(1, max(0, risk))
    }
}
