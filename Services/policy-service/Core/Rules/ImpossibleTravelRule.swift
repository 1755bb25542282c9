import AttendanceProtocol
import Foundation

/// `impossible_travel`: the user cannot have got from the site of their previous accepted punch to
/// this one faster than `maxTravelSpeedKmh`.
///
/// The distance is between the two sites' geofences (centre distance minus both radii, at least
/// 0); the time is the absolute difference of the event times. Passes when either site or its
/// geofence is unknown, when both punches are at the same site, and for heartbeats and replays.
/// Fires with `contact_admin`, risk 0.8.
package struct ImpossibleTravelRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .impossibleTravel }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard event.isPunch, let siteId = event.policySiteId,
            let previous = context.history.lastPunch(userId: event.userId),
            previous.idempotencyKey != event.idempotencyKey,
            let previousSite = previous.siteId, previousSite != siteId,
            let here = context.registry.geofence(siteId: siteId),
            let there = context.registry.geofence(siteId: previousSite)
        else { return .passed }
        let centres = GeoDistance.haversineMeters(lat1: here.latitude, lon1: here.longitude, lat2: there.latitude, lon2: there.longitude)
        let distance = max(0, centres - here.radiusMeters - there.radiusMeters)
        guard distance > 0 else { return .passed }
        let elapsed = abs(event.payload.eventTime.timeIntervalSince(previous.time))
        let limit = context.settings.maxTravelSpeedKmh
        let speedKmh = elapsed > 0 ? distance / elapsed * 3.6 : .infinity
        guard speedKmh > limit else { return .passed }
        let speed = speedKmh.isFinite ? "\(Int(speedKmh.rounded())) km/h" : "no time"
        return .fire(
            "\(Wording.meters(distance)) from site \(previousSite) in \(Wording.duration(elapsed)) (\(speed), at most \(Int(limit)) km/h)",
            action: .contactAdmin, risk: 0.8
        )
    }
}
