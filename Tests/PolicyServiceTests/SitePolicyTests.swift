import AttendanceProtocol
import Foundation
import PolicyServiceCore
import Testing

@Suite("Site policy configuration")
struct SitePolicyTests {
    @Test func defaultPolicyIsValidAndDocumented() throws {
        let policy = SitePolicy.default
        #expect(policy.version == 0)
        #expect(policy.automaticAttendance)
        #expect(policy.settings.minSecondsBetweenPunches == 60)
        #expect(policy.settings.minSteps2min == 30)
        #expect(policy.config(of: .beaconValidity) == .enforce)
        #expect(policy.config(of: .motionGating) == .monitor)
        #expect(policy.config(of: .gattChallenge) == .off)
        try policy.validate(hostedRules: PolicyEngine.standard.ruleIDs)
        // Every hosted rule has a default mode.
        #expect(Set(PolicyEngine.standard.ruleIDs) == Set(SitePolicy.defaultRules.keys))
    }

    @Test func partialJSONTakesDefaults() throws {
        let json = #"{"siteId": "S_HQ", "version": 7, "settings": {"minSecondsBetweenPunches": 90}}"#
        let policy = try ProtocolCodec.wire.decode(SitePolicy.self, from: json)
        #expect(policy.siteId == "S_HQ")
        #expect(policy.version == 7)
        #expect(policy.automaticAttendance)
        #expect(policy.rules == SitePolicy.defaultRules)
        #expect(policy.settings.minSecondsBetweenPunches == 90)
        #expect(policy.settings.minDwellReadings == 2)
    }

    @Test func rulesGivenAreTheWholeSet() throws {
        let json = #"""
            {"siteId": "S_HQ", "version": 8, "automaticAttendance": false,
             "rules": {"beacon_validity": "enforce", "motion_gating": {"mode": "monitor", "canaryPercent": 25}, "rate_limit": "off"}}
            """#
        let policy = try ProtocolCodec.wire.decode(SitePolicy.self, from: json)
        #expect(!policy.automaticAttendance)
        #expect(policy.config(of: .beaconValidity) == .enforce)
        #expect(policy.config(of: .motionGating) == RuleConfig(.monitor, canaryPercent: 25))
        #expect(policy.config(of: .rateLimit) == .off)
        #expect(policy.config(of: .deviceBinding) == .off) // not named
    }

    @Test func encodingRoundTrips() throws {
        var settings = PolicySettings()
        settings.minAppVersion = "1.12.0"
        settings.deniedModelPrefixes = ["iPhone8,"]
        var policy = SitePolicy(siteId: "S_HQ", version: 12, settings: settings)
        policy.rules[.motionGating] = RuleConfig(.enforce, canaryPercent: 10)
        let text = try ProtocolCodec.canonical.encodeToString(policy)
        #expect(text.contains(#""motion_gating":{"canaryPercent":10,"mode":"enforce"}"#))
        #expect(text.contains(#""beacon_validity":"enforce""#))
        #expect(try ProtocolCodec.wire.decode(SitePolicy.self, from: text) == policy)
        // Foundation's coders agree.
        let viaFoundation = try JSONDecoder().decode(SitePolicy.self, from: JSONEncoder().encode(policy))
        #expect(viaFoundation == policy)
    }

    @Test func badModeIsADecodingError() {
        #expect(throws: ProtocolDecodingError.self) {
            try ProtocolCodec.wire.decode(SitePolicy.self, from: #"{"version": 1, "rules": {"dwell": "enforced"}}"#)
        }
        #expect(throws: ProtocolDecodingError.self) {
            try ProtocolCodec.wire.decode(SitePolicy.self, from: #"{"siteId": "S_HQ"}"#)
        }
    }

    @Test func validationReportsEveryProblemReadably() throws {
        var policy = SitePolicy(siteId: " ", version: -1)
        policy.rules[.unrecognized("rate_limt")] = .enforce
        policy.rules[.killSwitch] = .enforce
        policy.rules[.dwell] = RuleConfig(.enforce, canaryPercent: 150)
        policy.settings.minSecondsBetweenPunches = -5
        policy.settings.minAppVersion = "one point two"
        policy.settings.flatRssiMaxStdDevDb = .nan
        policy.settings.maxDevicesPerUser = 0
        let issues = policy.validationIssues()
        #expect(
            issues.map(\.field) == [
                "siteId", "version", "rules.dwell.canaryPercent", "rules.kill_switch", "rules.rate_limt",
                "settings.minSecondsBetweenPunches", "settings.minAppVersion", "settings.flatRssiMaxStdDevDb",
                "settings.maxDevicesPerUser",
            ])
        #expect(issues.contains { $0.description == "settings.minSecondsBetweenPunches: must be 0...86400 s, got -5" })
        #expect(issues.contains { $0.description.hasPrefix("rules.rate_limt: unknown rule \"rate_limt\"; rules are: beacon_validity, ") })
        #expect(issues.contains { $0.description == "settings.minAppVersion: \"one point two\" is not a version like 1.12.0" })
        let error = #expect(throws: PolicyValidationError.self) { try policy.validate() }
        #expect(error?.issues == issues)
        #expect(error?.description.hasPrefix("invalid site policy: siteId: must not be empty; version:") == true)
        // A version the store's integer column cannot take one more of (a policy file's) is refused too.
        #expect(SitePolicy(siteId: "S_HQ", version: Int(Int32.max)).validationIssues().map(\.field) == ["version"])
        #expect(SitePolicy(siteId: "S_HQ", version: Int(Int32.max) - 1).validationIssues().isEmpty)
    }

    @Test func policyBookPicksTheSiteOrTheDefaultAndIgnoresStaleVersions() {
        var book = PolicyBook(sites: [SitePolicy(siteId: "S_HQ", version: 5)])
        #expect(book.policy(forSite: "S_HQ").version == 5)
        #expect(book.policy(forSite: "S_ELSEWHERE").version == 0)
        #expect(book.policy(forSite: nil).version == 0)
        let stale = book.upsert(SitePolicy(siteId: "S_HQ", version: 4))
        #expect(!stale)
        let newer = book.upsert(SitePolicy(siteId: "S_HQ", version: 6, automaticAttendance: false))
        #expect(newer)
        #expect(book.policy(forSite: "S_HQ").automaticAttendance == false)
        let newDefault = book.upsert(SitePolicy(version: 2))
        #expect(newDefault)
        #expect(book.policy(forSite: "S_ELSEWHERE").version == 2)
        book.remove(siteId: "S_HQ")
        #expect(book.policy(forSite: "S_HQ").version == 2)
    }

    @Test func checkOutWithoutSiteUsesTheSiteOfTheLatestPunch() {
        let book = PolicyBook(sites: [SitePolicy(siteId: World.branch, version: 3), SitePolicy(siteId: World.hq, version: 9)])
        let history = PolicyHistory.with(event())
        let out = contractCheckOut(at: World.t0 + 3_600, reason: .regionExit)
        #expect(book.policy(for: out, history: history).version == 9)
        #expect(book.policy(for: out, history: PolicyHistory()).version == 0)
    }
}

@Suite("Semantic versions")
struct SemanticVersionTests {
    @Test(arguments: [
        ("1.9.9", "1.12.0"), ("1.12", "1.12.1"), ("1.12.0-beta.2", "1.12.0"), ("1.12.0-alpha", "1.12.0-beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-1", "1.0.0-alpha"), ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("v2", "10.0"), ("0.9", "1"),
    ])
    func ordering(older: String, newer: String) throws {
        let a = try #require(SemanticVersion(older))
        let b = try #require(SemanticVersion(newer))
        #expect(a < b)
        #expect(!(b < a))
    }

    @Test func equalityIgnoresTrailingZerosAndBuildMetadata() throws {
        #expect(SemanticVersion("1.12") == SemanticVersion("1.12.0"))
        #expect(SemanticVersion("1.12.0+345") == SemanticVersion("v1.12.0"))
        #expect(Set([SemanticVersion("1.2")!, SemanticVersion("1.2.0")!]).count == 1)
        #expect(SemanticVersion(" 1.2.3 ")?.description == "1.2.3")
    }

    @Test(arguments: ["", "banana", "1..2", "1.2.", "-1.2", "1.2-", "1.2.3+", "1.x", "１.2", "1.2.3.4.5.6.7", "1234567890.1"])
    func rejectsNonVersions(_ text: String) {
        #expect(SemanticVersion(text) == nil)
    }
}

@Suite("Registry snapshot: the banned prefixes")
struct RegistrySnapshotTests {
    @Test func bannedPrefixesIgnoreCaseAndDashes() {
        let registry = RegistrySnapshot()
        #expect(registry.bannedPrefix(of: "e2c56db5-dffb-48d2-b060-d0f5a71096e0") == "E2C56DB5")
        #expect(registry.bannedPrefix(of: "FDA50693A4E24FB1AFCFC6EB07647825") == "FDA50693")
        #expect(registry.bannedPrefix(of: World.companyUUID) == nil)
        var custom = RegistrySnapshot(bannedPrefixes: ["8d4f-2a61"])
        #expect(custom.bannedPrefix(of: World.companyUUID) == "8D4F2A61")
        custom.setBannedPrefixes([])
        #expect(custom.bannedPrefix(of: World.bannedUUID) == nil)
    }
}
