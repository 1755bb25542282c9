import Foundation

/// An `Encoder` that keeps object members in the order they were encoded.
///
/// Why not `JSONEncoder`: on Linux it writes keys in hash order, which changes from one process to
/// the next. The protocol wants stable bytes (golden files, fingerprints, diffable logs) and the
/// device payload in its specified field order, which is the order `encode(to:)` writes them.
final class OrderedJSONEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// What this encoder produced; `nil` until a container is requested.
    fileprivate(set) var storage: EncodedValue?

    init(codingPath: [any CodingKey] = []) {
        self.codingPath = codingPath
    }

    /// The encoded value; a value that encoded nothing is an empty object (as with `JSONEncoder`).
    var result: EncodedValue { storage ?? .object(EncodedObject()) }

    static func encode<T: Encodable>(_ value: T) throws -> EncodedValue {
        try encodeValue(value, codingPath: [])
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: EncodedObject
        if case .object(let existing) = storage {
            object = existing
        } else {
            object = EncodedObject()
            storage = .object(object)
        }
        return KeyedEncodingContainer(OrderedKeyedContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: EncodedArray
        if case .array(let existing) = storage {
            array = existing
        } else {
            array = EncodedArray()
            storage = .array(array)
        }
        return OrderedUnkeyedContainer(array: array, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        OrderedSingleValueContainer(encoder: self)
    }

    /// Replaces what this encoder produced (a single value, or a `PreEncoded` tree).
    func set(_ value: EncodedValue) {
        storage = value
    }
}

/// The encoded tree. Containers are references because Codable hands out nested containers that
/// are filled after they are attached to their parent.
enum EncodedValue {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array(EncodedArray)
    case object(EncodedObject)
    /// A `superEncoder()` whose content is read when the tree is written.
    case encoder(OrderedJSONEncoder)

    var isContainer: Bool {
        switch self {
        case .array, .object, .encoder: return true
        default: return false
        }
    }
}

// The containers' storage is only reached through the encoder of one value on one thread, so the
// runtime's exclusivity checks on it (a few per cent of an encode in its profile) are off.
final class EncodedArray {
    @exclusivity(unchecked) var items: [EncodedValue] = []
}

final class EncodedObject {
    @exclusivity(unchecked) private(set) var keys: [String] = []
    @exclusivity(unchecked) private(set) var values: [EncodedValue] = []

    /// Positions by key, once the object is too large for a linear search.
    @exclusivity(unchecked) private var index: [MemberName: Int]?

    /// Sets `value` for `key`; a key encoded twice keeps its first position and its last value.
    func set(_ value: EncodedValue, for key: String) {
        if keys.count >= 32, index == nil {
            index = Dictionary(keys.enumerated().map { (MemberName($1), $0) }, uniquingKeysWith: { first, _ in first })
        }
        let existing = index.map { $0[MemberName(key)] } ?? keys.firstIndex { MemberName.same($0, key) }
        if let existing {
            values[existing] = value
        } else {
            index?[MemberName(key)] = keys.count
            keys.append(key)
            values.append(value)
        }
    }
}

// MARK: Scalars

private func encodeValue<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws -> EncodedValue {
    // Metatype comparisons first: cheaper than dynamic casts on every nested value.
    if T.self == Date.self { return .string(WireTimestamp.string(from: value as! Date)) }
    if T.self == Data.self { return .string((value as! Data).base64EncodedString()) }
    if T.self == URL.self { return .string((value as! URL).absoluteString) }
    if T.self == Decimal.self { return .number((value as! Decimal).description) }
    if let dictionary = value as? any StringKeyedDictionary {
        return .object(try dictionary.encodeSortedByKey(codingPath: codingPath))
    }
    let encoder = OrderedJSONEncoder(codingPath: codingPath)
    try value.encode(to: encoder)
    return encoder.result
}

/// `[String: Value]` encodes in hash order, which differs between processes; its members are
/// written sorted by key instead so equal dictionaries always give equal bytes.
private protocol StringKeyedDictionary {
    func encodeSortedByKey(codingPath: [any CodingKey]) throws -> EncodedObject
}

extension Dictionary: StringKeyedDictionary where Key == String, Value: Encodable {
    fileprivate func encodeSortedByKey(codingPath: [any CodingKey]) throws -> EncodedObject {
        let object = EncodedObject()
        for key in keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            object.set(try encodeValue(self[key]!, codingPath: codingPath + [AnyCodingKey(key)]), for: key)
        }
        return object
    }
}

private func number<T: BinaryFloatingPoint & LosslessStringConvertible>(_ value: T, _ path: [any CodingKey]) throws -> EncodedValue {
    guard value.isFinite else {
        throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "\(value) cannot be represented in JSON"))
    }
    var text = value.description
    // Swift prints 200.0; JSON writers conventionally print 200.
    if text.hasSuffix(".0") { text.removeLast(2) }
    return .number(text)
}

private func number<T: FixedWidthInteger>(_ value: T) -> EncodedValue { .number(String(value)) }

// MARK: Keyed

private struct OrderedKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: EncodedObject
    let codingPath: [any CodingKey]

    private func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }

    mutating func encodeNil(forKey key: Key) { object.set(.null, for: key.stringValue) }
    mutating func encode(_ value: Bool, forKey key: Key) { object.set(.bool(value), for: key.stringValue) }
    mutating func encode(_ value: String, forKey key: Key) { object.set(.string(value), for: key.stringValue) }
    mutating func encode(_ value: Double, forKey key: Key) throws { object.set(try number(value, path(key)), for: key.stringValue) }
    mutating func encode(_ value: Float, forKey key: Key) throws { object.set(try number(value, path(key)), for: key.stringValue) }
    mutating func encode(_ value: Int, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: Int8, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: Int16, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: Int32, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: Int64, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: UInt, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: UInt8, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: UInt16, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: UInt32, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode(_ value: UInt64, forKey key: Key) { object.set(number(value), for: key.stringValue) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        object.set(try encodeValue(value, codingPath: path(key)), for: key.stringValue)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = EncodedObject()
        object.set(.object(nested), for: key.stringValue)
        return KeyedEncodingContainer(OrderedKeyedContainer<NestedKey>(object: nested, codingPath: path(key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = EncodedArray()
        object.set(.array(nested), for: key.stringValue)
        return OrderedUnkeyedContainer(array: nested, codingPath: path(key))
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = OrderedJSONEncoder(codingPath: codingPath + [SuperKey()])
        object.set(.encoder(encoder), for: "super")
        return encoder
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let encoder = OrderedJSONEncoder(codingPath: path(key))
        object.set(.encoder(encoder), for: key.stringValue)
        return encoder
    }
}

private struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) {}
    init?(intValue: Int) { nil }
}

// MARK: Unkeyed

private struct OrderedUnkeyedContainer: UnkeyedEncodingContainer {
    let array: EncodedArray
    let codingPath: [any CodingKey]

    var count: Int { array.items.count }
    private var nextPath: [any CodingKey] { codingPath + [IndexKey(array.items.count)] }

    mutating func encodeNil() { array.items.append(.null) }
    mutating func encode(_ value: Bool) { array.items.append(.bool(value)) }
    mutating func encode(_ value: String) { array.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws { array.items.append(try number(value, nextPath)) }
    mutating func encode(_ value: Float) throws { array.items.append(try number(value, nextPath)) }
    mutating func encode(_ value: Int) { array.items.append(number(value)) }
    mutating func encode(_ value: Int8) { array.items.append(number(value)) }
    mutating func encode(_ value: Int16) { array.items.append(number(value)) }
    mutating func encode(_ value: Int32) { array.items.append(number(value)) }
    mutating func encode(_ value: Int64) { array.items.append(number(value)) }
    mutating func encode(_ value: UInt) { array.items.append(number(value)) }
    mutating func encode(_ value: UInt8) { array.items.append(number(value)) }
    mutating func encode(_ value: UInt16) { array.items.append(number(value)) }
    mutating func encode(_ value: UInt32) { array.items.append(number(value)) }
    mutating func encode(_ value: UInt64) { array.items.append(number(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        array.items.append(try encodeValue(value, codingPath: nextPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let nested = EncodedObject()
        array.items.append(.object(nested))
        return KeyedEncodingContainer(OrderedKeyedContainer<NestedKey>(object: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let nested = EncodedArray()
        array.items.append(.array(nested))
        return OrderedUnkeyedContainer(array: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = OrderedJSONEncoder(codingPath: nextPath)
        array.items.append(.encoder(encoder))
        return encoder
    }
}

// MARK: Single value

private struct OrderedSingleValueContainer: SingleValueEncodingContainer {
    let encoder: OrderedJSONEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() { encoder.set(.null) }
    mutating func encode(_ value: Bool) { encoder.set(.bool(value)) }
    mutating func encode(_ value: String) { encoder.set(.string(value)) }
    mutating func encode(_ value: Double) throws { encoder.set(try number(value, codingPath)) }
    mutating func encode(_ value: Float) throws { encoder.set(try number(value, codingPath)) }
    mutating func encode(_ value: Int) { encoder.set(number(value)) }
    mutating func encode(_ value: Int8) { encoder.set(number(value)) }
    mutating func encode(_ value: Int16) { encoder.set(number(value)) }
    mutating func encode(_ value: Int32) { encoder.set(number(value)) }
    mutating func encode(_ value: Int64) { encoder.set(number(value)) }
    mutating func encode(_ value: UInt) { encoder.set(number(value)) }
    mutating func encode(_ value: UInt8) { encoder.set(number(value)) }
    mutating func encode(_ value: UInt16) { encoder.set(number(value)) }
    mutating func encode(_ value: UInt32) { encoder.set(number(value)) }
    mutating func encode(_ value: UInt64) { encoder.set(number(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.set(try encodeValue(value, codingPath: codingPath))
    }
}
