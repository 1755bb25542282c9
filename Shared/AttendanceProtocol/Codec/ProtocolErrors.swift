import Foundation

/// Why a message or request body could not be decoded, and which field is at fault.
///
/// Paths are dotted with array indices in brackets: `beacon.minor`, `rssiSeries[3]`,
/// `events[0].name`. The empty path means the document root. Consumers put `description` in a
/// dead letter or a problem+json `errors` entry; the gateway maps the path to the failing field.
public enum ProtocolDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The bytes are not JSON (or not JSON5 when that is allowed); `reason` says where.
    case malformedJSON(reason: String)
    /// A required field is absent (or `null`).
    case missingField(path: String)
    /// The field holds the wrong JSON type, e.g. a string where an integer is expected.
    case wrongType(path: String, expected: String)
    /// The field has the right type but a value this protocol does not accept.
    case invalidValue(path: String, reason: String)
    /// The message declares a schema version newer than this build understands.
    case unsupportedSchemaVersion(found: Int, supported: Int)

    /// The dotted path of the offending field, `nil` when the error is not about one field.
    public var path: String? {
        switch self {
        case .missingField(let path), .wrongType(let path, _), .invalidValue(let path, _):
            return path
        case .unsupportedSchemaVersion:
            return CodingPath.schemaVersionField
        case .malformedJSON:
            return nil
        }
    }

    /// The same failure as a validation entry, for problem+json bodies and dead letters.
    public var fieldError: FieldError {
        switch self {
        case .malformedJSON(let reason):
            return FieldError(field: "", reason: "malformed JSON: \(reason)")
        case .missingField(let path):
            return FieldError(field: path, reason: "is required")
        case .wrongType(let path, let expected):
            return FieldError(field: path, reason: "expected \(expected)")
        case .invalidValue(let path, let reason):
            return FieldError(field: path, reason: reason)
        case .unsupportedSchemaVersion(let found, let supported):
            return FieldError(
                field: CodingPath.schemaVersionField,
                reason: "version \(found) is newer than the supported version \(supported)"
            )
        }
    }

    public var description: String {
        switch self {
        case .malformedJSON(let reason):
            return "malformed JSON: \(reason)"
        case .missingField(let path):
            return "missing field '\(CodingPath.display(path))'"
        case .wrongType(let path, let expected):
            return "wrong type for field '\(CodingPath.display(path))': expected \(expected)"
        case .invalidValue(let path, let reason):
            return "invalid value for field '\(CodingPath.display(path))': \(reason)"
        case .unsupportedSchemaVersion(let found, let supported):
            return "unsupported schema version \(found) (this build reads up to \(supported))"
        }
    }
}

/// Why a value could not be encoded (a non-finite number, for instance).
public struct ProtocolEncodingError: Error, Hashable, Sendable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public var description: String {
        "cannot encode field '\(CodingPath.display(path))': \(reason)"
    }
}

/// Conversions between `CodingKey` paths and the protocol's dotted path notation.
enum CodingPath {
    static let schemaVersionField = "schemaVersion"

    static func display(_ path: String) -> String { path.isEmpty ? "(root)" : path }

    /// `[beacon, minor]` → `beacon.minor`; array index keys → `[3]`.
    static func string(_ path: [any CodingKey]) -> String {
        var out = ""
        for key in path { append(key, to: &out) }
        return out
    }

    static func string(_ path: [any CodingKey], appending key: any CodingKey) -> String {
        var out = string(path)
        append(key, to: &out)
        return out
    }

    private static func append(_ key: any CodingKey, to out: inout String) {
        if let index = key.intValue, key.stringValue == "Index \(index)" {
            out += "[\(index)]"
        } else {
            if !out.isEmpty { out += "." }
            out += key.stringValue
        }
    }

    /// Maps whatever a `Decodable` initialiser threw to the typed error.
    static func decodingError(from error: any Error) -> ProtocolDecodingError {
        if let error = error as? ProtocolDecodingError { return error }
        guard let error = error as? DecodingError else {
            return .invalidValue(path: "", reason: String(describing: error))
        }
        switch error {
        case .keyNotFound(let key, let context):
            return .missingField(path: string(context.codingPath, appending: key))
        case .valueNotFound(_, let context):
            return .missingField(path: string(context.codingPath))
        case .typeMismatch(let type, let context):
            return .wrongType(path: string(context.codingPath), expected: jsonTypeName(type))
        case .dataCorrupted(let context):
            // Syntax errors never get here (the parser reports them); this is a value a type refused.
            return .invalidValue(path: string(context.codingPath), reason: context.debugDescription)
        @unknown default:
            return .invalidValue(path: "", reason: String(describing: error))
        }
    }

    /// A JSON-level name for the Swift type a decoder expected: what a device developer understands.
    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: return "boolean"
        case is String.Type: return "string"
        case is Double.Type, is Float.Type, is Decimal.Type: return "number"
        case is Int.Type, is Int8.Type, is Int16.Type, is Int32.Type, is Int64.Type,
            is UInt.Type, is UInt8.Type, is UInt16.Type, is UInt32.Type, is UInt64.Type:
            return "integer"
        case is Date.Type: return "timestamp string"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Dictionary") || (name.hasPrefix("[") && name.contains(":")) { return "object" }
            if name.hasPrefix("Array") || name.hasPrefix("[") { return "array" }
            return name
        }
    }
}
