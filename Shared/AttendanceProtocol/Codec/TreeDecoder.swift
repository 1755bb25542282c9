import Foundation

/// A `Decoder` over a parsed `JSONNode` tree. It throws the standard `DecodingError`s (so custom
/// `init(from:)` code behaves as with any decoder) with exact coding paths, which
/// `ProtocolCodec` maps to `ProtocolDecodingError`.
struct TreeDecoder: Decoder {
    let node: JSONNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(node: JSONNode, codingPath: [any CodingKey] = []) {
        self.node = node
        self.codingPath = codingPath
    }

    /// Decodes a whole document.
    static func decode<T: Decodable>(_ type: T.Type, from node: JSONNode) throws -> T {
        try Scalar.value(type, node, [])
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = node else {
            throw typeMismatch([String: Any].self, node, codingPath)
        }
        return KeyedDecodingContainer(TreeKeyedContainer<Key>(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = node else {
            throw typeMismatch([Any].self, node, codingPath)
        }
        return TreeUnkeyedContainer(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        TreeSingleValueContainer(node: node, codingPath: codingPath)
    }
}

/// The key Foundation uses for array positions, so paths print as `rssiSeries[2]`.
struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String
    init(_ index: Int) {
        self.intValue = index
        self.stringValue = "Index \(index)"
    }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.init(intValue) }
}

private func typeMismatch(_ type: Any.Type, _ node: JSONNode, _ path: [any CodingKey]) -> DecodingError {
    .typeMismatch(type, .init(codingPath: path, debugDescription: "expected \(CodingPath.jsonTypeName(type)), found \(node.typeName)"))
}

// MARK: Scalar conversions shared by all containers

private enum Scalar {
    static func bool(_ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> Bool {
        guard case .bool(let value) = node else { throw mismatch(Bool.self, node, path()) }
        return value
    }

    static func string(_ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> String {
        guard case .string(let value) = node else { throw mismatch(String.self, node, path()) }
        return value
    }

    static func double(_ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> Double {
        guard case .number(let literal) = node else { throw mismatch(Double.self, node, path()) }
        guard let value = Double(literal), value.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "number \(literal) is out of range"))
        }
        return value
    }

    static func float(_ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> Float {
        let value = try double(node, path())
        let narrowed = Float(value)
        guard narrowed.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "number \(value) is out of range"))
        }
        return narrowed
    }

    /// Integers accept integral literals, including `1e3` and `2.0`, and refuse fractions by name.
    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> T {
        guard case .number(let literal) = node else { throw mismatch(T.self, node, path()) }
        if let value = T(literal) { return value }
        let isPlainInteger = !literal.contains(where: { $0 == "." || $0 == "e" || $0 == "E" })
        if !isPlainInteger, let double = Double(literal) {
            guard double.rounded() == double else {
                throw DecodingError.typeMismatch(T.self, .init(codingPath: path(), debugDescription: "expected integer, found \(literal)"))
            }
            if let value = T(exactly: double) { return value }
        }
        throw DecodingError.dataCorrupted(
            .init(
                codingPath: path(),
                debugDescription: "\(literal) is out of range for a \(T.bitWidth)-bit \(T.isSigned ? "signed" : "unsigned") integer"
            ))
    }

    static func mismatch(_ type: Any.Type, _ node: JSONNode, _ path: [any CodingKey]) -> DecodingError {
        if case .null = node {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "expected \(CodingPath.jsonTypeName(type)), found null"))
        }
        return typeMismatch(type, node, path)
    }

    /// Decodes any `Decodable`, short-cutting the types whose JSON shape is not their Codable shape.
    static func value<T: Decodable>(_ type: T.Type, _ node: JSONNode, _ path: @autoclosure () -> [any CodingKey]) throws -> T {
        if T.self == JSONValue.self {
            return try JSONValue(node: node, codingPath: path()) as! T
        }
        if T.self == Date.self {
            let text = try string(node, path())
            guard let date = WireTimestamp.date(from: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "\"\(text)\" is not an RFC 3339 timestamp"))
            }
            return date as! T
        }
        if T.self == Data.self {
            let text = try string(node, path())
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "not valid base64"))
            }
            return data as! T
        }
        if T.self == URL.self {
            let text = try string(node, path())
            guard let url = URL(string: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(), debugDescription: "\"\(text)\" is not a URL"))
            }
            return url as! T
        }
        return try T(from: TreeDecoder(node: node, codingPath: path()))
    }
}

// MARK: Keyed

private struct TreeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObjectNode
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.members.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func node(_ key: Key) throws -> JSONNode {
        guard let node = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
        }
        return node
    }

    private func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try node(key) { return true }
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Scalar.bool(node(key), path(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Scalar.string(node(key), path(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Scalar.double(node(key), path(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try Scalar.float(node(key), path(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Scalar.integer(type, node(key), path(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Scalar.integer(type, node(key), path(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try Scalar.value(type, node(key), path(key)) }

    // One lookup per optional member: the protocol's default implementations look the key up three
    // times (contains, decodeNil, decode) through the type-erased box, a seventh of a large decode.
    private func presentNode(_ key: Key) -> JSONNode? {
        guard let node = object[key.stringValue] else { return nil }
        if case .null = node { return nil }
        return node
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try presentNode(key).map { try Scalar.bool($0, path(key)) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try presentNode(key).map { try Scalar.string($0, path(key)) }
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try presentNode(key).map { try Scalar.double($0, path(key)) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        try presentNode(key).map { try Scalar.integer(type, $0, path(key)) }
    }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
        try presentNode(key).map { try Scalar.integer(type, $0, path(key)) }
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        try presentNode(key).map { try Scalar.integer(type, $0, path(key)) }
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try presentNode(key).map { try Scalar.value(type, $0, path(key)) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try TreeDecoder(node: node(key), codingPath: path(key)).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TreeDecoder(node: node(key), codingPath: path(key)).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        TreeDecoder(node: object["super"] ?? .null, codingPath: codingPath)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        TreeDecoder(node: object[key.stringValue] ?? .null, codingPath: path(key))
    }
}

// MARK: Unkeyed

private struct TreeUnkeyedContainer: UnkeyedDecodingContainer {
    let items: [JSONNode]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    /// Decodes the current element; its path is only built when something fails.
    private mutating func next<T>(_ body: (JSONNode, @autoclosure () -> [any CodingKey]) throws -> T) throws -> T {
        let index = currentIndex
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                T.self, .init(codingPath: codingPath + [IndexKey(index)], debugDescription: "array has no more elements"))
        }
        let value = try body(items[index], codingPath + [IndexKey(index)])
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any?.self, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "array has no more elements"))
        }
        if case .null = items[currentIndex] {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try Scalar.bool($0, $1()) } }
    mutating func decode(_ type: String.Type) throws -> String { try next { try Scalar.string($0, $1()) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next { try Scalar.double($0, $1()) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next { try Scalar.float($0, $1()) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try Scalar.integer(type, $0, $1()) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try Scalar.value(type, $0, $1()) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next { try TreeDecoder(node: $0, codingPath: $1()).container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next { try TreeDecoder(node: $0, codingPath: $1()).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next { TreeDecoder(node: $0, codingPath: $1()) }
    }
}

// MARK: Single value

private struct TreeSingleValueContainer: SingleValueDecodingContainer {
    let node: JSONNode
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool {
        if case .null = node { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try Scalar.bool(node, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Scalar.string(node, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Scalar.double(node, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try Scalar.float(node, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Scalar.integer(type, node, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Scalar.integer(type, node, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Scalar.value(type, node, codingPath) }
}
