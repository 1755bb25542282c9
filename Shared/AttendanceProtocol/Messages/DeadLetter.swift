import Foundation

/// A message a consumer could not process, on `attendance.dlq` (key: the original key).
///
/// The original bytes travel untouched (base64 on the wire) with where they came from and why
/// they failed, so an operator can inspect, fix and replay them. A consumer writes the dead letter
/// and moves on: a bad message never stops a partition and is never silently dropped.
public struct DeadLetter: TopicMessage {
    public static let topic = Topic.deadLetters
    public static let schemaVersion = 1

    /// The topic name it was consumed from (a string: it may be a topic this build does not know).
    public var sourceTopic: String
    public var partition: Int32
    public var offset: Int64
    /// The original key; `nil` when the record had none.
    public var key: String?
    /// The original value bytes.
    public var payload: Data
    public var reason: DeadLetterReason
    /// One readable line: the decoding error's description, or what the processor reported.
    public var detail: String
    /// The failing field's dotted path, when the failure is about one field.
    public var errorField: String?
    /// Which consumer gave up on it (service name and group).
    public var consumer: String
    public var failedAt: Date

    public init(
        sourceTopic: String, partition: Int32, offset: Int64, key: String?, payload: Data,
        reason: DeadLetterReason, detail: String, errorField: String? = nil, consumer: String, failedAt: Date
    ) {
        self.sourceTopic = sourceTopic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.payload = payload
        self.reason = reason
        self.detail = detail
        self.errorField = errorField
        self.consumer = consumer
        self.failedAt = failedAt
    }

    /// The dead letter for a record that failed to decode.
    public init(
        sourceTopic: String, partition: Int32, offset: Int64, key: String?, payload: Data,
        decodingError: ProtocolDecodingError, consumer: String, failedAt: Date
    ) {
        let reason: DeadLetterReason
        if case .unsupportedSchemaVersion = decodingError {
            reason = .unsupportedSchemaVersion
        } else {
            reason = .decodeFailed
        }
        self.init(
            sourceTopic: sourceTopic, partition: partition, offset: offset, key: key, payload: payload,
            reason: reason, detail: decodingError.description, errorField: decodingError.path,
            consumer: consumer, failedAt: failedAt
        )
    }

    /// The source topic, when it is one of ours.
    public var topic: Topic? { Topic(rawValue: sourceTopic) }

    /// The original key; a keyless record is keyed by its source partition so it still lands in order.
    public var partitionKey: PartitionKey {
        .deadLetter(originalKey: key ?? "\(sourceTopic)/\(partition)")
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, sourceTopic, partition, offset, key, payload, reason, detail, errorField, consumer, failedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        sourceTopic = try c.decode(String.self, forKey: .sourceTopic)
        partition = try c.decode(Int32.self, forKey: .partition)
        offset = try c.decode(Int64.self, forKey: .offset)
        key = try c.decodeIfPresent(String.self, forKey: .key)
        let base64 = try c.decode(String.self, forKey: .payload)
        guard let bytes = Data(base64Encoded: base64) else {
            throw DecodingError.dataCorruptedError(forKey: .payload, in: c, debugDescription: "not valid base64")
        }
        payload = bytes
        reason = try c.decode(DeadLetterReason.self, forKey: .reason)
        detail = try c.decode(String.self, forKey: .detail)
        errorField = try c.decodeIfPresent(String.self, forKey: .errorField)
        consumer = try c.decode(String.self, forKey: .consumer)
        failedAt = try c.decodeTimestamp(forKey: .failedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(sourceTopic, forKey: .sourceTopic)
        try c.encode(partition, forKey: .partition)
        try c.encode(offset, forKey: .offset)
        try c.encodeIfPresent(key, forKey: .key)
        try c.encode(payload.base64EncodedString(), forKey: .payload)
        try c.encode(reason, forKey: .reason)
        try c.encode(detail, forKey: .detail)
        try c.encodeIfPresent(errorField, forKey: .errorField)
        try c.encode(consumer, forKey: .consumer)
        try c.encodeTimestamp(failedAt, forKey: .failedAt)
    }
}

/// Why a message was dead-lettered. Open: consumers may add their own reasons.
public enum DeadLetterReason: OpenWireEnum {
    /// Not JSON, or not the expected shape (the detail names the field).
    case decodeFailed
    /// Written by a newer producer than this consumer understands.
    case unsupportedSchemaVersion
    /// Decoded, but its values are not acceptable.
    case validationFailed
    /// Decoded and valid, but processing failed permanently.
    case processingFailed
    case unrecognized(String)

    public static let knownValues: [DeadLetterReason] = [.decodeFailed, .unsupportedSchemaVersion, .validationFailed, .processingFailed]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .decodeFailed: return "decode_failed"
        case .unsupportedSchemaVersion: return "unsupported_schema_version"
        case .validationFailed: return "validation_failed"
        case .processingFailed: return "processing_failed"
        case .unrecognized(let raw): return raw
        }
    }
}
