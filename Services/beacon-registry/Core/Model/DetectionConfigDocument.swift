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

extension DetectionConfigDocument {
    /// `document` as an app that reads remote-config schema `schema` can take it: without the keys that
    /// later schemas introduced (`RemoteConfig.keySchemaVersions`), which that app would refuse, and
    /// the whole document with them (its kill switch included). An object left empty goes too. Feature
    /// flags stay: an app keeps the flags it does not know. A key this build does not list at all was
    /// stored by a later registry (a rolling upgrade, a rollback): it is left out for every schema, since
    /// no app this build knows of reads it.
    package static func readable(
        bySchema schema: Int, _ document: JSONValue, keySchemas: [String: Int] = RemoteConfig.keySchemaVersions
    ) -> JSONValue {
        func keep(_ value: JSONValue, under prefix: String?) -> JSONValue? {
            guard case .object(let members) = value, prefix != "feature_flags" else { return value }
            var kept: [String: JSONValue] = [:]
            for (key, member) in members {
                let path = prefix.map { "\($0).\(key)" } ?? key
                guard (keySchemas[path] ?? .max) <= schema, let value = keep(member, under: prefix == nil ? key : path) else { continue }
                kept[key] = value
            }
            return prefix != nil && kept.isEmpty && !members.isEmpty ? nil : .object(kept)
        }
        return keep(document, under: nil) ?? .object([:])
    }
}
