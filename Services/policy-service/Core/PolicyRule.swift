import AttendanceProtocol
import Foundation

/// One anti-fraud rule: a pure function of the event and what the service keeps in memory.
///
/// Rules are value types without I/O, clocks or randomness: everything they need comes in through
/// the event and `PolicyContext` (registry snapshot, punch history, the site's thresholds, `now`).
/// The same inputs always give the same outcome, so a decision can be replayed and tested.
///
/// A rule that has nothing to judge (its input is absent, or the payload kind is not its concern)
/// passes, unless the site sets `PolicySettings.requireSensorData` and the rule documents that it
/// then fires on missing input.
package protocol PolicyRule: Sendable {
    var id: PolicyRuleID { get }
    func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome
}

/// Why a rule fired and what it suggests.
package struct RuleFiring: Hashable, Sendable {
    /// In words a user or an operator can act on (it becomes `RuleResult.reason`).
    package var reason: String
    /// What the app should do if this firing decides the verdict.
    package var action: AppAction
    /// This firing's contribution to the risk score, 0...1 (see `PolicyEngine` for the formula).
    package var risk: Double
    /// For `action == .retryAfter`: how long until a new punch would pass.
    package var retryAfterSeconds: Int?
    /// Whether an enforced firing refuses the event. `false` for a finding that changes how the
    /// event is read but is no reason to refuse it (the hysteresis fold of `rate_limit`): the
    /// verdict lists the rule as fired with its reason, and the event is accepted.
    package var refuses = true
}

/// The result of one rule on one event.
package enum RuleOutcome: Hashable, Sendable {
    case passed
    case fired(RuleFiring)

    /// Shorthand for `.fired(RuleFiring(...))`.
    package static func fire(
        _ reason: String, action: AppAction, risk: Double, retryAfterSeconds: Int? = nil
    ) -> RuleOutcome {
        .fired(RuleFiring(reason: reason, action: action, risk: risk, retryAfterSeconds: retryAfterSeconds))
    }

    /// A finding recorded on the verdict that never refuses, even when the rule is enforced.
    package static func note(_ reason: String) -> RuleOutcome {
        .fired(RuleFiring(reason: reason, action: .noAction, risk: 0, refuses: false))
    }

    package var didFire: Bool {
        if case .fired = self { return true }
        return false
    }

    package var firing: RuleFiring? {
        if case .fired(let firing) = self { return firing }
        return nil
    }

    /// Several problems found by one rule, as one firing: reasons joined with "; ", the most
    /// relevant action (`ActionPrecedence`), the largest retry delay, risks combined like the
    /// engine combines rules (1 - Π(1 - r)).
    package static func combining(_ firings: [RuleFiring]) -> RuleOutcome {
        guard let first = firings.first else { return .passed }
        if firings.count == 1 { return .fired(first) }
        var action = first.action
        var survival = 1.0
        var retry: Int?
        for firing in firings {
            if ActionPrecedence.rank(firing.action) < ActionPrecedence.rank(action) { action = firing.action }
            survival *= 1 - RiskScore.clamp(firing.risk)
            if let seconds = firing.retryAfterSeconds { retry = max(retry ?? 0, seconds) }
        }
        return .fire(
            firings.map(\.reason).joined(separator: "; "), action: action, risk: 1 - survival,
            retryAfterSeconds: action == .retryAfter ? retry : nil
        )
    }
}

/// What rules may read besides the event: state the service keeps in memory, and the deciding
/// site's thresholds.
///
/// `PolicyEngine.decide` overwrites `settings` with the deciding policy's settings; when a rule is
/// evaluated on its own (tests), the settings given here are used.
package struct PolicyContext: Sendable {
    package var registry: any RegistryView
    package var history: any PunchHistory
    /// The server's clock when deciding: `PolicyDecision.decidedAt`. Rules about the device's clock
    /// compare the event time with `RawEventEnvelope.receivedAt`, not with this.
    package var now: Date
    package var settings: PolicySettings

    package init(
        registry: any RegistryView, history: any PunchHistory, now: Date, settings: PolicySettings = PolicySettings()
    ) {
        self.registry = registry
        self.history = history
        self.now = now
        self.settings = settings
    }
}
