import AttendanceProtocol
import Foundation

/// A site policy as an admin sends it (`PUT /v1/admin/policies/{siteId}`): everything but the
/// version, which the store assigns. Same JSON as `SitePolicy` (`rules` omitted means the default
/// rule set, `settings` fields omitted take their defaults, `automaticAttendance` defaults to true).
///
/// Unlike the lenient policy-book file, an admin request with a member this build does not know is
/// refused (the admin API decodes it with `AdminJSON.decodeBody`, which compares what is sent with
/// what this type writes back): a misspelt threshold must not be silently ignored.
package struct SitePolicyDraft: Codable, Hashable, Sendable {
    /// Members of a `GET` answer that a draft sent back as is may carry; ignored (the path names the
    /// site and the store assigns the version).
    /// Members accepted and ignored: the path's and the server's own (`siteId`, `version`), and
    /// `settings.exemptSoftExitCheckouts`, which `rate_limit` no longer needs (it refuses no check-out
    /// after a check-in) but earlier clients still send.
    package static let toleratedMembers: Set<String> = ["siteId", "version", "settings.exemptSoftExitCheckouts"]

    package var automaticAttendance: Bool
    package var rules: [PolicyRuleID: RuleConfig]
    package var settings: PolicySettings

    package init(
        automaticAttendance: Bool = true, rules: [PolicyRuleID: RuleConfig] = SitePolicy.defaultRules,
        settings: PolicySettings = PolicySettings()
    ) {
        self.automaticAttendance = automaticAttendance
        self.rules = rules
        self.settings = settings
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case automaticAttendance, rules, settings }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        automaticAttendance = try c.decodeIfPresent(Bool.self, forKey: .automaticAttendance) ?? true
        if let named = try c.decodeIfPresent([String: RuleConfig].self, forKey: .rules) {
            var rules: [PolicyRuleID: RuleConfig] = [:]
            for (id, config) in named { rules[PolicyRuleID(rawValue: id)] = config }
            self.rules = rules
        } else {
            rules = SitePolicy.defaultRules
        }
        settings = try c.decodeIfPresent(PolicySettings.self, forKey: .settings) ?? PolicySettings()
    }

    /// The policy this draft becomes at `version` for `siteId` (`nil`: the default policy).
    package func policy(siteId: String?, version: Int) -> SitePolicy {
        SitePolicy(siteId: siteId, version: version, automaticAttendance: automaticAttendance, rules: rules, settings: settings)
    }

    /// The draft of an existing policy (to restore an old version as a new one).
    package init(_ policy: SitePolicy) {
        self.init(automaticAttendance: policy.automaticAttendance, rules: policy.rules, settings: policy.settings)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(automaticAttendance, forKey: .automaticAttendance)
        try c.encode(Dictionary(uniqueKeysWithValues: rules.map { ($0.key.rawValue, $0.value) }), forKey: .rules)
        try c.encode(settings, forKey: .settings)
    }
}
