import Foundation

// MARK: Schema versions

/// A payload with a schema version: a whole number that changes only for incompatible changes.
///
/// Adding an optional field is compatible and keeps the version (decoders ignore unknown fields);
/// renaming, removing or retyping a field, or adding a value to a closed enum, bumps it.
/// A reader accepts every version up to its own and refuses newer ones with
/// `ProtocolDecodingError.unsupportedSchemaVersion`, so an old consumer dead-letters a message
/// from a newer producer instead of misreading it.
public protocol SchemaVersioned: Sendable {
    /// The version this build writes and the newest it reads.
    static var schemaVersion: Int { get }
}

/// The wire name of the version field in every message: `"schemaVersion"`.
public let schemaVersionFieldName = "schemaVersion"

extension KeyedDecodingContainer {
    /// Reads the version field first and refuses versions newer than `supported`.
    ///
    /// Kafka messages must carry it (`required`); REST bodies may omit it, since their version is the
    /// URL's (`/v1`) and the specified device payload has none, and then the current version is assumed.
    func decodeSchemaVersion(forKey key: Key, supported: Int, required: Bool) throws -> Int {
        let found: Int
        if required {
            found = try decode(Int.self, forKey: key)
        } else {
            found = try decodeIfPresent(Int.self, forKey: key) ?? supported
        }
        guard found >= 1 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "schema versions start at 1, found \(found)")
        }
        guard found <= supported else {
            throw ProtocolDecodingError.unsupportedSchemaVersion(found: found, supported: supported)
        }
        return found
    }
}

// MARK: Timestamps

extension KeyedDecodingContainer {
    /// Reads an RFC 3339 timestamp string (see `WireTimestamp`), whatever the decoder's date strategy.
    func decodeTimestamp(forKey key: Key) throws -> Date {
        let text = try decode(String.self, forKey: key)
        guard let date = WireTimestamp.date(from: text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self,
                debugDescription: "\"\(text)\" is not an RFC 3339 timestamp like 2025-09-18T06:35:12Z"
            )
        }
        return date
    }

    func decodeTimestampIfPresent(forKey key: Key) throws -> Date? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeTimestamp(forKey: key)
    }
}

extension KeyedEncodingContainer {
    /// Writes an RFC 3339 timestamp string, whatever the encoder's date strategy.
    mutating func encodeTimestamp(_ date: Date, forKey key: Key) throws {
        try encode(WireTimestamp.string(from: date), forKey: key)
    }

    mutating func encodeTimestampIfPresent(_ date: Date?, forKey key: Key) throws {
        guard let date else { return }
        try encodeTimestamp(date, forKey: key)
    }
}

// MARK: String enumerations

/// A closed set of wire values: an unknown value is an error naming the field and the allowed values.
///
/// Used where a new value changes meaning (event type, verdict outcome): a reader must not guess.
public protocol ClosedWireEnum: RawRepresentable<String>, CaseIterable, Codable, Hashable, Sendable {}

extension ClosedWireEnum {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let value = Self(rawValue: raw) else {
            let allowed = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(raw)\" is not one of: \(allowed)")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// An open set of wire values: unknown values are kept (and re-encoded) instead of failing.
///
/// Used where newer producers may add values that older readers can safely pass through or
/// ignore: app actions, telemetry event names, registry entity types. Build values from text with
/// `init(rawValue:)` / `value(for:)`, which map known spellings to their cases; `.unrecognized` is
/// for values this build does not know (`.unrecognized("none")` is not `.noAction`).
public protocol OpenWireEnum: RawRepresentable<String>, Codable, Hashable, Sendable {
    /// The values this build knows, in documentation order.
    static var knownValues: [Self] { get }
    /// Wraps a value this build does not know.
    static func unrecognized(_ rawValue: String) -> Self
}

extension OpenWireEnum {
    /// Looks `rawValue` up among the known values, keeping unknown ones.
    public static func value(for rawValue: String) -> Self {
        knownValues.first { $0.rawValue == rawValue } ?? unrecognized(rawValue)
    }

    /// Whether this is a value this build knows.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self = Self.value(for: try container.decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A value JSON carries as its text (`CalendarDate`, `TimeOfDay`): decoded with `init?(_:)`, encoded
/// as its `description`; text that does not parse is a data error that says what was expected.
public protocol TextCodable: Codable, CustomStringConvertible {
    init?(_ text: String)
    /// What the text looks like, for the error: "a date like 2025-09-18".
    static var textFormat: String { get }
}

extension TextCodable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = Self(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not \(Self.textFormat)"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
