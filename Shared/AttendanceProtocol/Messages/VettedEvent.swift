import Foundation

/// A raw event with the policy service's decision, on `attendance.events.vetted` (key: user id).
/// The merger records accepted events and turns rejected ones into 409 verdicts.
public struct VettedEvent: TopicMessage {
    public static let topic = Topic.vettedEvents
    public static let schemaVersion = 1

    public var raw: RawEventEnvelope
    public var decision: PolicyDecision

    public init(raw: RawEventEnvelope, decision: PolicyDecision) {
        self.raw = raw
        self.decision = decision
    }

    public var partitionKey: PartitionKey { .vettedEvent(userId: raw.userId) }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, raw, decision
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        raw = try c.decode(RawEventEnvelope.self, forKey: .raw)
        decision = try c.decode(PolicyDecision.self, forKey: .decision)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(raw, forKey: .raw)
        try c.encode(decision, forKey: .decision)
    }
}

/// The policy engine's verdict on one event: which rules ran, which fired, and what the app should do.
public struct PolicyDecision: Codable, Hashable, Sendable {
    public var outcome: PolicyOutcome
    /// Every rule that ran, fired or not, in evaluation order.
    public var ruleResults: [RuleResult]
    /// 0 (clean) ... 1 (certainly fraudulent).
    public var riskScore: Double
    public var action: AppAction
    /// Seconds the app should wait when `action` is `retry_after`.
    public var retryAfterSeconds: Int?
    /// The version of the site's policy configuration that decided.
    public var policyVersion: Int
    public var decidedAt: Date

    public init(
        outcome: PolicyOutcome, ruleResults: [RuleResult], riskScore: Double, action: AppAction,
        retryAfterSeconds: Int? = nil, policyVersion: Int, decidedAt: Date
    ) {
        self.outcome = outcome
        self.ruleResults = ruleResults
        self.riskScore = riskScore
        self.action = action
        self.retryAfterSeconds = retryAfterSeconds
        self.policyVersion = policyVersion
        self.decidedAt = decidedAt
    }

    /// The reasons of the enforced rules that fired: what a 409 tells the user.
    public var reasons: [String] {
        ruleResults.compactMap { $0.fired && $0.mode == .enforce ? $0.reason ?? $0.ruleId.rawValue : nil }
    }

    enum CodingKeys: String, CodingKey {
        case outcome, ruleResults, riskScore, action, retryAfterSeconds, policyVersion, decidedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try c.decode(PolicyOutcome.self, forKey: .outcome)
        ruleResults = try c.decode([RuleResult].self, forKey: .ruleResults)
        riskScore = try c.decode(Double.self, forKey: .riskScore)
        guard (0...1).contains(riskScore) else {
            throw DecodingError.dataCorruptedError(forKey: .riskScore, in: c, debugDescription: "\(riskScore) is outside 0...1")
        }
        action = try c.decode(AppAction.self, forKey: .action)
        retryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds)
        policyVersion = try c.decode(Int.self, forKey: .policyVersion)
        decidedAt = try c.decodeTimestamp(forKey: .decidedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(outcome, forKey: .outcome)
        try c.encode(ruleResults, forKey: .ruleResults)
        try c.encode(riskScore, forKey: .riskScore)
        try c.encode(action, forKey: .action)
        try c.encodeIfPresent(retryAfterSeconds, forKey: .retryAfterSeconds)
        try c.encode(policyVersion, forKey: .policyVersion)
        try c.encodeTimestamp(decidedAt, forKey: .decidedAt)
    }
}

public enum PolicyOutcome: String, ClosedWireEnum {
    case accept
    case reject
}

/// How a rule applies at a site: `enforce` can reject, `monitor` only records that it fired.
public enum RuleMode: String, ClosedWireEnum {
    case enforce
    case monitor
}

/// One rule's result in a decision.
public struct RuleResult: Codable, Hashable, Sendable {
    public var ruleId: PolicyRuleID
    public var mode: RuleMode
    public var fired: Bool
    /// Why it fired, in words a user or operator can act on.
    public var reason: String?

    public init(ruleId: PolicyRuleID, mode: RuleMode, fired: Bool, reason: String? = nil) {
        self.ruleId = ruleId
        self.mode = mode
        self.fired = fired
        self.reason = reason
    }
}

/// The anti-fraud rules (docs/SPECIFICATION.md, "6. Anti-fraud rules"). Open: a new rule needs no
/// schema change.
public enum PolicyRuleID: OpenWireEnum {
    case beaconValidity, deviceBinding, rateLimit, dwell, coLocation, motionGating, gattChallenge
    case appAttestation, rssiPlausibility, impossibleTravel, clockSkew, multiDevice, killSwitch
    case siteAssignment
    case unrecognized(String)

    public static let knownValues: [PolicyRuleID] = [
        .beaconValidity, .deviceBinding, .rateLimit, .dwell, .coLocation, .motionGating, .gattChallenge,
        .appAttestation, .rssiPlausibility, .impossibleTravel, .clockSkew, .multiDevice, .killSwitch,
        .siteAssignment,
    ]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .beaconValidity: return "beacon_validity"
        case .deviceBinding: return "device_binding"
        case .rateLimit: return "rate_limit"
        case .dwell: return "dwell"
        case .coLocation: return "co_location"
        case .motionGating: return "motion_gating"
        case .gattChallenge: return "gatt_challenge"
        case .appAttestation: return "app_attestation"
        case .rssiPlausibility: return "rssi_plausibility"
        case .impossibleTravel: return "impossible_travel"
        case .clockSkew: return "clock_skew"
        case .multiDevice: return "multi_device"
        case .killSwitch: return "kill_switch"
        case .siteAssignment: return "site_assignment"
        case .unrecognized(let raw): return raw
        }
    }
}
