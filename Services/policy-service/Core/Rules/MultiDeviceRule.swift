import AttendanceProtocol
import Foundation

/// `multi_device`: a user punches from at most `maxDevicesPerUser` distinct devices within
/// `multiDeviceWindowSeconds` (either side of the event time), this one included.
///
/// Counts the devices with an accepted punch in the history within the window of the event time (a
/// late punch is judged against the punches around its own time). Applies to punches; heartbeats
/// pass. Fires with `contact_admin`, risk 0.5.
package struct MultiDeviceRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .multiDevice }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard event.isPunch else { return .passed }
        let settings = context.settings
        var devices = context.history.devicesSeen(
            userId: event.userId, around: event.payload.eventTime, within: TimeInterval(settings.multiDeviceWindowSeconds)
        )
        devices.insert(event.deviceId)
        guard devices.count > settings.maxDevicesPerUser else { return .passed }
        let window = Wording.duration(TimeInterval(settings.multiDeviceWindowSeconds))
        return .fire(
            "punched from \(devices.count) devices within \(window), this site allows \(settings.maxDevicesPerUser)",
            action: .contactAdmin, risk: 0.5
        )
    }
}
