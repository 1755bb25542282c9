import AttendanceProtocol
import Foundation
import PresenceKit

/// A site's detection settings as an administrator sends them: a remote-config document that
/// PresenceKit's own strict reader (`RemoteConfig.decode`) accepted. Only this type reaches the
/// repository, so the registry never stores, and a device never receives, a document the phone
/// would refuse.
package struct DetectionConfigDocument: Sendable, Hashable {
    /// The document as stored and served.
    package let value: JSONValue

    /// Checks `body` as the phone will: unknown keys and wrong types are each a field error naming its key
    /// (`thresholds.enter_rssi`); a document free of those is then checked for out-of-range values and
    /// refused combinations, each named the same way.
    package init(validating body: [UInt8]) throws(RegistryError) {
        do {
            _ = try RemoteConfig.decode(body)
        } catch {
            throw .invalidInput(
                error.issues.map { FieldError(field: $0.key == "(document)" ? "" : $0.key, reason: $0.message) })
        }
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(body))
        } catch {
            throw .invalid("", "the body is not valid JSON")
        }
    }
}
