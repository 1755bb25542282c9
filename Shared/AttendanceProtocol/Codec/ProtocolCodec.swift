import Foundation

/// Encodes and decodes every type of this module: the one place that fixes the wire format.
///
/// - Output is UTF-8 JSON with members in the order each type encodes them (the specified order
///   for the device payload), in one of three layouts: `.compact` for Kafka and HTTP, `.pretty`
///   for golden files and logs, `.canonical` (sorted members, no whitespace) for fingerprints.
/// - Timestamps are RFC 3339 UTC at millisecond precision (see `WireTimestamp`).
/// - Decoding is strict RFC 8259 JSON by default: duplicate member names are refused and every
///   failure is a `ProtocolDecodingError` naming the field. `allowsJSON5` accepts JSON5 (comments,
///   trailing commas) for hand-written files; it goes through Foundation's parser and is slower.
/// - Unknown members are ignored, so adding an optional field never needs a new schema version.
public struct ProtocolCodec: Sendable {
    public enum OutputStyle: Sendable, Hashable {
        case compact
        case pretty
        case canonical
    }

    public var outputStyle: OutputStyle
    public var allowsJSON5: Bool

    public init(outputStyle: OutputStyle = .compact, allowsJSON5: Bool = false) {
        self.outputStyle = outputStyle
        self.allowsJSON5 = allowsJSON5
    }

    /// Compact, strict: what producers and HTTP handlers use.
    public static let wire = ProtocolCodec()
    /// Indented with a trailing newline: golden files, logs, the admin CLI.
    public static let pretty = ProtocolCodec(outputStyle: .pretty)
    /// Sorted members, no whitespace: hash this for payload fingerprints.
    public static let canonical = ProtocolCodec(outputStyle: .canonical)

    // MARK: Encoding

    public func encode<T: Encodable>(_ value: T) throws(ProtocolEncodingError) -> [UInt8] {
        let tree: EncodedValue
        do {
            tree = try OrderedJSONEncoder.encode(value)
        } catch {
            throw Self.encodingError(from: error)
        }
        return write(tree)
    }

    /// An encoded tree's bytes in this codec's layout.
    func write(_ tree: EncodedValue) -> [UInt8] {
        JSONWriter.write(tree, layout: layout)
    }

    public func encodeToString<T: Encodable>(_ value: T) throws(ProtocolEncodingError) -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }

    /// The record to produce for a topic message: its topic, its partition key and its bytes.
    public func record<M: TopicMessage>(for message: M) throws(ProtocolEncodingError) -> TopicRecord {
        TopicRecord(topic: M.topic, key: message.partitionKey.value, value: try encode(message))
    }

    // MARK: Decoding

    public func decode<T: Decodable>(_ type: T.Type = T.self, from bytes: some DataProtocol) throws(ProtocolDecodingError) -> T {
        try decodeTree(type, from: allowsJSON5 ? try parseJSON5(bytes) : try parse(bytes).node)
    }

    /// Decodes `bytes`, and also returns the source bytes of one member of the top-level object
    /// (nil when absent): a consumer can store or forward a nested message exactly as it arrived
    /// instead of encoding it again. Strict JSON (the wire format) whatever `allowsJSON5` says.
    public func decode<T: Decodable>(
        _ type: T.Type = T.self, from bytes: [UInt8], keepingSourceOf member: String
    ) throws(ProtocolDecodingError) -> (value: T, memberSource: ArraySlice<UInt8>?) {
        let (node, range) = try parse(bytes, capturing: member)
        return (try decodeTree(type, from: node), range.map { bytes[$0] })
    }

    public func decode<T: Decodable>(_ type: T.Type = T.self, from text: String) throws(ProtocolDecodingError) -> T {
        try decode(type, from: Array(text.utf8))
    }

    // MARK: Internals

    private var layout: JSONWriter.Layout {
        switch outputStyle {
        case .compact: return .compact
        case .pretty: return .pretty
        case .canonical: return .canonical
        }
    }

    /// Strict JSON; with `member`, also where the top-level object's member of that name lies, as
    /// offsets from the first byte.
    private func parse(
        _ bytes: some DataProtocol, capturing member: String? = nil
    ) throws(ProtocolDecodingError) -> (node: JSONNode, memberRange: Range<Int>?) {
        typealias Parsed = Result<(node: JSONNode, memberRange: Range<Int>?), JSONParser.SyntaxError>
        let parsed: Parsed =
            bytes.withContiguousStorageIfAvailable { buffer in
                Parsed { () throws(JSONParser.SyntaxError) in try JSONParser.parse(buffer, capturing: member) }
            }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Parsed { () throws(JSONParser.SyntaxError) in try JSONParser.parse(buffer, capturing: member) }
            }
        switch parsed {
        case .success(let result): return result
        case .failure(let error): throw .malformedJSON(reason: error.reason)
        }
    }

    private func decodeTree<T: Decodable>(_ type: T.Type, from node: JSONNode) throws(ProtocolDecodingError) -> T {
        do {
            return try TreeDecoder.decode(type, from: node)
        } catch {
            throw CodingPath.decodingError(from: error)
        }
    }

    private func parseJSON5(_ bytes: some DataProtocol) throws(ProtocolDecodingError) -> JSONNode {
        let decoder = JSONDecoder()
        decoder.allowsJSON5 = true
        let value: JSONValue
        do {
            value = try decoder.decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw .malformedJSON(reason: "not valid JSON5")
        }
        return value.node
    }

    static func encodingError(from error: any Error) -> ProtocolEncodingError {
        if let error = error as? ProtocolEncodingError { return error }
        if case EncodingError.invalidValue(_, let context) = error {
            return ProtocolEncodingError(path: CodingPath.string(context.codingPath), reason: context.debugDescription)
        }
        return ProtocolEncodingError(path: "", reason: String(describing: error))
    }
}

/// A message ready for a Kafka producer: topic, partition key and value (`nil` is a tombstone).
public struct TopicRecord: Hashable, Sendable {
    public var topic: Topic
    public var key: String
    public var value: [UInt8]?
}
