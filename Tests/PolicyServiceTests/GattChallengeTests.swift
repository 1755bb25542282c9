import AttendanceProtocol
import Foundation
import PolicyServiceCore
import Testing

/// The GATT challenge-response: fixed keys, nonces issued by the gateway's codec, beacons simulated
/// with the registry's derived keys.
enum Gatt {
    static let nonceKey = Array("gateway-and-policy-nonce-key-32b".utf8)
    static let master = Array("registry-beacon-master-secret-32".utf8)
    static let codec = GattNonceCodec(key: nonceKey, lifetime: 60)
    static let keyring = DerivedBeaconKeyring(master: master)
    static let rule = GattChallengeRule(nonces: codec, keyring: keyring)
    static let engine = PolicyEngine.withGatt(rule)
    static let main = RegistryBeaconKey(uuid: UUID(uuidString: World.companyUUID)!, major: 10, minor: 3)!

    /// Every hosted rule (GATT included) enforced.
    static func strict(version: Int = 9, _ configure: (inout PolicySettings) -> Void = { _ in }) -> SitePolicy {
        var settings = PolicySettings()
        settings.minAppVersion = "1.12.0"
        settings.minSecondsBetweenGates = 45
        settings.requireSensorData = true
        configure(&settings)
        return SitePolicy.all(.enforce, version: version, siteId: World.hq, settings: settings, hostedRules: engine.ruleIDs)
    }

    /// The proof an honest device gets: a nonce issued `issuedBefore` s before the event for its
    /// beacon and device, signed by that beacon.
    static func proof(for spec: EventSpec, issuedBefore: TimeInterval = 5) -> AttendanceEvent.Gatt {
        let beacon = RegistryBeaconKey(uuid: UUID(uuidString: spec.uuid)!, major: spec.major, minor: spec.minor)!
        let (nonce, _) = codec.issue(beacon: beacon, deviceId: spec.device, now: spec.time - issuedBefore)
        return AttendanceEvent.Gatt(nonce: nonce, hmac: keyring.proof(nonce: nonce, beacon: beacon))
    }

    static func decide(
        _ e: RawEventEnvelope, policy: SitePolicy, history: PolicyHistory, registry: RegistrySnapshot = World.registry
    ) -> PolicyDecision {
        let decision = engine.decide(e, context: PolicyContext(registry: registry, history: history, now: e.receivedAt), policy: policy)
        history.record(decision, for: e, registry: registry)
        return decision
    }
}

/// An honest event with a valid GATT proof; `configure` runs before the proof is made, `tamper` after.
func provedEvent(_ configure: (inout EventSpec) -> Void = { _ in }, tamper: (inout EventSpec) -> Void = { _ in }) -> RawEventEnvelope {
    var spec = EventSpec()
    configure(&spec)
    spec.gatt = Gatt.proof(for: spec)
    tamper(&spec)
    return spec.envelope()
}

@Suite("GATT challenge-response")
struct GattChallengeTests {
    let rule = Gatt.rule

    @Test func validProofPasses() {
        #expect(rule.run(provedEvent()) == .passed)
    }

    @Test func honestProvedCheckInIsAcceptedWithEveryRuleEnforced() {
        let decision = Gatt.decide(provedEvent(), policy: Gatt.strict(), history: PolicyHistory())
        #expect(decision.outcome == .accept, "\(decision.reasons)")
        #expect(decision.result(.gattChallenge)?.fired == false)
        #expect(decision.policyVersion == 9)
    }

    @Test func missingProofFiresWithWalkToGate() throws {
        let firing = try #require(rule.run(event()).firing)
        #expect(firing.action == .walkToGate)
        #expect(firing.reason.contains("no GATT challenge proof"))
    }

    @Test func checkOutsAndHeartbeatsPassWithoutProof() {
        #expect(rule.run(event { $0.type = .checkout }) == .passed)
        #expect(rule.run(heartbeat(at: World.t0)) == .passed)
    }

    @Test("a contract check-in carries no proof: refused where the challenge is enforced, whatever requireSensorData says")
    func aContractCheckInIsRefusedWhereTheChallengeIsEnforced() throws {
        let firing = try #require(rule.run(contractCheckIn()).firing)
        #expect(firing.action == .walkToGate)
        var settings = PolicySettings()
        settings.requireSensorData = false
        let policy = SitePolicy.all(.enforce, version: 9, siteId: World.hq, settings: settings, hostedRules: Gatt.engine.ruleIDs)
        #expect(Gatt.decide(contractCheckIn(), policy: policy, history: PolicyHistory()).outcome == .reject)
    }

    @Test func tamperedNonceIsForged() throws {
        // The proof `provedEvent` makes for a default spec, made here so a malformed nonce fails the test cleanly.
        var tampered = Gatt.proof(for: EventSpec())
        var parts = tampered.nonce.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let expiry = try #require(Int(parts[0]))
        parts[0] = String(expiry + 3_600) // stretch the expiry by an hour
        tampered.nonce = parts.joined(separator: ".")
        let proof = tampered
        let e = provedEvent(tamper: { spec in spec.gatt = proof })
        let firing = try #require(rule.run(e).firing)
        #expect(firing.action == .contactAdmin)
        #expect(firing.reason.contains("not issued"))
    }

    @Test func nonceOfAnotherDeviceOrBeaconIsRefused() {
        let borrowed = provedEvent({ $0.device = World.secondDevice }, tamper: { $0.device = World.device })
        #expect(rule.run(borrowed).firing?.reason.contains("not issued") == true)
        let otherBeacon = provedEvent({ $0.minor = 4 }, tamper: { $0.minor = 3 })
        #expect(rule.run(otherBeacon).firing?.reason.contains("not issued") == true)
    }

    @Test func expiredNonceIsRefused() throws {
        // Issued 120 s before the event, valid 60 s: the handshake's proof had expired when the event happened.
        var spec = EventSpec()
        spec.gatt = Gatt.proof(for: spec, issuedBefore: 120)
        let firing = try #require(rule.run(spec.envelope()).firing)
        #expect(firing.reason == "GATT nonce expired 60 s before the event")
        #expect(firing.action == .walkToGate)
        // A device clock an hour ahead stamps the event an hour after the nonce's expiry; the receipt
        // seconds after the handshake is when it is judged.
        let ahead = provedEvent(
            tamper: {
                $0.time = World.t0 + 3_600
                $0.receivedAt = World.t0 + 1
            })
        #expect(rule.run(ahead) == .passed)
    }

    @Test func anOldProofCannotBackdateACheckIn() throws {
        // Proved at the gate at t0 (valid 60 s); two days later sent as a check-in dated two days before.
        let backdated = provedEvent(
            tamper: {
                $0.time = World.t0 - 2 * 86_400
                $0.queuedOffline = true
                $0.receivedAt = World.t0 + 2 * 86_400
            })
        let firing = try #require(rule.run(backdated).firing)
        #expect(firing.reason == "the event is dated 47 h before its GATT nonce was issued")
        #expect(firing.action == .contactAdmin)
        // A device clock two minutes behind the gateway's is within the skew allowance (300 s).
        #expect(rule.run(provedEvent(tamper: { $0.time = World.t0 - 120 })) == .passed)
    }

    @Test func aCheckInQueuedOfflineKeepsItsProof() {
        // Proved 5 s before the event (valid 60 s), delivered two hours later.
        let queued = provedEvent {
            $0.queuedOffline = true
            $0.receivedAt = $0.time + 7_200
        }
        #expect(rule.run(queued) == .passed)
    }

    @Test func reusedNonceIsRefusedButARedeliveryIsNot() throws {
        let history = PolicyHistory()
        let first = provedEvent { $0.key = "k_first" }
        #expect(Gatt.decide(first, policy: Gatt.strict(), history: history).outcome == .accept)
        // At-least-once: the same event again is not a reuse (the rate limit ignores it too).
        #expect(Gatt.decide(first, policy: Gatt.strict(), history: history).result(.gattChallenge)?.fired == false)
        guard case .event(let body) = first.payload else { Issue.record("not a device event"); return }
        let reuse = punch("k_again", at: 20) { $0.gatt = body.gatt }
        let decision = Gatt.decide(reuse, policy: Gatt.strict(), history: history)
        #expect(decision.outcome == .reject)
        #expect(decision.result(.gattChallenge)?.reason?.contains("already used") == true)
    }

    @Test func aRefusedPunchStillSpendsItsNonce() {
        let history = PolicyHistory()
        let refused = provedEvent {
            $0.key = "k_old_app"; $0.appVersion = "1.0.0"; $0.bodyAppVersion = "1.0.0"
        }
        #expect(Gatt.decide(refused, policy: Gatt.strict(), history: history).outcome == .reject)
        guard case .event(let body) = refused.payload else { Issue.record("not a device event"); return }
        let retry = punch("k_retry") { $0.gatt = body.gatt }
        #expect(Gatt.decide(retry, policy: Gatt.strict(), history: history).result(.gattChallenge)?.fired == true)
    }

    @Test func wrongHMACIsAReplayedIdentity() throws {
        let e = provedEvent(tamper: { $0.gatt!.hmac = String(repeating: "ab", count: 32) })
        let firing = try #require(rule.run(e).firing)
        #expect(firing.action == .contactAdmin)
        #expect(firing.reason.contains("does not match"))
        // A proof signed by another beacon's key does not match either.
        let other = RegistryBeaconKey(uuid: UUID(uuidString: World.companyUUID)!, major: 10, minor: 4)!
        let wrongKey = provedEvent(tamper: { $0.gatt!.hmac = Gatt.keyring.proof(nonce: $0.gatt!.nonce, beacon: other) })
        #expect(rule.run(wrongKey).didFire)
    }

    @Test(arguments: [
        "", ".", "..", "1.2.3", "abc.0123456789abcdef0123456789abcdef.00", "99999999999999999999.x.y",
        "1.0123456789abcdef0123456789abcdef.zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "ünïcode.é.ß",
    ])
    func malformedNoncesAreForgedNeverACrash(nonce: String) {
        #expect(Gatt.codec.check(nonce, beacon: Gatt.main, deviceId: World.device, at: World.t0) == .forged)
        let e = event { $0.gatt = .init(nonce: nonce, hmac: "not hex") }
        #expect(rule.run(e).didFire)
    }

    @Test func issuedNonceChecksAndExpires() {
        let (nonce, expiresAt) = Gatt.codec.issue(beacon: Gatt.main, deviceId: World.device, now: World.t0)
        #expect(expiresAt == World.t0 + 60)
        #expect(Gatt.codec.check(nonce, beacon: Gatt.main, deviceId: World.device, at: World.t0 + 59) == .valid(expiresAt: expiresAt))
        #expect(Gatt.codec.check(nonce, beacon: Gatt.main, deviceId: World.device, at: World.t0 + 61) == .expired(expiresAt: expiresAt))
        let (again, _) = Gatt.codec.issue(beacon: Gatt.main, deviceId: World.device, now: World.t0)
        #expect(again != nonce)
    }

    @Test func gattRuleIsOnlyValidWhereHosted() {
        let policy = Gatt.strict()
        #expect(policy.validationIssues(hostedRules: Gatt.engine.ruleIDs).isEmpty)
        #expect(policy.validationIssues(hostedRules: PolicyEngine.standard.ruleIDs).contains { $0.field == "rules.gatt_challenge" })
    }

    @Test func monitorModeRecordsAMissingProofWithoutRejecting() {
        var policy = Gatt.strict()
        policy.rules[.gattChallenge] = .monitor
        let decision = Gatt.decide(event(), policy: policy, history: PolicyHistory())
        #expect(decision.outcome == .accept, "\(decision.reasons)")
        #expect(decision.result(.gattChallenge)?.fired == true)
        #expect(decision.result(.gattChallenge)?.mode == .monitor)
        #expect(decision.riskScore > 0)
    }
}

@Suite("UUID text")
struct UUIDTextTests {
    /// The fast parser agrees with Foundation on what is a UUID and what it is.
    @Test(arguments: [
        World.companyUUID, World.companyUUID.lowercased(), "00000000-0000-0000-0000-000000000000", "ffffffff-FFFF-ffff-FFFF-ffffffffffff",
        "", "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A3", "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A345", "8D4F2A613C7B4E19A5D06B2E9F1C7A34",
        "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A3G", "8D4F2A61:3C7B-4E19-A5D0-6B2E9F1C7A34", "{8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34}",
        "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7Ä4",
    ])
    func agreesWithFoundation(text: String) {
        #expect(UUIDText.parse(text) == UUID(uuidString: text), "\(text)")
    }

    /// Linux Foundation's `sscanf` reads a space-padded byte (" 3" as 0x03); such text is not a
    /// canonical UUID and is refused.
    @Test func spacesAreNotHexDigits() {
        #expect(UUIDText.parse(" 8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A3") == nil)
        #expect(UUIDText.parse("8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A 3") == nil)
    }
}
