import AttendanceProtocol
import Foundation

/// How a rule is switched at a site.
package enum RuleSwitch: String, Codable, Hashable, Sendable, CaseIterable {
    /// Fires reject the event.
    case enforce
    /// Fires are recorded on the verdict (and count towards the risk score) but never reject.
    case monitor
    /// Not evaluated, not recorded.
    case off

    package var mode: RuleMode? {
        switch self {
        case .enforce: return .enforce
        case .monitor: return .monitor
        case .off: return nil
        }
    }
}

/// One rule's configuration at a site: its switch and, for a canary rollout, the share of the
/// site's users it applies to.
///
/// JSON: `"enforce"` (everyone), or `{"mode": "enforce", "canaryPercent": 10}`. A user outside the
/// canary is treated as if the rule were `off`. Users are bucketed by a stable hash (FNV-1a of
/// `ruleId|userId`, mod 100), so a user stays in or out as the percentage only grows, and each
/// rule picks its own users.
package struct RuleConfig: Codable, Hashable, Sendable {
    package var mode: RuleSwitch
    /// 0...100; 100 means every user.
    package var canaryPercent: Int

    package init(_ mode: RuleSwitch, canaryPercent: Int = 100) {
        self.mode = mode
        self.canaryPercent = canaryPercent
    }

    package static let enforce = RuleConfig(.enforce)
    package static let monitor = RuleConfig(.monitor)
    package static let off = RuleConfig(.off)

    /// The mode this rule runs in for a user, `nil` when it does not run.
    package func mode(for userId: String, ruleId: PolicyRuleID) -> RuleMode? {
        guard let mode = mode.mode else { return nil }
        if canaryPercent >= 100 { return mode }
        if canaryPercent <= 0 { return nil }
        return Self.canaryBucket(ruleId: ruleId, userId: userId) < canaryPercent ? mode : nil
    }

    /// 0...99, the same on every machine and run (Swift's `Hasher` is seeded per process, so not it).
    package static func canaryBucket(ruleId: PolicyRuleID, userId: String) -> Int {
        var hash = FNV1a()
        hash.combine(ruleId.rawValue.utf8)
        hash.combine(UInt8(ascii: "|"))
        hash.combine(userId.utf8)
        return Int(hash.value % 100)
    }

    enum CodingKeys: String, CodingKey { case mode, canaryPercent }

    package init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            guard let mode = RuleSwitch(rawValue: text) else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: decoder.codingPath,
                        debugDescription: "\"\(text)\" is not one of: enforce, monitor, off"
                    ))
            }
            self.init(mode)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try c.decode(RuleSwitch.self, forKey: .mode),
            canaryPercent: try c.decodeIfPresent(Int.self, forKey: .canaryPercent) ?? 100
        )
    }

    package func encode(to encoder: any Encoder) throws {
        if canaryPercent == 100 && !encoder.wantsLongForm {
            var single = encoder.singleValueContainer()
            try single.encode(mode)
        } else {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(mode, forKey: .mode)
            try c.encode(canaryPercent, forKey: .canaryPercent)
        }
    }
}

/// A site's thresholds. Every field has a default, and a JSON document may omit any of them.
package struct PolicySettings: Codable, Hashable, Sendable {
    // Rate limit and dwell
    /// Minimum seconds between two punches of the same type by a user at the same gate (`rate_limit`).
    package var minSecondsBetweenPunches: Int = 60
    /// Hysteresis against ping-pong between doors: a punch of the same type by a user at another
    /// gate of the same site within this many seconds of the previous one is the same presence: it
    /// is accepted (so the merger folds it into the open session, whose merge window defaults to
    /// 45 s too) and `rate_limit` records that it folded it. 0 turns it off (`rate_limit`).
    package var minSecondsBetweenGates: Int = 45
    /// A check-in needs the beacon heard (non-zero RSSI) in at least this many readings (`dwell`).
    package var minDwellReadings: Int = 2
    /// A check-in needs `tEnd - timestamp` of at least this many seconds when `tEnd` is sent (`dwell`).
    package var minDwellSeconds: Int = 0
    /// When true, rules fire on events that lack the input they judge (no RSSI series, no motion,
    /// no geofence or location, no beacon on a check-in) instead of passing them.
    package var requireSensorData: Bool = false

    // Co-location
    /// Metres added to the site's geofence radius before a position counts as outside (`co_location`).
    package var geofenceToleranceMeters: Double = 50
    /// Position fixes less accurate than this are not used as evidence (`co_location`).
    package var maxLocationAccuracyMeters: Double = 500

    // Motion
    /// Steps in the last two minutes that count as walking when the activity is not walking/running.
    package var minSteps2min: Int = 30

    // App attestation
    /// The oldest app version allowed, compared semantically; `nil` allows every version.
    package var minAppVersion: String?
    package var refuseJailbroken: Bool = true
    /// Refuse iOS `isSimulatedBySoftware` / Android mock-provider locations.
    package var refuseSimulatedLocation: Bool = true
    /// When not empty, only models starting with one of these are allowed (e.g. `iPhone`).
    package var allowedModelPrefixes: [String] = []
    /// Models starting with one of these are refused (e.g. `iPhone8,` for every iPhone 8).
    package var deniedModelPrefixes: [String] = []

    // RSSI plausibility
    /// A series of at least `flatRssiMinReadings` heard readings with a standard deviation below
    /// this is flat (a replaying spoofer), in dB.
    package var flatRssiMaxStdDevDb: Double = 0.5
    package var flatRssiMinReadings: Int = 4

    // Multi-device
    /// Distinct devices a user may punch from within `multiDeviceWindowSeconds`.
    package var maxDevicesPerUser: Int = 1
    package var multiDeviceWindowSeconds: Int = 900

    // Plausibility over time
    /// Faster than this between two sites' geofences is impossible travel, km/h.
    package var maxTravelSpeedKmh: Double = 300
    /// Event time further than this from receipt, without an offline record, is suspicious.
    package var maxClockSkewSeconds: Int = 300

    package init() {}

    enum CodingKeys: String, CodingKey, CaseIterable {
        case minSecondsBetweenPunches, minSecondsBetweenGates, minDwellReadings
        case minDwellSeconds, requireSensorData, geofenceToleranceMeters, maxLocationAccuracyMeters, minSteps2min
        case minAppVersion, refuseJailbroken, refuseSimulatedLocation, allowedModelPrefixes, deniedModelPrefixes
        case flatRssiMaxStdDevDb, flatRssiMinReadings, maxDevicesPerUser, multiDeviceWindowSeconds
        case maxTravelSpeedKmh, maxClockSkewSeconds
    }

    /// Read (a boolean or null, as before) and ignored: `rate_limit` no longer refuses a check-out
    /// after a check-in, so there is nothing to exempt. Never written.
    private enum RetiredKeys: String, CodingKey { case exemptSoftExitCheckouts }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func read<T: Decodable>(_ key: CodingKeys, _ value: inout T) throws {
            if let decoded = try c.decodeIfPresent(T.self, forKey: key) { value = decoded }
        }
        try read(.minSecondsBetweenPunches, &minSecondsBetweenPunches)
        try read(.minSecondsBetweenGates, &minSecondsBetweenGates)
        try read(.minDwellReadings, &minDwellReadings)
        try read(.minDwellSeconds, &minDwellSeconds)
        try read(.requireSensorData, &requireSensorData)
        try read(.geofenceToleranceMeters, &geofenceToleranceMeters)
        try read(.maxLocationAccuracyMeters, &maxLocationAccuracyMeters)
        try read(.minSteps2min, &minSteps2min)
        minAppVersion = try c.decodeIfPresent(String.self, forKey: .minAppVersion)
        try read(.refuseJailbroken, &refuseJailbroken)
        try read(.refuseSimulatedLocation, &refuseSimulatedLocation)
        try read(.allowedModelPrefixes, &allowedModelPrefixes)
        try read(.deniedModelPrefixes, &deniedModelPrefixes)
        try read(.flatRssiMaxStdDevDb, &flatRssiMaxStdDevDb)
        try read(.flatRssiMinReadings, &flatRssiMinReadings)
        try read(.maxDevicesPerUser, &maxDevicesPerUser)
        try read(.multiDeviceWindowSeconds, &multiDeviceWindowSeconds)
        try read(.maxTravelSpeedKmh, &maxTravelSpeedKmh)
        try read(.maxClockSkewSeconds, &maxClockSkewSeconds)
        _ = try decoder.container(keyedBy: RetiredKeys.self).decodeIfPresent(Bool.self, forKey: .exemptSoftExitCheckouts)
    }

    // `encode(to:)` is the synthesized one: every field is written (an absent `minAppVersion` as
    // nothing), so a stored policy shows its full effective configuration.
}

/// A site's anti-fraud configuration: which rules run and how, their thresholds, the kill switch,
/// and the version recorded on every verdict it decides.
///
/// JSON (admin REST and the change feed):
/// ```json
/// {"siteId": "S_HQ", "version": 7, "automaticAttendance": true,
///  "rules": {"beacon_validity": "enforce", "motion_gating": {"mode": "enforce", "canaryPercent": 10}},
///  "settings": {"minSecondsBetweenPunches": 90, "minAppVersion": "1.12.0"}}
/// ```
/// Omitted `rules` means the default rule set (`SitePolicy.defaultRules`); given `rules` is the
/// whole set, and a rule it does not name is `off` (so a rule added to the engine later stays off
/// at a configured site until an admin turns it on). Omitted `settings` fields take their defaults,
/// omitted `automaticAttendance` is `true`, omitted `siteId` is the default policy.
package struct SitePolicy: Codable, Hashable, Sendable {
    /// `nil` for the default policy (sites without their own).
    package var siteId: String?
    /// Grows with every change; recorded on every verdict as `PolicyDecision.policyVersion`.
    /// The built-in default policy is version 0.
    package var version: Int
    /// The kill switch: `false` turns automatic attendance off at the site; every event is then
    /// rejected with action `manual_checkin`.
    package var automaticAttendance: Bool
    package var rules: [PolicyRuleID: RuleConfig]
    package var settings: PolicySettings

    package init(
        siteId: String? = nil, version: Int, automaticAttendance: Bool = true,
        rules: [PolicyRuleID: RuleConfig] = SitePolicy.defaultRules, settings: PolicySettings = PolicySettings()
    ) {
        self.siteId = siteId
        self.version = version
        self.automaticAttendance = automaticAttendance
        self.rules = rules
        self.settings = settings
    }

    /// The rule modes of the default policy: what no honest device should trip is enforced; what
    /// honest devices may trip (no motion at a desk, a second phone, odd clocks, dwell) is monitored.
    package static let defaultRules: [PolicyRuleID: RuleConfig] = [
        .beaconValidity: .enforce,
        .deviceBinding: .enforce,
        .siteAssignment: .enforce,
        .rateLimit: .enforce,
        .coLocation: .enforce,
        .appAttestation: .enforce,
        .rssiPlausibility: .enforce,
        .dwell: .monitor,
        .motionGating: .monitor,
        .multiDevice: .monitor,
        .impossibleTravel: .monitor,
        .clockSkew: .monitor,
    ]

    /// The built-in default: version 0, `defaultRules`, default settings, automatic attendance on.
    package static let `default` = SitePolicy(version: 0)

    /// Every hosted rule set to `mode` (tests, and "enforce everything" sites).
    package static func all(
        _ mode: RuleSwitch, version: Int, siteId: String? = nil, settings: PolicySettings = PolicySettings(),
        hostedRules: [PolicyRuleID] = PolicyEngine.standard.ruleIDs
    ) -> SitePolicy {
        var rules: [PolicyRuleID: RuleConfig] = [:]
        for id in hostedRules { rules[id] = RuleConfig(mode) }
        return SitePolicy(siteId: siteId, version: version, rules: rules, settings: settings)
    }

    /// The configuration of a rule (`off` when the policy does not name it).
    package func config(of ruleId: PolicyRuleID) -> RuleConfig { rules[ruleId] ?? .off }

    /// The mode a rule runs in for a user's event, `nil` when it does not run.
    package func mode(of ruleId: PolicyRuleID, userId: String) -> RuleMode? {
        rules[ruleId]?.mode(for: userId, ruleId: ruleId)
    }

    // MARK: Codable

    enum CodingKeys: String, CodingKey { case siteId, version, automaticAttendance, rules, settings }

    struct RuleKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        siteId = try c.decodeIfPresent(String.self, forKey: .siteId)
        version = try c.decode(Int.self, forKey: .version)
        automaticAttendance = try c.decodeIfPresent(Bool.self, forKey: .automaticAttendance) ?? true
        if c.contains(.rules) {
            let r = try c.nestedContainer(keyedBy: RuleKey.self, forKey: .rules)
            var rules: [PolicyRuleID: RuleConfig] = [:]
            for key in r.allKeys {
                rules[PolicyRuleID(rawValue: key.stringValue)] = try r.decode(RuleConfig.self, forKey: key)
            }
            self.rules = rules
        } else {
            rules = Self.defaultRules
        }
        settings = try c.decodeIfPresent(PolicySettings.self, forKey: .settings) ?? PolicySettings()
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(siteId, forKey: .siteId)
        try c.encode(version, forKey: .version)
        try c.encode(automaticAttendance, forKey: .automaticAttendance)
        var r = c.nestedContainer(keyedBy: RuleKey.self, forKey: .rules)
        for (id, config) in rules.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try r.encode(config, forKey: RuleKey(stringValue: id.rawValue))
        }
        try c.encode(settings, forKey: .settings)
    }
}

// MARK: Validation

/// One problem in a policy: the field (a JSON path) and what is wrong with it.
package typealias PolicyValidationIssue = FieldError

/// A refused policy, with every problem found (not only the first).
package struct PolicyValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    package var issues: [PolicyValidationIssue]

    package var description: String {
        "invalid site policy: " + issues.map(\.description).joined(separator: "; ")
    }
}

extension SitePolicy {
    /// Every problem of the policy, in field order; empty when it is valid.
    ///
    /// With `hostedRules` (normally `PolicyEngine.ruleIDs`), a rule switched on that the engine
    /// does not implement is a problem too: it would silently never fire.
    package func validationIssues(hostedRules: [PolicyRuleID]? = nil) -> [PolicyValidationIssue] {
        var issues: [PolicyValidationIssue] = []
        func check(_ ok: Bool, _ field: String, _ message: @autoclosure () -> String) {
            if !ok { issues.append(PolicyValidationIssue(field: field, reason: message())) }
        }
        if let siteId { check(!siteId.trimmingCharacters(in: .whitespaces).isEmpty, "siteId", "must not be empty") }
        // Stored as a PostgreSQL integer, and the next version is one more.
        check((0..<Int(Int32.max)).contains(version), "version", "must be 0...\(Int32.max - 1), got \(version)")

        for (id, config) in rules.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let field = "rules.\(id.rawValue)"
            if !id.isKnown {
                let known = PolicyRuleID.knownValues.map(\.rawValue).joined(separator: ", ")
                issues.append(.init(field: field, reason: "unknown rule \"\(id.rawValue)\"; rules are: \(known)"))
                continue
            }
            if id == .killSwitch {
                issues.append(.init(field: field, reason: "the kill switch is set with \"automaticAttendance\", not as a rule"))
                continue
            }
            check((0...100).contains(config.canaryPercent), field + ".canaryPercent", "must be 0...100, got \(config.canaryPercent)")
            if let hostedRules, config.mode != .off, !hostedRules.contains(id) {
                issues.append(
                    .init(field: field, reason: "rule \"\(id.rawValue)\" is not implemented by this policy service; set it to \"off\""))
            }
        }

        let s = settings
        func range<T: Comparable>(_ value: T, _ bounds: ClosedRange<T>, _ key: PolicySettings.CodingKeys, unit: String = "") {
            check(
                bounds.contains(value), "settings.\(key.rawValue)",
                "must be \(bounds.lowerBound)...\(bounds.upperBound)\(unit), got \(value)")
        }
        func finite(_ value: Double, _ key: PolicySettings.CodingKeys) -> Bool {
            check(value.isFinite, "settings.\(key.rawValue)", "must be a finite number")
            return value.isFinite
        }
        range(s.minSecondsBetweenPunches, 0...86_400, .minSecondsBetweenPunches, unit: " s")
        range(s.minSecondsBetweenGates, 0...86_400, .minSecondsBetweenGates, unit: " s")
        range(s.minDwellReadings, 0...60, .minDwellReadings)
        range(s.minDwellSeconds, 0...600, .minDwellSeconds, unit: " s")
        if finite(s.geofenceToleranceMeters, .geofenceToleranceMeters) {
            range(s.geofenceToleranceMeters, 0...5_000, .geofenceToleranceMeters, unit: " m")
        }
        if finite(s.maxLocationAccuracyMeters, .maxLocationAccuracyMeters) {
            range(s.maxLocationAccuracyMeters, 1...10_000, .maxLocationAccuracyMeters, unit: " m")
        }
        range(s.minSteps2min, 0...1_000, .minSteps2min)
        if let minAppVersion = s.minAppVersion {
            check(SemanticVersion(minAppVersion) != nil, "settings.minAppVersion", "\"\(minAppVersion)\" is not a version like 1.12.0")
        }
        for (i, prefix) in s.allowedModelPrefixes.enumerated() {
            check(!prefix.isEmpty, "settings.allowedModelPrefixes[\(i)]", "must not be empty")
        }
        for (i, prefix) in s.deniedModelPrefixes.enumerated() {
            check(!prefix.isEmpty, "settings.deniedModelPrefixes[\(i)]", "must not be empty")
        }
        if finite(s.flatRssiMaxStdDevDb, .flatRssiMaxStdDevDb) {
            range(s.flatRssiMaxStdDevDb, 0...20, .flatRssiMaxStdDevDb, unit: " dB")
        }
        range(s.flatRssiMinReadings, 2...120, .flatRssiMinReadings)
        range(s.maxDevicesPerUser, 1...20, .maxDevicesPerUser)
        range(s.multiDeviceWindowSeconds, 0...604_800, .multiDeviceWindowSeconds, unit: " s")
        if finite(s.maxTravelSpeedKmh, .maxTravelSpeedKmh) {
            range(s.maxTravelSpeedKmh, 1...5_000, .maxTravelSpeedKmh, unit: " km/h")
        }
        range(s.maxClockSkewSeconds, 1...604_800, .maxClockSkewSeconds, unit: " s")
        return issues
    }

    /// Throws every problem at once; see `validationIssues(hostedRules:)`.
    package func validate(hostedRules: [PolicyRuleID]? = nil) throws(PolicyValidationError) {
        let issues = validationIssues(hostedRules: hostedRules)
        if !issues.isEmpty { throw PolicyValidationError(issues: issues) }
    }
}

// MARK: Policies of all sites

/// The policies the service decides with: one per site, a default for the rest, and a global
/// kill switch. A value: swap it whole when admin REST or the feed changes a policy.
package struct PolicyBook: Hashable, Sendable {
    package var defaultPolicy: SitePolicy
    package private(set) var sites: [String: SitePolicy]
    /// Turns automatic attendance off everywhere (for a widespread incident).
    package var globalKillSwitch: Bool

    package init(defaultPolicy: SitePolicy = .default, sites: [SitePolicy] = [], globalKillSwitch: Bool = false) {
        self.defaultPolicy = defaultPolicy
        self.sites = [:]
        self.globalKillSwitch = globalKillSwitch
        for policy in sites { _ = upsert(policy) }
    }

    /// The policy for a site (the default when it has none), with the global kill switch applied.
    package func policy(forSite siteId: String?) -> SitePolicy {
        var policy = siteId.flatMap { sites[$0] } ?? defaultPolicy
        if globalKillSwitch { policy.automaticAttendance = false }
        return policy
    }

    /// The policy for an event: its site, else (check-outs and heartbeats may name none) the site
    /// of the user's latest accepted punch.
    package func policy(for event: RawEventEnvelope, history: any PunchHistory) -> SitePolicy {
        policy(forSite: event.policySiteId ?? history.lastPunch(userId: event.userId)?.siteId)
    }

    /// Stores a site policy unless a newer version is already stored (the feed may replay old
    /// ones). A policy without `siteId` replaces the default under the same rule. Returns whether
    /// it was stored. Validate before storing.
    @discardableResult
    package mutating func upsert(_ policy: SitePolicy) -> Bool {
        guard let siteId = policy.siteId else {
            guard policy.version >= defaultPolicy.version else { return false }
            defaultPolicy = policy
            return true
        }
        if let current = sites[siteId], current.version > policy.version { return false }
        sites[siteId] = policy
        return true
    }

    /// Drops a site's own policy: it falls back to the default.
    package mutating func remove(siteId: String) { sites[siteId] = nil }
}
