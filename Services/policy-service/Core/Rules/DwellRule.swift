import AttendanceProtocol
import Foundation

/// `dwell`: a check-in needs the device to have stayed near the beacon: heard (non-zero RSSI) in at
/// least `minDwellReadings` readings of the ranging window, and, when the event sends `tEnd`, a
/// window of at least `minDwellSeconds`.
///
/// Applies to device check-ins; other payloads pass. No RSSI series: passes, or fires with
/// `requireSensorData`. Fires with `walk_to_gate`, risk 0.2.
package struct DwellRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .dwell }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard let body = event.attendanceEvent, body.type == .checkin else { return .passed }
        let settings = context.settings
        var firings: [RuleFiring] = []
        if let series = body.rssiSeries {
            let heard = series.lazy.filter { $0 != 0 }.count
            if heard < settings.minDwellReadings {
                firings.append(
                    RuleFiring(
                        reason: "beacon heard in \(heard) reading\(heard == 1 ? "" : "s"), \(settings.minDwellReadings) required",
                        action: .walkToGate, risk: 0.2
                    ))
            }
        } else if settings.requireSensorData {
            firings.append(RuleFiring(reason: "no RSSI series sent", action: .walkToGate, risk: 0.2))
        }
        if settings.minDwellSeconds > 0, let tEnd = body.tEnd {
            let dwell = tEnd.timeIntervalSince(body.timestamp)
            if dwell < TimeInterval(settings.minDwellSeconds) {
                firings.append(
                    RuleFiring(
                        reason: "near the beacon for \(Wording.seconds(max(0, dwell))), \(settings.minDwellSeconds) s required",
                        action: .walkToGate, risk: 0.2
                    ))
            }
        }
        return .combining(firings)
    }
}
