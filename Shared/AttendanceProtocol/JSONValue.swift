import Foundation

/// Any JSON value, for payloads whose shape belongs to another component (registry entities).
///
/// Integers and fractional numbers are kept apart so that 64-bit identifiers and versions survive
/// a round trip exactly. Objects are unordered; encoders write their members sorted by key, so a
/// value always encodes to the same bytes.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Builds the JSON form of any `Encodable` (as the protocol encoder would write it).
    public init<T: Encodable>(encoding value: T) throws(ProtocolEncodingError) {
        do {
            self.init(encoded: try OrderedJSONEncoder.encode(value))
        } catch {
            throw ProtocolCodec.encodingError(from: error)
        }
    }

    /// Decodes this value as `T`, with the same typed errors as `ProtocolCodec.decode`.
    public func decode<T: Decodable>(as type: T.Type = T.self) throws(ProtocolDecodingError) -> T {
        do {
            return try TreeDecoder.decode(type, from: node)
        } catch {
            throw CodingPath.decodingError(from: error)
        }
    }

    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var int64Value: Int64? {
        switch self {
        case .integer(let value): return value
        case .number(let value): return Int64(exactly: value)
        default: return nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .number(let value): return value
        default: return nil
        }
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .integer(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .object(let members):
            var container = encoder.container(keyedBy: AnyCodingKey.self)
            for key in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                try container.encode(members[key]!, forKey: AnyCodingKey(key))
            }
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: Conversions to and from the codec's internal trees

extension JSONValue {
    init(node: JSONNode, codingPath: [any CodingKey]) throws {
        switch node {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .string(let value): self = .string(value)
        case .number(let literal):
            if let value = Int64(literal) {
                self = .integer(value)
            } else if let value = Double(literal), value.isFinite {
                self = .number(value)
            } else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "number \(literal) is out of range"))
            }
        case .array(let items):
            var values: [JSONValue] = []
            values.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                values.append(try JSONValue(node: item, codingPath: codingPath + [IndexKey(i)]))
            }
            self = .array(values)
        case .object(let object):
            var members: [String: JSONValue] = [:]
            for member in object.members {
                members[member.key] = try JSONValue(node: member.value, codingPath: codingPath + [AnyCodingKey(member.key)])
            }
            self = .object(members)
        }
    }

    init(encoded: EncodedValue) {
        switch encoded {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .string(let value): self = .string(value)
        case .number(let text): self = Int64(text).map(JSONValue.integer) ?? .number(Double(text) ?? .nan)
        case .array(let array): self = .array(array.items.map(JSONValue.init(encoded:)))
        case .object(let object):
            var members: [String: JSONValue] = [:]
            for (key, value) in zip(object.keys, object.values) { members[key] = JSONValue(encoded: value) }
            self = .object(members)
        case .encoder(let encoder): self.init(encoded: encoder.result)
        }
    }

    var node: JSONNode {
        switch self {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .integer(let value): return .number(String(value))
        case .number(let value): return .number(String(value))
        case .string(let value): return .string(value)
        case .array(let values): return .array(values.map(\.node))
        case .object(let members):
            return .object(JSONObjectNode(members: members.map { (key: $0.key, value: $0.value.node) }))
        }
    }
}

/// A coding key for dynamic member names.
struct AnyCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { self.stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
