import AttendanceProtocol
import Foundation
import PolicyServiceCore
import Testing

import struct PresenceKit.SplitMix64

/// The acceptance figures: every attack refused, every honest punch accepted.
@Suite("Adversarial and honest fleets")
struct AdversarialTests {
    /// One attack: the events accepted before it (same history), then the attack itself.
    struct Attack: CustomTestStringConvertible, Sendable {
        var name: String
        var before: [RawEventEnvelope] = []
        var attack: RawEventEnvelope
        var testDescription: String { name }
    }

    /// The first-rules set: refused under the default policy, with no site configuration.
    static let firstRulesAttacks: [Attack] = [
        Attack(name: "unknown beacon", attack: event { $0.minor = 999 }),
        Attack(name: "stranger's UUID", attack: event { $0.uuid = World.strangerUUID }),
        Attack(name: "retired beacon", attack: event { $0.minor = 5 }),
        Attack(name: "lost beacon", attack: event { $0.minor = 6 }),
        Attack(name: "banned UUID", attack: event { $0.uuid = World.bannedUUID }),
        Attack(
            name: "wrong site",
            attack: event {
                $0.major = 20; $0.minor = 1
            }),
        Attack(
            name: "unbound device",
            attack: event {
                $0.device = "d_unknown"; $0.payloadDevice = "d_unknown"
            }),
        Attack(name: "revoked device", attack: event { $0.device = World.revokedDevice }),
        Attack(name: "another user's device", attack: event { $0.device = World.otherUsersDevice }),
        Attack(name: "punching for a colleague", attack: event { $0.payloadUser = World.otherUser }),
        Attack(name: "punch 5 s after the previous one", before: [punch("k_prev")], attack: event { $0.time = World.t0 + 5 }),
        Attack(
            name: "check-in repeated 20 s later", before: [punch("k_prev")],
            attack: event { $0.time = World.t0 + 20 }),
        Attack(name: "impossible RSSI", attack: event { $0.rssi = [-60, 3, -61, -59] }),
    ]

    /// The full set, refused with every rule enforced and a minimum app version.
    static let fullSetAttacks: [Attack] =
        firstRulesAttacks + [
            Attack(name: "no motion", attack: event { $0.motion = .init(state: .stationary, steps2min: 0) }),
            Attack(name: "outside the geofence (device flag)", attack: event { $0.geofence = .init(inside: false) }),
            Attack(name: "position 5 km away", attack: event { $0.location = .init(lat: 10.8219, lon: 106.7009, accuracyM: 10) }),
            Attack(name: "beacon never heard", attack: event { $0.rssi = [0, 0, 0, 0] }),
            Attack(
                name: "old app",
                attack: event {
                    $0.appVersion = "1.9.0"; $0.bodyAppVersion = "1.9.0"
                }),
            Attack(name: "jailbroken", attack: event { $0.attestation = .init(jailbroken: true) }),
            Attack(name: "simulated location", attack: event { $0.attestation = .init(simulatedLocation: true) }),
            Attack(name: "Android mock provider", attack: event { $0.attestation = .init(mockProvider: true) }),
            Attack(
                name: "teleport HQ to branch in 10 min", before: [punch("k_prev")],
                attack: event {
                    $0.site = World.branch; $0.major = 20; $0.minor = 1; $0.time = World.t0 + 600
                }),
            Attack(
                name: "second phone of the same user", before: [punch("k_prev")],
                attack: event {
                    $0.device = World.secondDevice; $0.time = World.t0 + 300
                }),
            // Ping-pong between doors folds into one presence (accepted); punching again at the door
            // just used is a repeat and stays refused.
            Attack(
                name: "repeat at the same door after a door change",
                before: [
                    punch("k_prev"),
                    punch("k_side", at: 15) { $0.minor = 4 },
                ],
                attack: event {
                    $0.minor = 4; $0.time = World.t0 + 20
                }),
            Attack(name: "clock an hour ahead", attack: event { $0.receivedAt = World.t0 - 3_600 }),
            Attack(name: "a day late without an offline record", attack: event { $0.receivedAt = World.t0 + 86_400 }),
            Attack(
                name: "no sensor data at all",
                attack: event {
                    $0.rssi = nil; $0.motion = nil; $0.geofence = nil; $0.location = nil
                }),
            Attack(name: "beaconless contract check-in", attack: contractCheckIn()),
        ]

    static let strictPolicy = enforceAll(version: 5) {
        $0.minAppVersion = "1.12.0"
        $0.minSecondsBetweenGates = 45
        $0.requireSensorData = true
    }

    func refuses(_ attack: Attack, _ policy: SitePolicy) -> PolicyDecision {
        let history = PolicyHistory()
        for e in attack.before {
            let accepted = decideAndRecord(e, policy: policy, history: history)
            #expect(accepted.outcome == .accept, "setup event of \(attack.name) refused: \(accepted.reasons)")
        }
        return decideAndRecord(attack.attack, policy: policy, history: history)
    }

    @Test(arguments: AdversarialTests.firstRulesAttacks)
    func firstRulesAttackIsRefusedByTheDefaultPolicy(_ attack: Attack) {
        let decision = refuses(attack, .default)
        #expect(decision.outcome == .reject, "\(attack.name) accepted: \(decision.ruleResults)")
        #expect(decision.action != .noAction)
        #expect(decision.riskScore > 0)
    }

    @Test(arguments: AdversarialTests.fullSetAttacks)
    func attackIsRefusedWhenEveryRuleIsEnforced(_ attack: Attack) {
        let decision = refuses(attack, Self.strictPolicy)
        #expect(decision.outcome == .reject, "\(attack.name) accepted: \(decision.ruleResults)")
        #expect(decision.policyVersion == 5)
    }

    @Test func refusalRatesAreOneHundredPercent() {
        let first = Self.firstRulesAttacks.filter { refuses($0, .default).outcome == .reject }.count
        let full = Self.fullSetAttacks.filter { refuses($0, Self.strictPolicy).outcome == .reject }.count
        #expect(first == Self.firstRulesAttacks.count)
        #expect(full == Self.fullSetAttacks.count)
    }

    /// The GATT challenge set, refused with every rule enforced including `gatt_challenge`; each is
    /// refused by that rule itself (the events are otherwise honest). `before` events are decided
    /// first, whatever their verdict.
    static let gattAttacks: [Attack] = {
        let spent = provedEvent {
            $0.key = "k_spent"; $0.appVersion = "1.0.0"; $0.bodyAppVersion = "1.0.0"
        }
        let spentProof: AttendanceEvent.Gatt? = {
            if case .event(let body) = spent.payload { return body.gatt }
            return nil
        }()
        return [
            Attack(name: "replayed beacon identity without the handshake", attack: event()),
            Attack(
                name: "replayed identity with a made-up HMAC",
                attack: provedEvent(tamper: { $0.gatt!.hmac = String(repeating: "0", count: 64) })),
            Attack(
                name: "nonce expired before the event",
                attack: {
                    var spec = EventSpec()
                    spec.gatt = Gatt.proof(for: spec, issuedBefore: 120)
                    return spec.envelope()
                }()),
            Attack(
                name: "an old proof backdating a check-in",
                attack: provedEvent(
                    tamper: {
                        $0.time = World.t0 - 86_400; $0.queuedOffline = true; $0.receivedAt = World.t0 + 86_400
                    })),
            Attack(
                name: "reused nonce", before: [spent],
                attack: punch("k_reuse", at: 10) { $0.gatt = spentProof }),
            Attack(
                name: "nonce issued to another device",
                attack: provedEvent({ $0.device = World.secondDevice }, tamper: { $0.device = World.device })),
            Attack(
                name: "forged nonce",
                attack: event {
                    $0.gatt = .init(
                        nonce: "4102444800.00000000000000000000000000000000.00000000000000000000000000000000",
                        hmac: String(repeating: "0", count: 64))
                }),
        ]
    }()

    @Test(arguments: AdversarialTests.gattAttacks)
    func gattAttackIsRefusedByTheChallenge(_ attack: Attack) {
        let history = PolicyHistory()
        for e in attack.before { _ = Gatt.decide(e, policy: Gatt.strict(), history: history) }
        let decision = Gatt.decide(attack.attack, policy: Gatt.strict(), history: history)
        #expect(decision.outcome == .reject, "\(attack.name) accepted: \(decision.ruleResults)")
        #expect(decision.result(.gattChallenge)?.fired == true, "\(attack.name): \(decision.reasons)")
    }

    /// The adversarial list in one figure: every attack of every set refused under the strict
    /// policy with GATT (replayed identity, no motion, wrong device, teleport, expired and reused
    /// nonce, old app, and the rest).
    @Test func everyAttackIsRefusedWithGattOn() {
        var refused = 0
        var accepted: [String] = []
        for attack in Self.fullSetAttacks + Self.gattAttacks {
            let history = PolicyHistory()
            // Honest setup events carry a proof; the spent-nonce setup is refused on purpose.
            for e in attack.before { _ = Gatt.decide(Self.withProof(e), policy: Gatt.strict(), history: history) }
            let isGatt = Self.gattAttacks.contains { $0.name == attack.name }
            let decision = Gatt.decide(isGatt ? attack.attack : Self.withProof(attack.attack), policy: Gatt.strict(), history: history)
            if decision.outcome == .reject { refused += 1 } else { accepted.append(attack.name) }
        }
        #expect(accepted.isEmpty, "accepted: \(accepted)")
        #expect(refused == Self.fullSetAttacks.count + Self.gattAttacks.count)
    }

    /// What honest phones send at the edges of the rules, each accepted under the strict policy with
    /// GATT on (every rule enforced): a refused punch is final on the phone, so each of these would be
    /// attendance lost.
    static let honestEdges: [Attack] = [
        // A phone at rest on a desk ranging in whole dBm: recorded as a risk, not refused.
        Attack(name: "flat series from a phone at rest", attack: event { $0.rssi = [-67, -67, -67, -68, -67] }),
        // The geofence flaps at its edge: out at 5 min, back 5 s later, out again 7 s after that.
        Attack(
            name: "check-in 5 s after a check-out at the same gate",
            before: [punch("k_in"), punch("k_out", at: 300) { $0.type = .checkout }],
            attack: event { $0.time = World.t0 + 305 }),
        Attack(
            name: "check-out 7 s after a re-entry at the same gate",
            before: [punch("k_in"), punch("k_out", at: 300) { $0.type = .checkout }, punch("k_back", at: 305)],
            attack: event {
                $0.type = .checkout; $0.time = World.t0 + 312
            }),
        // A walk-past that checked in, then left the geofence.
        Attack(
            name: "check-out 20 s after a check-in", before: [punch("k_in")],
            attack: event {
                $0.type = .checkout; $0.time = World.t0 + 20
            }),
        // The gate's beacon was replaced during the shift; the phone still names the old one.
        Attack(
            name: "check-out naming a beacon retired since the check-in", before: [punch("k_in")],
            attack: event {
                $0.type = .checkout; $0.minor = 5; $0.time = World.t0 + 3_600
            }),
        // A coarse fix whose centre is outside the geofence but whose circle reaches into it.
        Attack(
            name: "position 400 m out with 300 m accuracy",
            attack: event { $0.location = .init(lat: 10.7805, lon: 106.7009, accuracyM: 300) }),
        // Proved at the gate, then queued offline for two hours.
        Attack(
            name: "check-in queued offline with its proof",
            attack: event {
                $0.queuedOffline = true; $0.receivedAt = World.t0 + 7_200
            }),
    ]

    @Test(arguments: AdversarialTests.honestEdges)
    func honestEdgeIsAcceptedWithEveryRuleEnforced(_ edge: Attack) {
        let history = PolicyHistory()
        for e in edge.before {
            let setup = Gatt.decide(Self.withProof(e), policy: Gatt.strict(), history: history)
            #expect(setup.outcome == .accept, "setup event of \(edge.name) refused: \(setup.reasons)")
        }
        let decision = Gatt.decide(Self.withProof(edge.attack), policy: Gatt.strict(), history: history)
        #expect(decision.outcome == .accept, "\(edge.name) refused: \(decision.reasons)")
    }

    /// The event with a valid proof for its own beacon and device (when it names a beacon and has none yet).
    static func withProof(_ e: RawEventEnvelope) -> RawEventEnvelope {
        guard case .event(var body) = e.payload, body.gatt == nil, let key = RegistryBeaconKey(body.beacon) else { return e }
        let (nonce, _) = Gatt.codec.issue(beacon: key, deviceId: e.deviceId, now: body.timestamp - 5)
        body.gatt = .init(nonce: nonce, hmac: Gatt.keyring.proof(nonce: nonce, beacon: key))
        var copy = e
        copy.payload = .event(body)
        return copy
    }

    /// 40 users over a working day at two sites: check-in at a gate, a heartbeat, lunch out and
    /// back through the other door, check-out; natural RSSI noise, walking or counting steps; some
    /// events sent late from the outbox; and every event redelivered once (at-least-once).
    @Test(arguments: ["default", "strict", "strict+gatt"])
    func honestFleetIsAcceptedEntirely(policyName: String) {
        let withGatt = policyName == "strict+gatt"
        let policy = withGatt ? Gatt.strict() : policyName == "strict" ? Self.strictPolicy : SitePolicy.default
        let engine = withGatt ? Gatt.engine : PolicyEngine.standard
        var registry = World.registry
        var rng = SplitMix64(seed: 42)
        var events: [RawEventEnvelope] = []
        for u in 0..<40 {
            let user = "u_f\(u)", device = "d_f\(u)"
            registry.upsertDevice(DeviceBinding(deviceId: device, userId: user, status: .enrolled))
            registry.upsertUser(id: user, siteIds: [World.hq, World.branch])
            let atBranch = u % 4 == 0
            let (site, major, gates) = atBranch ? (World.branch, 20, [1, 1]) : (World.hq, 10, [3, 4])
            let fence = atBranch ? World.branchFence : World.hqFence
            let day = World.t0 + Double(u) * 7 // staggered arrivals
            let plan: [(AttendanceEventType, TimeInterval, Int)] = [
                (.checkin, 0, gates[0]), (.checkout, 4 * 3_600, gates[1]), (.checkin, 5 * 3_600, gates[1]),
                (.checkout, 9 * 3_600, gates[0]),
            ]
            for (i, (type, offset, minor)) in plan.enumerated() {
                let late = i == 1 && u % 5 == 0 // lunch check-out sent an hour later from the outbox
                let time = day + offset + Double(rng.next(upTo: 30))
                events.append(
                    event {
                        $0.key = "k_\(user)_\(i)"; $0.user = user; $0.device = device; $0.type = type; $0.time = time
                        $0.site = site; $0.major = major; $0.minor = minor
                        $0.rssi = (0..<Int(rng.next(upTo: 5)) + 5).map { _ in -80 + Int(rng.next(upTo: 21)) }
                        $0.motion =
                            rng.next(upTo: 3) == 0
                            ? .init(state: .stationary, steps2min: 30 + Int(rng.next(upTo: 40))) : .init(state: .walking, steps2min: 50)
                        $0.location = .init(
                            lat: fence.latitude + (Double(rng.next(upTo: 21)) - 10) / 100_000, lon: fence.longitude, accuracyM: 20)
                        if late { $0.receivedAt = time + 3_600; $0.queuedOffline = true }
                        if withGatt, type == .checkin { $0.gatt = Gatt.proof(for: $0) }
                    })
                if i == 0 { events.append(heartbeat(user: user, device: device, site: site, key: "k_\(user)_hb", at: time + 1_800)) }
            }
        }
        let history = PolicyHistory()
        var refused: [String] = []
        for e in events + events {
            let context = PolicyContext(registry: registry, history: history, now: e.receivedAt)
            let decision = engine.decide(e, context: context, policy: policy)
            history.record(decision, for: e, registry: registry)
            if decision.outcome == .reject { refused.append("\(e.idempotencyKey): \(decision.reasons)") }
        }
        #expect(events.count == 40 * 5)
        #expect(refused.isEmpty, "\(refused.count) honest events refused: \(refused.prefix(5))")
    }
}

func heartbeat(user: String, device: String, site: String, key: String, at time: Date) -> RawEventEnvelope {
    RawEventEnvelope(
        requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: site,
        appVersion: "1.12.0", gatewayInstance: "gateway-0", receivedAt: time, payloadFingerprint: String(repeating: "0", count: 64),
        payload: .heartbeat(HeartbeatRequest(sessionKey: "s_\(user)", ts: time))
    )
}

extension SplitMix64 {
    mutating func next(upTo bound: UInt64) -> UInt64 { next() % bound }
}
