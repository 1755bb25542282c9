import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Logging
import NIOCore
import PolicyServiceCore
import PostgresNIO
import ServiceRuntime
import Synchronization
import Testing

@testable import PolicyService

/// Admin keys without the registry: the middleware and the PostgreSQL verifier are tested with the
/// registry; here only the roles matter.
struct StaticKeys: AdminKeyVerifier {
    static let admin = "brk_admin.test"
    static let viewer = "brk_viewer.test"

    func verify(presentedKey: String) async throws -> APIKey? {
        switch presentedKey {
        case Self.admin: return APIKey(id: "k_admin", name: "policy-test admin", role: .admin, createdAt: Date(), revokedAt: nil)
        case Self.viewer: return APIKey(id: "k_viewer", name: "policy-test viewer", role: .viewer, createdAt: Date(), revokedAt: nil)
        default: return nil
        }
    }
}

/// The admin routes over a schema of the real local PostgreSQL that only this test uses
/// (`LocalStack.withMigratedSchema`), and the refresher the routes apply changes through.
struct PolicyAdminHarness: Sendable {
    let client: PostgresClient
    let schema: String
    let repository: PostgresPolicyRepository
    let refresher: PolicyBookRefresher
    /// Every book the refresher applied, in order.
    let applied: AppliedBox

    static let logger = LocalStack.logger(label: "policy-admin-tests")

    static func run(
        base: PolicyBook = PolicyBook(), hostedRules: [PolicyRuleID] = PolicyEngine.standard.ruleIDs,
        _ body: @escaping @Sendable (PolicyAdminHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await LocalStack.withMigratedSchema(.policy, prefix: "policy_test") { client, schema in
            let repository = PostgresPolicyRepository(client: client, logger: logger)
            let box = AppliedBox()
            let refresher = PolicyBookRefresher(
                base: base, repository: repository, hostedRules: hostedRules, interval: .milliseconds(200), logger: logger
            ) { book in box.books.withLock { $0.append(book) } }
            let harness = PolicyAdminHarness(client: client, schema: schema, repository: repository, refresher: refresher, applied: box)
            let router = Router(context: AdminContext.self)
            addPolicyAdminRoutes(
                to: router, controller: PolicyAdminController(repository: repository, refresher: refresher, hostedRules: hostedRules),
                keyVerifier: StaticKeys()
            )
            try await Application(router: router).test(.router) { client in try await body(harness, client) }
        }
    }
}

final class AppliedBox: Sendable {
    let books = Mutex<[PolicyBook]>([])
}

/// A heartbeat at a site: every policy decides it (the kill switch included), so it shows which
/// version decided.
func heartbeat(site: String, user: String = "u_1") -> RawEventEnvelope {
    let now = Date()
    return RawEventEnvelope(
        requestId: "req_hb", idempotencyKey: "k_hb", userId: user, deviceId: "d_1", siteId: site, appVersion: "1.12.0",
        gatewayInstance: "gateway-0", receivedAt: now, payloadFingerprint: String(repeating: "0", count: 64),
        payload: .heartbeat(HeartbeatRequest(sessionKey: "s_1", ts: now))
    )
}

/// The device of `heartbeat(site:)`, bound to its user.
let boundDevice: RegistrySnapshot = {
    var registry = RegistrySnapshot()
    registry.upsertDevice(DeviceBinding(deviceId: "d_1", userId: "u_1", status: .enrolled))
    return registry
}()

/// The decision on `e`, its user assigned to its site (tenancy is not what these tests are about).
func decide(_ e: RawEventEnvelope, book: PolicyBook) -> PolicyDecision {
    let history = PolicyHistory()
    let policy = book.policy(for: e, history: history)
    var registry = boundDevice
    if let site = e.siteId { registry.upsertUser(id: e.userId, siteIds: [site]) }
    return PolicyEngine.standard.decide(e, context: PolicyContext(registry: registry, history: history, now: Date()), policy: policy)
}

extension TestClientProtocol {
    func send(
        _ method: HTTPRequest.Method, _ path: String, key: String? = StaticKeys.admin, json: String? = nil
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        if json != nil { headers[.contentType] = "application/json" }
        return try await execute(uri: path, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try AdminJSON.decoder().decode(T.self, from: Data(text.utf8))
    }

    /// The problem+json body, with its media type checked.
    func problem() throws -> ProblemDetails {
        #expect(headers[.contentType] == ProblemDetails.mediaType)
        return try JSONDecoder().decode(ProblemDetails.self, from: Data(text.utf8))
    }
}

func siteName() -> String { "site-" + String(UUID().uuidString.prefix(8)).lowercased() }

@Suite("Policy administration")
struct PolicyAdminTests {
    @Test func putStoresVersionsThatTheNextDecisionRecords() async throws {
        try await PolicyAdminHarness.run { h, client in
            let site = siteName()
            let first = try await client.send(
                .put, "/v1/admin/policies/\(site)",
                json:
                    #"{"rules": {"beacon_validity": "enforce", "motion_gating": {"mode": "enforce", "canaryPercent": 10}}, "settings": {"minSteps2min": 40}}"#
            )
            #expect(first.status == .ok, "\(first.text)")
            let v1 = try first.decode(StoredPolicyVersion.self)
            #expect(v1.policy.version == 1)
            #expect(v1.policy.siteId == site)
            #expect(v1.policy.settings.minSteps2min == 40)
            #expect(v1.policy.rules[.motionGating] == RuleConfig(.enforce, canaryPercent: 10))
            #expect(v1.createdBy == "k_admin")

            let second = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"settings": {"minSteps2min": 25}}"#)
            #expect(try second.decode(StoredPolicyVersion.self).policy.version == 2)

            // Applied here at once, without a restart: the next decision names version 2.
            #expect(h.refresher.current.sites[site]?.version == 2)
            #expect(decide(heartbeat(site: site), book: h.refresher.current).policyVersion == 2)

            let active = try await client.send(.get, "/v1/admin/policies/\(site)", key: StaticKeys.viewer)
            #expect(try active.decode(SitePolicy.self).version == 2)
            let list = try await client.send(.get, "/v1/admin/policies/\(site)/versions", key: StaticKeys.viewer)
            #expect(try list.decode(PolicyVersionList.self).items.map(\.policy.version) == [2, 1])
            let book = try await client.send(.get, "/v1/admin/policies", key: StaticKeys.viewer)
            let all = try book.decode(ActivePolicies.self)
            #expect(all.sites.contains { $0.siteId == site && $0.version == 2 })
            #expect(all.hostedRules == PolicyEngine.standard.ruleIDs)
        }
    }

    @Test func aSettingEarlierVersionsHadIsAcceptedAndIgnoredAndAMisspelledOneNamed() async throws {
        try await PolicyAdminHarness.run { h, client in
            let site = siteName()
            let old = try await client.send(
                .put, "/v1/admin/policies/\(site)", json: #"{"settings": {"exemptSoftExitCheckouts": false, "minSteps2min": 35}}"#)
            #expect(old.status == .ok, "\(old.text)")
            #expect(try old.decode(StoredPolicyVersion.self).policy.settings.minSteps2min == 35)
            #expect(!old.text.contains("exemptSoftExitCheckouts"))
            let wrongType = try await client.send(
                .put, "/v1/admin/policies/\(site)", json: #"{"settings": {"exemptSoftExitCheckouts": {}}}"#)
            #expect(wrongType.status == .badRequest, "\(wrongType.text)")
            let typo = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"settings": {"minStepsTwoMin": 35}}"#)
            #expect(typo.status == .badRequest, "\(typo.text)")
            #expect(typo.text.contains("settings.minStepsTwoMin"))
        }
    }

    @Test func aStoredVersionSupersedesTheFilesVersion() async throws {
        let site = siteName()
        let base = PolicyBook(sites: [SitePolicy(siteId: site, version: 7)])
        try await PolicyAdminHarness.run(base: base) { h, client in
            let response = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"automaticAttendance": true}"#)
            #expect(try response.decode(StoredPolicyVersion.self).policy.version == 8)
            #expect(h.refresher.current.sites[site]?.version == 8)
        }
    }

    @Test func restoringAnOldVersionWritesItAgainAsANewOne() async throws {
        try await PolicyAdminHarness.run { h, client in
            let site = siteName()
            _ = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"settings": {"minSecondsBetweenPunches": 90}}"#)
            _ = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"settings": {"minSecondsBetweenPunches": 10}}"#)
            let restored = try await client.send(.post, "/v1/admin/policies/\(site)/versions/1/restore")
            #expect(restored.status == .ok, "\(restored.text)")
            let policy = try restored.decode(StoredPolicyVersion.self).policy
            #expect(policy.version == 3)
            #expect(policy.settings.minSecondsBetweenPunches == 90)
            #expect(h.refresher.current.sites[site]?.settings.minSecondsBetweenPunches == 90)
        }
    }

    @Test func siteKillSwitchRefusesWithManualCheckin() async throws {
        try await PolicyAdminHarness.run { h, client in
            let site = siteName()
            let off = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"automaticAttendance": false}"#)
            #expect(off.status == .ok)
            let decision = decide(heartbeat(site: site), book: h.refresher.current)
            #expect(decision.outcome == .reject)
            #expect(decision.action == .manualCheckin)
            #expect(decision.policyVersion == 1)
            #expect(decision.ruleResults.map(\.ruleId) == [.killSwitch])
            // Other sites are untouched.
            #expect(decide(heartbeat(site: siteName()), book: h.refresher.current).outcome == .accept)
        }
    }

    @Test func globalKillSwitchTurnsEverySiteOffAndBackOn() async throws {
        try await PolicyAdminHarness.run { h, client in
            let on = try await client.send(.put, "/v1/admin/kill-switch", json: #"{"enabled": true}"#)
            #expect(on.status == .ok, "\(on.text)")
            #expect(try on.decode(GlobalKillSwitchBody.self).enabled)
            #expect(decide(heartbeat(site: siteName()), book: h.refresher.current).action == .manualCheckin)
            _ = try await client.send(.put, "/v1/admin/kill-switch", json: #"{"enabled": false}"#)
            #expect(decide(heartbeat(site: siteName()), book: h.refresher.current).outcome == .accept)
        }
    }

    /// During a rolling upgrade a newer instance stores a version this build cannot decode (a rule mode
    /// it does not know). Before, every refresh of this instance failed on it, the global kill switch
    /// included, and a restart of it exited: now only that site fails closed.
    @Test("a stored version this build cannot read closes its site only; the rest of the store and the kill switch still apply")
    func aVersionThisBuildCannotReadClosesItsSiteOnly() async throws {
        try await PolicyAdminHarness.run { h, client in
            let newer = siteName()
            let other = siteName()
            for site in [newer, other] {
                let stored = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"rules": {}}"#)
                #expect(stored.status == .ok, "\(stored.text)")
            }
            var policy = SitePolicy(siteId: newer, version: 2, automaticAttendance: true)
            policy.rules = [.rateLimit: .enforce]
            let document = try PostgresPolicyRepository.encode(policy).replacingOccurrences(of: "\"enforce\"", with: "\"shadow\"")
            try await h.client.query(
                "INSERT INTO site_policies (scope, version, document, created_by) VALUES (\(newer), 2, \(document)::jsonb, 'newer-build')",
                logger: PolicyAdminHarness.logger)
            let on = try await client.send(.put, "/v1/admin/kill-switch", json: #"{"enabled": true}"#)
            #expect(on.status == .ok, "\(on.text)")
            try await h.refresher.refresh()
            #expect(h.refresher.current.globalKillSwitch)
            #expect(h.refresher.current.sites[newer]?.version == 1)
            _ = try await client.send(.put, "/v1/admin/kill-switch", json: #"{"enabled": false}"#)
            try await h.refresher.refresh()
            #expect(decide(heartbeat(site: other), book: h.refresher.current).outcome == .accept)
            // An instance starting now (or restarted) starts, and runs that site with automatic attendance off.
            let fresh = PolicyBookRefresher(
                base: PolicyBook(), repository: h.repository, hostedRules: PolicyEngine.standard.ruleIDs, logger: PolicyAdminHarness.logger
            ) { _ in }
            try await fresh.refresh()
            #expect(fresh.current.sites[newer]?.version == 2)
            #expect(decide(heartbeat(site: newer), book: fresh.current).action == .manualCheckin)
            #expect(decide(heartbeat(site: other), book: fresh.current).outcome == .accept)
            // The admin read of that site's versions says why, as a 503, not a 500.
            let versions = try await client.send(.get, "/v1/admin/policies/\(newer)/versions")
            #expect(versions.status == .serviceUnavailable, "\(versions.text)")
            #expect(versions.text.contains("cannot be read by this instance"))
        }
    }

    @Test func aChangeReachesAnotherInstanceWithinSeconds() async throws {
        try await PolicyAdminHarness.run { h, client in
            // A second instance over the same store, refreshing on its own timer.
            let other = PolicyBookRefresher(
                base: PolicyBook(), repository: h.repository, hostedRules: PolicyEngine.standard.ruleIDs,
                interval: .milliseconds(200), logger: PolicyAdminHarness.logger
            ) { _ in }
            let site = siteName()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await other.run() }
                defer { group.cancelAll() }
                try await Task.sleep(for: .milliseconds(300))
                let start = ContinuousClock.now
                _ = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"automaticAttendance": false}"#)
                while other.current.sites[site] == nil, ContinuousClock.now - start < .seconds(15) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                let elapsed = ContinuousClock.now - start
                #expect(other.current.sites[site]?.version == 1, "not applied after \(elapsed)")
                // Within seconds: the refresh interval plus scheduling on a loaded machine.
                #expect(elapsed < .seconds(15))
                #expect(decide(heartbeat(site: site), book: other.current).action == .manualCheckin)
            }
        }
    }

    @Test func concurrentSavesGetConsecutiveVersions() async throws {
        try await PolicyAdminHarness.run { h, _ in
            let site = siteName()
            let versions = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<5 {
                    group.addTask { try await h.repository.save(SitePolicyDraft(), siteId: site, atLeast: 0, by: "k_test").policy.version }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(versions.sorted() == [1, 2, 3, 4, 5])
        }
    }

    @Test func theDefaultPolicyIsAdministeredAsDefault() async throws {
        try await PolicyAdminHarness.run { h, client in
            let response = try await client.send(.put, "/v1/admin/policies/default", json: #"{"settings": {"maxClockSkewSeconds": 120}}"#)
            #expect(response.status == .ok, "\(response.text)")
            let stored = try response.decode(StoredPolicyVersion.self)
            #expect(stored.policy.siteId == nil)
            #expect(stored.policy.version == 1)
            #expect(h.refresher.current.defaultPolicy.settings.maxClockSkewSeconds == 120)
            #expect(decide(heartbeat(site: siteName()), book: h.refresher.current).policyVersion == 1)
        }
    }

    // MARK: Bad input: problem+json, never a crash

    @Test func badBodiesAreRefusedWithTheField() async throws {
        try await PolicyAdminHarness.run { h, client in
            let site = siteName()
            let cases: [(String, String)] = [
                ("not json", ""),
                (#"{"rules": {"teleport_check": "enforce"}}"#, "rules.teleport_check"),
                (#"{"rules": {"motion_gating": {"mode": "enforce", "canaryPercent": 150}}}"#, "rules.motion_gating.canaryPercent"),
                (#"{"rules": {"motion_gating": "sometimes"}}"#, "rules.motion_gating"),
                (#"{"rules": {"gatt_challenge": "enforce"}}"#, "rules.gatt_challenge"),
                (#"{"rules": {"kill_switch": "enforce"}}"#, "rules.kill_switch"),
                (#"{"settings": {"minStep2min": 10}}"#, "settings.minStep2min"),
                (#"{"settings": {"minSteps2min": "many"}}"#, "settings.minSteps2min"),
                (#"{"settings": {"minSteps2min": -3}}"#, "settings.minSteps2min"),
                (#"{"settings": {"minAppVersion": "one"}}"#, "settings.minAppVersion"),
                (#"{"automaticAttendance": "yes"}"#, "automaticAttendance"),
                (#"{"killswitch": true}"#, "killswitch"),
                // Control characters are refused at the edge (a NUL used to reach PostgreSQL: 500).
                (#"{"settings": {"allowedModelPrefixes": ["iPhone\u0000"]}}"#, "settings.allowedModelPrefixes[0]"),
                (#"{"settings": {"deniedModelPrefixes": ["a\tb"]}}"#, "settings.deniedModelPrefixes[0]"),
            ]
            for (body, field) in cases {
                let response = try await client.send(.put, "/v1/admin/policies/\(site)", json: body)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
                let problem = try response.problem()
                #expect(problem.type == ProblemType.validation.uri)
                #expect(problem.errors?.contains { $0.field == field } == true, "\(body): \(problem.errors ?? [])")
            }
            // Nothing was stored.
            #expect(try await h.repository.versions(siteId: site, limit: 10).isEmpty)
        }
    }

    @Test func authAndAddressingErrors() async throws {
        try await PolicyAdminHarness.run { _, client in
            let site = siteName()
            #expect(try await client.send(.get, "/v1/admin/policies", key: nil).status == .unauthorized)
            #expect(try await client.send(.get, "/v1/admin/policies", key: "brk_nobody.x").status == .unauthorized)
            let forbidden = try await client.send(.put, "/v1/admin/policies/\(site)", key: StaticKeys.viewer, json: "{}")
            #expect(forbidden.status == .forbidden)
            #expect(try forbidden.problem().status == 403)
            #expect(
                try await client.send(.put, "/v1/admin/kill-switch", key: StaticKeys.viewer, json: #"{"enabled": true}"#).status
                    == .forbidden)
            let missing = try await client.send(.post, "/v1/admin/policies/\(site)/versions/4/restore")
            #expect(missing.status == .notFound)
            #expect(try missing.problem().status == 404)
            #expect(try await client.send(.post, "/v1/admin/policies/\(site)/versions/abc/restore").status == .badRequest)
            #expect(
                try await client.send(.get, "/v1/admin/policies/\(site)/versions?limit=0", key: StaticKeys.viewer).status == .badRequest)
            #expect(try await client.send(.get, "/v1/admin/policies/bad%20site", key: StaticKeys.viewer).status == .badRequest)
            // An ill-formed site id is a 400, decoded or not (it used to answer 200 with the default policy).
            for path in ["..%2F..%2Fetc%2Fpasswd", "..", "a%2Fb", "a%00b", "-site"] {
                let response = try await client.send(.get, "/v1/admin/policies/\(path)", key: StaticKeys.viewer)
                #expect(response.status == .badRequest, "\(path): \(response.text)")
            }
            #expect(try await client.send(.put, "/v1/admin/kill-switch", json: #"{"on": 1}"#).status == .badRequest)
            let huge = "{\"settings\": {\"deniedModelPrefixes\": [\"" + String(repeating: "x", count: 70_000) + "\"]}}"
            #expect(try await client.send(.put, "/v1/admin/policies/\(site)", json: huge).status == .contentTooLarge)
        }
    }

    @Test func gattRuleCanBeSwitchedOnWhereItIsHosted() async throws {
        let rule = GattChallengeRule(
            nonces: GattNonceCodec(key: Array(repeating: 1, count: 32)),
            keyring: DerivedBeaconKeyring(master: Array(repeating: 2, count: 32)))
        let hosted = PolicyEngine.withGatt(rule).ruleIDs
        try await PolicyAdminHarness.run(hostedRules: hosted) { h, client in
            let site = siteName()
            let response = try await client.send(
                .put, "/v1/admin/policies/\(site)", json: #"{"rules": {"gatt_challenge": {"mode": "monitor", "canaryPercent": 25}}}"#)
            #expect(response.status == .ok, "\(response.text)")
            #expect(h.refresher.current.sites[site]?.rules[.gattChallenge] == RuleConfig(.monitor, canaryPercent: 25))
        }
    }

    /// A service that hosts `gatt_challenge` (its admin REST stores such policies), and `other`, a second
    /// instance over the same store started without the GATT keys.
    func withAnInstanceWithoutTheGattKeys(
        _ body: @escaping @Sendable (PolicyAdminHarness, any TestClientProtocol, PolicyBookRefresher) async throws -> Void
    ) async throws {
        let rule = GattChallengeRule(
            nonces: GattNonceCodec(key: Array(repeating: 1, count: 32)),
            keyring: DerivedBeaconKeyring(master: Array(repeating: 2, count: 32)))
        try await PolicyAdminHarness.run(hostedRules: PolicyEngine.withGatt(rule).ruleIDs) { h, client in
            let other = PolicyBookRefresher(
                base: PolicyBook(), repository: h.repository, hostedRules: PolicyEngine.standard.ruleIDs,
                logger: PolicyAdminHarness.logger
            ) { _ in }
            try await body(h, client, other)
        }
    }

    @Test("a stored version this instance cannot run leaves the site on the version it runs, not on the file's policy")
    func aPolicyThisInstanceCannotRunKeepsTheSitesCurrentOne() async throws {
        try await withAnInstanceWithoutTheGattKeys { _, client, other in
            let site = siteName()
            let off = try await client.send(.put, "/v1/admin/policies/\(site)", json: #"{"automaticAttendance": false}"#)
            #expect(off.status == .ok, "\(off.text)")
            try await other.refresh()
            #expect(other.current.sites[site]?.version == 1)
            let gatt = try await client.send(
                .put, "/v1/admin/policies/\(site)",
                json: #"{"rules": {"gatt_challenge": {"mode": "monitor"}}}"#)
            #expect(gatt.status == .ok, "\(gatt.text)")
            try await other.refresh()
            #expect(other.current.sites[site]?.version == 1)
            #expect(decide(heartbeat(site: site), book: other.current).action == .manualCheckin)
        }
    }

    @Test("an instance that starts beside a stored policy it cannot run closes that site instead of running a weaker policy")
    func aFreshInstanceClosesASiteWhosePolicyItCannotRun() async throws {
        try await withAnInstanceWithoutTheGattKeys { _, client, fresh in
            let enforced = siteName()
            let switchedOff = siteName()
            let gatt = try await client.send(
                .put, "/v1/admin/policies/\(enforced)", json: #"{"rules": {"gatt_challenge": {"mode": "enforce"}}}"#)
            #expect(gatt.status == .ok, "\(gatt.text)")
            let off = try await client.send(
                .put, "/v1/admin/policies/\(switchedOff)",
                json: #"{"automaticAttendance": false, "rules": {"gatt_challenge": {"mode": "enforce"}}}"#)
            #expect(off.status == .ok, "\(off.text)")
            // The instance without the GATT keys starts now: neither site may fall back to the default
            // policy, which would accept their events with no proof.
            try await fresh.refresh()
            for site in [enforced, switchedOff] {
                let policy = try #require(fresh.current.sites[site])
                #expect(policy.version == 1)
                #expect(!policy.automaticAttendance)
                #expect(decide(heartbeat(site: site), book: fresh.current).action == .manualCheckin)
            }
            // Once the site's policy is one this instance can run, the site runs it.
            let monitorOff = try await client.send(.put, "/v1/admin/policies/\(enforced)", json: #"{"rules": {}}"#)
            #expect(monitorOff.status == .ok, "\(monitorOff.text)")
            try await fresh.refresh()
            #expect(fresh.current.sites[enforced]?.version == 2)
            #expect(decide(heartbeat(site: enforced), book: fresh.current).outcome == .accept)
        }
    }
}
