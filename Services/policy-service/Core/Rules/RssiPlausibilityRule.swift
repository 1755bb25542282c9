import AttendanceProtocol
import Foundation

/// `rssi_plausibility`: the ranged RSSI series looks like a real radio.
///
/// - A value outside -127...0 dBm is impossible (`contact_admin`, 0.9).
/// - Flat: at least `flatRssiMinReadings` heard readings (0 means "not heard this second" and is
///   left out) whose population standard deviation is below `flatRssiMaxStdDevDb`: what a spoofer
///   replaying a constant value sends, but also what a phone at rest reading whole dBm can send. So
///   it is recorded on the verdict with risk 0.7 for review and never refuses, even when the rule
///   is enforced.
///
/// Applies to device events with a series; no series: passes, or fires with `requireSensorData`
/// (`enable_bluetooth`, 0.3). Other payloads pass.
package struct RssiPlausibilityRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .rssiPlausibility }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard let body = event.attendanceEvent else { return .passed }
        let settings = context.settings
        guard let series = body.rssiSeries else {
            return settings.requireSensorData && body.type != .checkout
                ? .fire("no RSSI series sent", action: .enableBluetooth, risk: 0.3) : .passed
        }
        if let impossible = series.first(where: { $0 > 0 || $0 < -127 }) {
            return .fire("RSSI \(impossible) dBm is outside -127...0", action: .contactAdmin, risk: 0.9)
        }
        var count = 0
        var sum = 0.0
        var sumOfSquares = 0.0
        for value in series where value != 0 {
            count += 1
            let x = Double(value)
            sum += x
            sumOfSquares += x * x
        }
        guard count >= settings.flatRssiMinReadings else { return .passed }
        let mean = sum / Double(count)
        let variance = max(0, sumOfSquares / Double(count) - mean * mean)
        let deviation = variance.squareRoot()
        if deviation < settings.flatRssiMaxStdDevDb {
            let shown = (deviation * 100).rounded() / 100
            return .fired(
                RuleFiring(
                    reason:
                        "flat RSSI series: \(count) readings with a standard deviation of \(shown) dB (under \(settings.flatRssiMaxStdDevDb))",
                    action: .contactAdmin, risk: 0.7, refuses: false
                ))
        }
        return .passed
    }
}
