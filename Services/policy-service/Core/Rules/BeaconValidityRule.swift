import AttendanceProtocol
import Foundation

/// `beacon_validity`: the beacon the event names is registered, active, at the event's site, and
/// not a factory-default (banned) UUID.
///
/// Applies to device check-ins and heartbeats (they name a beacon). The check-in contract names
/// none: it passes, unless `requireSensorData`, when it fires. Check-outs pass whatever beacon they
/// name: a refused check-out would leave the session open. A heartbeat naming a beacon retired
/// since the check-in passes (the gate's beacon was replaced during the shift); one naming a lost,
/// banned, unknown or another site's beacon is refused, since heartbeats keep a session open. An event
/// made before the registry's last change of its beacon (a check-in queued offline at a beacon retired
/// or moved to another site before the upload) is judged by what it cannot know: retired or elsewhere
/// is then a note, never a refusal.
///
/// | finding | action | risk |
/// |---|---|---|
/// | banned UUID prefix | contact_admin | 0.9 |
/// | malformed UUID | contact_admin | 0.9 |
/// | not registered | walk_to_gate | 0.8 |
/// | retired | contact_admin | 0.5 |
/// | lost | contact_admin | 0.7 |
/// | at another site (or its site unknown) | walk_to_gate | 0.8 |
/// | check-in without a beacon (`requireSensorData`) | walk_to_gate | 0.5 |
package struct BeaconValidityRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .beaconValidity }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        if event.attendanceEvent?.type == .checkout { return .passed }
        guard let beacon = event.attendanceEvent?.beacon else {
            if case .checkIn = event.payload, context.settings.requireSensorData {
                return .fire("check-in names no beacon", action: .walkToGate, risk: 0.5)
            }
            return .passed
        }
        let name = "beacon \(beacon.canonicalId)"
        if let prefix = context.registry.bannedPrefix(of: beacon.uuid) {
            return .fire("\(name) uses the banned factory-default UUID prefix \(prefix)", action: .contactAdmin, risk: 0.9)
        }
        guard UUIDText.parse(beacon.uuid) != nil else {
            return .fire("\(name) has a malformed UUID", action: .contactAdmin, risk: 0.9)
        }
        guard let registered = context.registry.beacon(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor) else {
            return .fire("\(name) is not registered", action: .walkToGate, risk: 0.8)
        }
        // The registry changed the beacon after the event was made: its status or site now may not be
        // what the phone saw.
        let changedSince = registered.changedAt.map { event.payload.eventTime < $0 } ?? false
        switch registered.status {
        case .active: break
        case .retired:
            if changedSince { return .note("\(name) was retired after this event was made") }
            if event.attendanceEvent?.type == .heartbeat, Self.retiredDuringTheStay(registered, of: event, history: context.history) {
                break
            }
            return .fire("\(name) is retired", action: .contactAdmin, risk: 0.5)
        case .lost: return .fire("\(name) is reported lost", action: .contactAdmin, risk: 0.7)
        }
        guard let beaconSite = registered.siteId else {
            return .fire("\(name) is not assigned to a known site", action: .walkToGate, risk: 0.8)
        }
        for claimed in event.claimedSiteIds where claimed != beaconSite {
            if changedSince { return .note("\(name) belongs to site \(beaconSite) since after this event was made, not \(claimed)") }
            return .fire("\(name) belongs to site \(beaconSite), not \(claimed)", action: .walkToGate, risk: 0.8)
        }
        return .passed
    }

    /// Whether the beacon was retired after the user's latest accepted punch, a check-in: the stay the
    /// heartbeat keeps open began while the beacon was active. A beacon retired before it (an old unit
    /// someone kept) keeps no session open.
    private static func retiredDuringTheStay(_ beacon: RegisteredBeacon, of event: RawEventEnvelope, history: any PunchHistory) -> Bool {
        guard let retiredAt = beacon.changedAt, let last = history.lastPunch(userId: event.userId) else { return false }
        return last.type == .checkin && last.time < retiredAt
    }
}
