import AttendanceProtocol
import Foundation
import PolicyServiceCore

/// A small world: two sites 1,100 km apart, their gates and beacons, a few devices.
enum World {
    static let companyUUID = "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34"
    static let bannedUUID = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" // Apple AirLocate sample
    static let strangerUUID = "2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6"

    static let hq = "S_HQ"
    static let branch = "S_BR"
    /// A site of another organization.
    static let otherOrgSite = "S_OTHER_ORG"
    /// Ho Chi Minh City and Hanoi.
    static let hqFence = Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200)
    static let branchFence = Geofence(latitude: 21.0285, longitude: 105.8542, radiusMeters: 200)

    static let user = "u_1024"
    static let otherUser = "u_2048"
    static let device = "d_7f3a"
    static let secondDevice = "d_9b2c"
    static let revokedDevice = "d_dead"
    static let otherUsersDevice = "d_4e1d"

    /// Beacons at HQ: minor 3 (gate G_MAIN), 4 (G_SIDE), 5 retired, 6 lost; at the branch: major 20 minor 1.
    static let registry: RegistrySnapshot = {
        var r = RegistrySnapshot()
        let uuid = UUID(uuidString: companyUUID)!
        r.upsertSite(id: hq, geofence: hqFence)
        r.upsertSite(id: branch, geofence: branchFence)
        r.upsertGate(id: "G_MAIN", siteId: hq)
        r.upsertGate(id: "G_SIDE", siteId: hq)
        r.upsertGate(id: "G_BR", siteId: branch)
        r.upsertBeacon(id: "B_3", uuid: uuid, major: 10, minor: 3, status: .active, gateId: "G_MAIN")
        r.upsertBeacon(id: "B_4", uuid: uuid, major: 10, minor: 4, status: .active, gateId: "G_SIDE")
        r.upsertBeacon(id: "B_5", uuid: uuid, major: 10, minor: 5, status: .retired, gateId: "G_MAIN")
        r.upsertBeacon(id: "B_6", uuid: uuid, major: 10, minor: 6, status: .lost, gateId: "G_MAIN")
        r.upsertBeacon(id: "B_BR", uuid: uuid, major: 20, minor: 1, status: .active, gateId: "G_BR")
        r.upsertDevice(DeviceBinding(deviceId: device, userId: user, status: .enrolled))
        r.upsertDevice(DeviceBinding(deviceId: secondDevice, userId: user, status: .enrolled))
        r.upsertDevice(DeviceBinding(deviceId: revokedDevice, userId: user, status: .revoked))
        r.upsertDevice(DeviceBinding(deviceId: otherUsersDevice, userId: otherUser, status: .enrolled))
        // Another organization's site with its own gate and beacon (major 30).
        r.upsertSite(id: otherOrgSite, geofence: hqFence)
        r.upsertGate(id: "G_OO", siteId: otherOrgSite)
        r.upsertBeacon(id: "B_OO", uuid: uuid, major: 30, minor: 1, status: .active, gateId: "G_OO")
        // `user` works at both sites of the organization, `otherUser` at HQ only.
        r.upsertUser(id: user, siteIds: [hq, branch])
        r.upsertUser(id: otherUser, siteIds: [hq])
        return r
    }()

    static let t0 = Date(timeIntervalSince1970: 1_758_177_312) // 2025-09-18T06:35:12Z

    static func context(
        history: PolicyHistory = PolicyHistory(), settings: PolicySettings = PolicySettings(), now: Date = t0
    ) -> PolicyContext {
        PolicyContext(registry: registry, history: history, now: now, settings: settings)
    }
}

/// A device event as an honest phone at HQ's main gate sends it, with knobs to make it dishonest.
struct EventSpec {
    var key = "k_\(UUID().uuidString.lowercased())"
    var user = World.user
    var device = World.device
    var payloadUser: String?
    var payloadDevice: String?
    var time = World.t0
    var receivedAt: Date?
    var type = AttendanceEventType.checkin
    var site = World.hq
    /// The gateway's `siteId`; `nil` means the payload's.
    var gatewaySite: String?
    var uuid = World.companyUUID
    var major = 10
    var minor = 3
    var rssi: [Int]? = [-75, -71, -68, -66, -70]
    var motion: AttendanceEvent.Motion? = .init(state: .walking, steps2min: 42)
    var geofence: AttendanceEvent.Geofence? = .init(inside: true, radius: 200)
    var location: AttendanceEvent.Location? = .init(lat: 10.7772, lon: 106.7012, accuracyM: 15)
    var attestation: AttendanceEvent.Attestation? = .init(jailbroken: false, simulatedLocation: false)
    var appVersion: String? = "1.12.0"
    var bodyAppVersion = "1.12.0"
    var model = "iPhone14,5"
    var tEnd: Date?
    var queuedOffline: Bool?
    var gatt: AttendanceEvent.Gatt?

    func envelope() -> RawEventEnvelope {
        let body = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: payloadUser ?? user, deviceId: payloadDevice ?? device,
            timestamp: time, type: type, siteId: site, beacon: BeaconIdentity(uuid: uuid, major: major, minor: minor),
            rssiSeries: rssi, txPower: -59, motion: motion, geofence: geofence, handshake: nil,
            network: .init(online: true, latencyMs: 120), app: .init(version: bodyAppVersion, build: 345),
            device: .init(model: model, os: "iOS 18.0"), tEnd: tEnd, queuedOffline: queuedOffline,
            location: location, attestation: attestation, gatt: gatt
        )
        return RawEventEnvelope(
            requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device,
            siteId: gatewaySite ?? site, appVersion: appVersion, gatewayInstance: "gateway-0",
            receivedAt: receivedAt ?? time.addingTimeInterval(0.4), payloadFingerprint: String(repeating: "0", count: 64),
            payload: .event(body)
        )
    }
}

func event(_ configure: (inout EventSpec) -> Void = { _ in }) -> RawEventEnvelope {
    var spec = EventSpec()
    configure(&spec)
    return spec.envelope()
}

func contractCheckIn(
    key: String = "k_ci", user: String = World.user, device: String = World.device, site: String = World.hq, at time: Date = World.t0,
    appVersion: String = "1.12.0", model: String = "iPhone14,5"
) -> RawEventEnvelope {
    RawEventEnvelope(
        requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: site,
        appVersion: appVersion, gatewayInstance: "gateway-0", receivedAt: time, payloadFingerprint: String(repeating: "0", count: 64),
        payload: .checkIn(
            CheckInRequest(
                userId: user, siteId: site, ts: time, sessionKey: "s_1",
                deviceMeta: DeviceMeta(model: model, os: "iOS 18.0", appVersion: appVersion)))
    )
}

func contractCheckOut(
    key: String = "k_co", user: String = World.user, device: String = World.device, site: String? = nil, at time: Date,
    reason: CheckOutReason
) -> RawEventEnvelope {
    RawEventEnvelope(
        requestId: "req_\(key)", idempotencyKey: key, userId: user, deviceId: device, siteId: site,
        appVersion: "1.12.0", gatewayInstance: "gateway-0", receivedAt: time, payloadFingerprint: String(repeating: "0", count: 64),
        payload: .checkOut(CheckOutRequest(sessionKey: "s_1", ts: time, reason: reason))
    )
}

func heartbeat(key: String = "k_hb", at time: Date) -> RawEventEnvelope {
    RawEventEnvelope(
        requestId: "req_\(key)", idempotencyKey: key, userId: World.user, deviceId: World.device, siteId: World.hq,
        appVersion: "1.12.0", gatewayInstance: "gateway-0", receivedAt: time, payloadFingerprint: String(repeating: "0", count: 64),
        payload: .heartbeat(HeartbeatRequest(sessionKey: "s_1", ts: time))
    )
}

/// Every hosted rule enforced, with the given settings.
func enforceAll(version: Int = 1, _ configure: (inout PolicySettings) -> Void = { _ in }) -> SitePolicy {
    var settings = PolicySettings()
    configure(&settings)
    return SitePolicy.all(.enforce, version: version, siteId: World.hq, settings: settings)
}

/// Only `rule` switched on, in `mode`.
func only(
    _ rule: PolicyRuleID, _ mode: RuleSwitch = .enforce, version: Int = 1, _ configure: (inout PolicySettings) -> Void = { _ in }
) -> SitePolicy {
    var settings = PolicySettings()
    configure(&settings)
    return SitePolicy(siteId: World.hq, version: version, rules: [rule: RuleConfig(mode)], settings: settings)
}

/// Decides with the standard engine and records accepts in `history`, as the service does.
@discardableResult
func decideAndRecord(_ e: RawEventEnvelope, policy: SitePolicy, history: PolicyHistory, now: Date? = nil) -> PolicyDecision {
    let context = World.context(history: history, now: now ?? e.receivedAt)
    let decision = PolicyEngine.standard.decide(e, context: context, policy: policy)
    history.record(decision, for: e, registry: World.registry)
    return decision
}

extension PolicyDecision {
    func result(_ id: PolicyRuleID) -> RuleResult? { ruleResults.first { $0.ruleId == id } }
    var firedRules: [PolicyRuleID] { ruleResults.filter(\.fired).map(\.ruleId) }
}

extension PolicyRule {
    /// Evaluates with default settings (or the given ones) against a fresh or given history.
    func run(
        _ e: RawEventEnvelope, history: PolicyHistory = PolicyHistory(), _ configure: (inout PolicySettings) -> Void = { _ in }
    ) -> RuleOutcome {
        var settings = PolicySettings()
        configure(&settings)
        return evaluate(e, context: World.context(history: history, settings: settings))
    }
}

/// `event` with idempotency key `key`, `seconds` after `World.t0`, then `configure`.
func punch(_ key: String, at seconds: TimeInterval = 0, _ configure: (inout EventSpec) -> Void = { _ in }) -> RawEventEnvelope {
    event {
        $0.key = key
        $0.time = World.t0 + seconds
        configure(&$0)
    }
}
