import AttendanceProtocol
import Foundation

/// `clock_skew`: the event time is close to when the gateway received it.
///
/// Fires when the event time is more than `maxClockSkewSeconds` after the receipt (a clock ahead),
/// or more than that before it without an offline record (`queuedOffline` or `firstAttemptAt`)
/// on a device event. The session contracts cannot state that they were queued offline, so for
/// them only the "ahead" check applies. Fires with `contact_admin`, risk 0.3.
package struct ClockSkewRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .clockSkew }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        let limit = TimeInterval(context.settings.maxClockSkewSeconds)
        let skew = event.payload.eventTime.timeIntervalSince(event.receivedAt)
        if skew > limit {
            return .fire("event time is \(Wording.duration(skew)) ahead of its receipt", action: .contactAdmin, risk: 0.3)
        }
        if -skew > limit, let body = event.attendanceEvent, body.queuedOffline != true, body.firstAttemptAt == nil {
            return .fire(
                "event time is \(Wording.duration(skew)) before its receipt, and it was not queued offline",
                action: .contactAdmin, risk: 0.3
            )
        }
        return .passed
    }
}
