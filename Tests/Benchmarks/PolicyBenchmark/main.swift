// PolicyBenchmark: policy decisions per second for one instance on one core (target: at
// least 20,000/s with every rule on, GATT challenge included).
//
// Run in release, pinned to one core: `make bench-policy` (`taskset -c 0`). Single-threaded. The
// loop is what `PolicyPipeline.decide` does per record minus the Kafka codec: pick the site's
// policy, build the context, decide, record the accepted punch (and the spent nonce) in the
// history. Baseline, measured in the same run on the same events: the same loop with every rule
// off, i.e. the engine's and the history's fixed cost. Output: one `key=value` per line.
// Not in the loop: the durable spent-nonce claim (`GattNonceLedger`), one PostgreSQL statement per
// polled batch rather than per decision (PolicyAdminTests/SpentNonceTests prints its cost).

import AttendanceProtocol
import Dispatch
import Foundation
import PolicyServiceCore

/// A monotonic clock reading in nanoseconds.
func monotonicNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func out(_ key: String, _ value: Any) { print("\(key)=\(value)") }

func fmt(_ v: Double, _ digits: Int = 1) -> String {
    var p = 1.0
    for _ in 0..<digits { p *= 10 }
    return String((v * p).rounded() / p)
}

// MARK: World: one site, two gates, 2,000 users with one bound phone each

let companyUUID = UUID(uuidString: "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34")!
let site = "S_HQ"
let fence = Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200)
let users = 2_000
let punchesPerUser = 10
let t0 = Date(timeIntervalSince1970: 1_758_177_312)

var registry = RegistrySnapshot()
registry.upsertSite(id: site, geofence: fence)
registry.upsertGate(id: "G_MAIN", siteId: site)
registry.upsertGate(id: "G_SIDE", siteId: site)
registry.upsertBeacon(id: "B_3", uuid: companyUUID, major: 10, minor: 3, status: .active, gateId: "G_MAIN")
registry.upsertBeacon(id: "B_4", uuid: companyUUID, major: 10, minor: 4, status: .active, gateId: "G_SIDE")
for u in 0..<users {
    registry.upsertDevice(DeviceBinding(deviceId: "d_\(u)", userId: "u_\(u)", status: .enrolled))
    registry.upsertUser(id: "u_\(u)", siteIds: ["S_HQ"])
}
let world = registry

let codec = GattNonceCodec(key: Array("benchmark-nonce-key-of-32-bytes!".utf8), lifetime: 60)
// The production key path: each beacon's random key sealed as the registry publishes it, looked
// up per check and opened once (`SealedBeaconKeyring`, as `RegistryFeedBeaconKeyring` does over
// the feed cache).
let sealer = BeaconKeySealer(sealingKey: Array("benchmark-registry-seal-key-32-b".utf8))!
let beaconKeys: [RegistryBeaconKey: (id: String, raw: [UInt8], sealed: SealedBeaconKey)] = {
    var table: [RegistryBeaconKey: (id: String, raw: [UInt8], sealed: SealedBeaconKey)] = [:]
    for (id, minor) in [("B_3", 3), ("B_4", 4)] {
        let raw = BeaconKeySealer.generateBeaconKey()
        table[RegistryBeaconKey(uuid: companyUUID, major: 10, minor: minor)!] = (id, raw, try! sealer.seal(raw, beaconId: id, version: 1))
    }
    return table
}()
let keyring = SealedBeaconKeyring(sealer: sealer) { identity in
    beaconKeys[identity].map { ($0.id, $0.sealed, nil) }
}
let engine = PolicyEngine.withGatt(GattChallengeRule(nonces: codec, keyring: keyring))

var settings = PolicySettings()
settings.minAppVersion = "1.10.0"
settings.minSecondsBetweenGates = 30
settings.requireSensorData = true
let allOn = SitePolicy.all(.enforce, version: 1, siteId: site, settings: settings, hostedRules: engine.ruleIDs)
let allOff = SitePolicy(siteId: site, version: 1, rules: [:], settings: settings)
let book = PolicyBook(sites: [allOn])
let offBook = PolicyBook(sites: [allOff])

// Built up front: the loop measures decisions, not fixture construction. Check-ins and check-outs
// alternate between the two gates every 10 minutes; every fifth punch comes 5 s after the previous
// one and is refused by the rate limit, so the history sees both verdicts.
var events: [RawEventEnvelope] = []
events.reserveCapacity(users * punchesPerUser)
for p in 0..<punchesPerUser {
    for u in 0..<users {
        let minor = [3, 3, 4, 4, 4][p % 5]
        let time = t0 + Double(p) * 600 - (p % 5 == 4 ? 595 : 0)
        let beacon = BeaconIdentity(uuid: companyUUID.uuidString, major: 10, minor: minor)
        let key = RegistryBeaconKey(uuid: companyUUID, major: 10, minor: minor)!
        let (nonce, _) = codec.issue(beacon: key, deviceId: "d_\(u)", now: time - 4)
        let idempotencyKey = "k_\(u)_\(p)"
        let body = AttendanceEvent(
            id: "e_\(u)_\(p)", idempotencyKey: idempotencyKey, userId: "u_\(u)", deviceId: "d_\(u)", timestamp: time,
            type: p % 2 == 0 ? .checkin : .checkout, siteId: site, beacon: beacon,
            rssiSeries: [-70 - u % 7, -66, -71, -68 - p % 3, -73], txPower: -59,
            motion: .init(state: .walking, steps2min: 42), geofence: .init(inside: true, radius: 200),
            handshake: .init(ok: true, rt: 180), network: .init(online: true, latencyMs: 120),
            app: .init(version: "1.12.0", build: 345), device: .init(model: "iPhone14,5", os: "iOS 18.0"),
            location: .init(lat: 10.7772, lon: 106.7012, accuracyM: 15),
            attestation: .init(jailbroken: false, simulatedLocation: false),
            gatt: .init(nonce: nonce, hmac: GattProof.hmac(nonce: nonce, rawKey: beaconKeys[key]!.raw))
        )
        events.append(
            RawEventEnvelope(
                requestId: "r_\(u)_\(p)", idempotencyKey: idempotencyKey, userId: "u_\(u)", deviceId: "d_\(u)", siteId: site,
                appVersion: "1.12.0", gatewayInstance: "gateway-0", receivedAt: time + 0.4,
                payloadFingerprint: String(repeating: "0", count: 64), payload: .event(body)
            ))
    }
}

struct Run {
    var decisions: Int
    var seconds: Double
    var accepted: Int
    var perSecond: Double { Double(decisions) / seconds }
}

/// One pass over every event with a fresh history, as the pipeline decides them.
@MainActor func run(_ book: PolicyBook) -> Run {
    let history = PolicyHistory()
    var accepted = 0
    let start = monotonicNanos()
    for e in events {
        let policy = book.policy(for: e, history: history)
        let context = PolicyContext(registry: world, history: history, now: e.receivedAt, settings: policy.settings)
        let decision = engine.decide(e, context: context, policy: policy)
        if history.record(decision, for: e, registry: world) != nil { accepted += 1 }
    }
    return Run(decisions: events.count, seconds: Double(monotonicNanos() - start) / 1e9, accepted: accepted)
}

/// The median of `rounds` passes (after one warm-up pass).
@MainActor func measure(_ book: PolicyBook, rounds: Int = 5) -> Run {
    _ = run(book)
    let runs = (0..<rounds).map { _ in run(book) }.sorted { $0.seconds < $1.seconds }
    return runs[rounds / 2]
}

print("# policy decisions on one core: \(events.count) events (\(users) users x \(punchesPerUser) punches), median of 5 passes")
let baseline = measure(offBook)
let full = measure(book)
out("rules_hosted", engine.ruleIDs.map(\.rawValue).joined(separator: ","))
out("baseline_all_rules_off_decisions_per_s", Int(baseline.perSecond))
out("all_rules_enforced_decisions_per_s", Int(full.perSecond))
out("all_rules_enforced_us_per_decision", fmt(full.seconds / Double(events.count) * 1e6, 2))
out("accepted_all_rules_enforced", "\(full.accepted)/\(events.count)")
out("ratio_all_rules_vs_baseline", fmt(full.perSecond / baseline.perSecond, 3))
out("target_decisions_per_s", 20_000)
out("meets_target", full.perSecond >= 20_000)
// Where the time goes: each rule alone, its cost over the baseline per decision.
for id in engine.ruleIDs {
    let alone = SitePolicy(siteId: site, version: 1, rules: [id: .enforce], settings: settings)
    let r = measure(PolicyBook(sites: [alone]), rounds: 3)
    out("rule_\(id.rawValue)_us_over_baseline", fmt((r.seconds - baseline.seconds) / Double(events.count) * 1e6, 2))
}
// Every fifth punch (5 s after the previous one at the same gate) is refused: 80 % accepted.
if full.accepted != events.count * 4 / 5 {
    print("unexpected: \(full.accepted) accepted with every rule on, expected \(events.count * 4 / 5)")
    exit(1)
}
