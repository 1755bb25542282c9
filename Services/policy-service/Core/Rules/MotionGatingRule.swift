import AttendanceProtocol
import Foundation

/// `motion_gating`: a check-in comes from someone who was walking: activity walking/running, or at
/// least `minSteps2min` steps in the last two minutes.
///
/// Applies to device check-ins (a check-out may come after the soft-exit grace, from a car).
/// No motion data: passes, or fires with `requireSensorData`. Fires with `walk_to_gate`, risk 0.3.
package struct MotionGatingRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .motionGating }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard let body = event.attendanceEvent, body.type == .checkin else { return .passed }
        let required = context.settings.minSteps2min
        guard let motion = body.motion else {
            return context.settings.requireSensorData
                ? .fire("no motion data sent", action: .walkToGate, risk: 0.3) : .passed
        }
        if motion.state.isMoving { return .passed }
        if let steps = motion.steps2min, steps >= required { return .passed }
        let steps = motion.steps2min.map { "\($0) steps" } ?? "no step count"
        return .fire(
            "\(motion.state.rawValue), \(steps) in 2 min, \(required) required", action: .walkToGate, risk: 0.3
        )
    }
}
