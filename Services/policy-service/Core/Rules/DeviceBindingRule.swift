import AttendanceProtocol
import Foundation

/// `device_binding`: the authenticated device is enrolled, bound to the event's user, not revoked,
/// and the payload speaks for the same user and device as the authentication.
///
/// Applies to every payload kind. (How many devices a user may punch from is `multi_device`.)
///
/// | finding | action | risk |
/// |---|---|---|
/// | payload names another user or device than the authenticated one | contact_admin | 1.0 |
/// | device not enrolled | contact_admin | 0.7 |
/// | device revoked | contact_admin | 0.9 |
/// | device bound to another user | contact_admin | 0.9 |
package struct DeviceBindingRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .deviceBinding }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        switch event.payload {
        case .event(let body):
            if body.userId != event.userId {
                return .fire(
                    "payload is for user \(body.userId), the device is authenticated for \(event.userId)", action: .contactAdmin, risk: 1)
            }
            if body.deviceId != event.deviceId {
                return .fire(
                    "payload names device \(body.deviceId), the request was authenticated as \(event.deviceId)", action: .contactAdmin,
                    risk: 1)
            }
        case .checkIn(let request):
            if request.userId != event.userId {
                return .fire(
                    "check-in is for user \(request.userId), the device is authenticated for \(event.userId)", action: .contactAdmin,
                    risk: 1)
            }
        case .checkOut, .heartbeat:
            break
        }
        guard let binding = context.registry.device(id: event.deviceId) else {
            return .fire("device \(event.deviceId) is not enrolled", action: .contactAdmin, risk: 0.7)
        }
        if binding.status == .revoked {
            return .fire("device \(event.deviceId) was revoked", action: .contactAdmin, risk: 0.9)
        }
        if binding.userId != event.userId {
            return .fire("device \(event.deviceId) is bound to another user", action: .contactAdmin, risk: 0.9)
        }
        return .passed
    }
}
