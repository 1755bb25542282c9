import AttendanceProtocol
import Foundation

/// `co_location`: the beacon was heard AND the device is inside the site's geofence.
///
/// - Beacon heard: when an RSSI series is sent, at least one reading is non-zero
///   (`enable_bluetooth`, risk 0.3).
/// - Device flag: `geofence.inside == false` fires (`walk_to_gate`, risk 0.6).
/// - Position: when `location` is sent with an accuracy of at most `maxLocationAccuracyMeters`
///   (or none stated) and the registry knows the site's geofence, the fix's circle (its haversine
///   distance from the geofence centre, less its stated accuracy) must reach within the radius plus
///   `geofenceToleranceMeters` (`walk_to_gate`, 0.7): a fix 300 m out with 300 m accuracy may be
///   a phone at its desk, and is no evidence that it is not.
/// - Neither a geofence flag nor a usable position: passes, or fires with `requireSensorData`
///   (`walk_to_gate`, 0.3).
///
/// Applies to device check-ins and heartbeats. Check-outs pass: leaving the geofence is what a
/// check-out is. The session contracts carry no position and pass.
package struct CoLocationRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .coLocation }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard let body = event.attendanceEvent, body.type != .checkout else { return .passed }
        let settings = context.settings
        var firings: [RuleFiring] = []
        if let series = body.rssiSeries, !series.contains(where: { $0 != 0 }) {
            firings.append(RuleFiring(reason: "beacon not heard while ranging", action: .enableBluetooth, risk: 0.3))
        }
        if let geofence = body.geofence, !geofence.inside {
            firings.append(RuleFiring(reason: "device reports it is outside the site geofence", action: .walkToGate, risk: 0.6))
        }
        var usablePosition = false
        if let location = body.location, location.lat.isFinite, location.lon.isFinite,
            (location.accuracyM ?? 0) <= settings.maxLocationAccuracyMeters,
            let siteId = event.policySiteId, let fence = context.registry.geofence(siteId: siteId)
        {
            usablePosition = true
            let distance = GeoDistance.haversineMeters(
                lat1: location.lat, lon1: location.lon, lat2: fence.latitude, lon2: fence.longitude
            )
            let accuracy = location.accuracyM.map { $0.isFinite ? max(0, $0) : 0 } ?? 0
            if distance - accuracy > fence.radiusMeters + settings.geofenceToleranceMeters {
                firings.append(
                    RuleFiring(
                        reason:
                            "position is \(Wording.meters(distance))\(location.accuracyM == nil ? "" : " (accuracy \(Wording.meters(accuracy)))")"
                            + " from site \(siteId), geofence radius \(Wording.meters(fence.radiusMeters))",
                        action: .walkToGate, risk: 0.7
                    ))
            }
        }
        if body.geofence == nil, !usablePosition, settings.requireSensorData {
            firings.append(RuleFiring(reason: "no geofence state or usable position sent", action: .walkToGate, risk: 0.3))
        }
        return .combining(firings)
    }
}
