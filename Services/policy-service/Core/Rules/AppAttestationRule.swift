import AttendanceProtocol
import Foundation

/// `app_attestation`: the app and device are fit to be trusted.
///
/// - App version: every version the event states (`X-App-Version`, `app.version`,
///   `deviceMeta.appVersion`) is at least `minAppVersion`, compared as `SemanticVersion`s
///   (`update_app`: 0.1 when older, 0.3 when unreadable).
/// - Jailbreak flag, with `refuseJailbroken` (`contact_admin`, 0.6).
/// - Simulated location (iOS `isSimulatedBySoftware`) or Android mock provider, with
///   `refuseSimulatedLocation` (`contact_admin`, 0.8).
/// - Device model: refused when it starts with a `deniedModelPrefixes` entry, or when
///   `allowedModelPrefixes` is not empty and it starts with none (`contact_admin`, 0.4).
///   No model stated: passes, or fires with `requireSensorData` when an allow list is set.
///
/// Applies to every payload kind, with what it states. Several findings make one firing: reasons
/// joined, the most relevant action, risks combined.
package struct AppAttestationRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .appAttestation }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        let settings = context.settings
        var firings: [RuleFiring] = []

        if let minimumText = settings.minAppVersion, let minimum = SemanticVersion.cached(minimumText) {
            for text in event.statedAppVersions {
                guard let version = SemanticVersion.cached(text) else {
                    firings.append(RuleFiring(reason: "app version \"\(text)\" is unreadable", action: .updateApp, risk: 0.3))
                    break
                }
                if version < minimum {
                    firings.append(
                        RuleFiring(reason: "app \(text) is older than the minimum \(minimumText)", action: .updateApp, risk: 0.1))
                    break
                }
            }
        }

        if let attestation = event.attendanceEvent?.attestation {
            if settings.refuseJailbroken, attestation.jailbroken == true {
                firings.append(RuleFiring(reason: "device reports a jailbreak", action: .contactAdmin, risk: 0.6))
            }
            if settings.refuseSimulatedLocation {
                if attestation.simulatedLocation == true {
                    firings.append(RuleFiring(reason: "location is simulated by software", action: .contactAdmin, risk: 0.8))
                } else if attestation.mockProvider == true {
                    firings.append(RuleFiring(reason: "a mock location provider is enabled", action: .contactAdmin, risk: 0.8))
                }
            }
        }

        if let model = event.statedDeviceModel {
            if let denied = settings.deniedModelPrefixes.first(where: { model.hasPrefix($0) }) {
                firings.append(RuleFiring(reason: "device model \(model) is denied (\(denied)*)", action: .contactAdmin, risk: 0.4))
            } else if !settings.allowedModelPrefixes.isEmpty, !settings.allowedModelPrefixes.contains(where: { model.hasPrefix($0) }) {
                firings.append(RuleFiring(reason: "device model \(model) is not on the allowed list", action: .contactAdmin, risk: 0.4))
            }
        } else if !settings.allowedModelPrefixes.isEmpty, settings.requireSensorData, event.isPunch {
            firings.append(RuleFiring(reason: "no device model sent", action: .contactAdmin, risk: 0.4))
        }
        return .combining(firings)
    }
}
