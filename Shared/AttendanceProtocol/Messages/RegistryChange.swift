import Foundation

/// A create or update of a registry entity, on the compacted `registry.changes` topic
/// (key: `<entityType>:<entityId>`).
///
/// Compaction keeps the latest value per key, so a consumer that starts late rebuilds its whole
/// cache by reading the topic from the beginning. A deletion is a tombstone: the key with a null
/// value (`RegistryKey.tombstone`), which compaction eventually removes along with the key.
/// Consumers read records through `RegistryRecord.decode(key:value:)`, which understands both.
public struct RegistryChange: TopicMessage {
    public static let topic = Topic.registryChanges
    public static let schemaVersion = 1

    public var entityType: RegistryEntityType
    public var entityId: String
    public var op: RegistryOperation
    /// Grows with every change of the entity; a consumer keeps the highest it has seen.
    public var version: Int64
    public var changedAt: Date
    /// The entity as the registry serves it; absent for `delete`.
    public var payload: JSONValue?

    public init(
        entityType: RegistryEntityType, entityId: String, op: RegistryOperation = .upsert, version: Int64,
        changedAt: Date, payload: JSONValue?
    ) {
        self.entityType = entityType
        self.entityId = entityId
        self.op = op
        self.version = version
        self.changedAt = changedAt
        self.payload = payload
    }

    /// An upsert carrying `entity` as its payload.
    public static func upsert<Entity: Encodable>(
        _ entityType: RegistryEntityType, id: String, version: Int64, changedAt: Date, entity: Entity
    ) throws(ProtocolEncodingError) -> RegistryChange {
        RegistryChange(
            entityType: entityType, entityId: id, op: .upsert, version: version, changedAt: changedAt,
            payload: try JSONValue(encoding: entity)
        )
    }

    public var key: RegistryKey { RegistryKey(entityType: entityType, entityId: entityId) }

    public var partitionKey: PartitionKey { .registryChange(key) }

    /// Decodes the payload as the registry's entity type.
    public func decodePayload<Entity: Decodable>(as type: Entity.Type = Entity.self) throws(ProtocolDecodingError) -> Entity {
        guard let payload else { throw .missingField(path: "payload") }
        do {
            return try payload.decode(as: type)
        } catch {
            throw error.prefixed(with: "payload")
        }
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, entityType, entityId, op, version, changedAt, payload
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        entityType = try c.decode(RegistryEntityType.self, forKey: .entityType)
        entityId = try c.decode(String.self, forKey: .entityId)
        op = try c.decode(RegistryOperation.self, forKey: .op)
        version = try c.decode(Int64.self, forKey: .version)
        changedAt = try c.decodeTimestamp(forKey: .changedAt)
        payload = try c.decodeIfPresent(JSONValue.self, forKey: .payload)
        if payload == .null { payload = nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(entityType, forKey: .entityType)
        try c.encode(entityId, forKey: .entityId)
        try c.encode(op, forKey: .op)
        try c.encode(version, forKey: .version)
        try c.encodeTimestamp(changedAt, forKey: .changedAt)
        try c.encodeIfPresent(payload, forKey: .payload)
    }
}

/// The kinds of registry entity. Open: a consumer skips entity types it does not know.
public enum RegistryEntityType: OpenWireEnum {
    case organization, site, gate, beacon, device, user, policy
    case unrecognized(String)

    public static let knownValues: [RegistryEntityType] = [.organization, .site, .gate, .beacon, .device, .user, .policy]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .organization: return "organization"
        case .site: return "site"
        case .gate: return "gate"
        case .beacon: return "beacon"
        case .device: return "device"
        case .user: return "user"
        case .policy: return "policy"
        case .unrecognized(let raw): return raw
        }
    }
}

public enum RegistryOperation: String, ClosedWireEnum {
    case upsert
    /// Published as a tombstone; a message with this op is understood the same way.
    case delete
}

/// The key of a registry record: `<entityType>:<entityId>`.
public struct RegistryKey: Hashable, Sendable, CustomStringConvertible {
    public var entityType: RegistryEntityType
    public var entityId: String

    public init(entityType: RegistryEntityType, entityId: String) {
        self.entityType = entityType
        self.entityId = entityId
    }

    /// Parses `site:S_HQ`; the id may itself contain colons.
    public init?(_ key: String) {
        guard let colon = key.firstIndex(of: ":") else { return nil }
        let type = key[..<colon]
        let id = key[key.index(after: colon)...]
        guard !type.isEmpty, !id.isEmpty else { return nil }
        self.init(entityType: .value(for: String(type)), entityId: String(id))
    }

    public var description: String { "\(entityType.rawValue):\(entityId)" }

    /// The record that deletes this entity from the compacted topic: its key with a null value.
    public var tombstone: TopicRecord {
        TopicRecord(topic: .registryChanges, key: description, value: nil)
    }
}

/// One record of `registry.changes` as a consumer sees it.
public enum RegistryRecord: Hashable, Sendable {
    case upsert(RegistryChange)
    case delete(RegistryKey)

    public var key: RegistryKey {
        switch self {
        case .upsert(let change): return change.key
        case .delete(let key): return key
        }
    }

    /// Reads a consumed record: a null value is a tombstone for its key; an `op: delete` message
    /// is a deletion too.
    public static func decode(
        key: String, value: [UInt8]?, codec: ProtocolCodec = .wire
    ) throws(ProtocolDecodingError) -> RegistryRecord {
        guard let value else {
            guard let parsed = RegistryKey(key) else {
                throw .invalidValue(path: "key", reason: "\"\(key)\" is not <entityType>:<entityId>")
            }
            return .delete(parsed)
        }
        let change = try codec.decode(RegistryChange.self, from: value)
        return change.op == .delete ? .delete(change.key) : .upsert(change)
    }
}

extension ProtocolDecodingError {
    /// The same error with `prefix` in front of its path (for errors inside an embedded document).
    func prefixed(with prefix: String) -> ProtocolDecodingError {
        func join(_ path: String) -> String {
            path.isEmpty ? prefix : path.hasPrefix("[") ? prefix + path : prefix + "." + path
        }
        switch self {
        case .missingField(let path): return .missingField(path: join(path))
        case .wrongType(let path, let expected): return .wrongType(path: join(path), expected: expected)
        case .invalidValue(let path, let reason): return .invalidValue(path: join(path), reason: reason)
        case .malformedJSON, .unsupportedSchemaVersion: return self
        }
    }
}

/// The two records that frame a refill of `registry.changes` after the broker lost it: the
/// registry publishes `feed:refill-started`, then the latest change of every entity again, then
/// `feed:refill-ended`, whose payload names the start's version (`startedVersion`). A reader that
/// has read a start and not its end holds part of the registry only. Readers that keep entities
/// ignore the `feed` type.
public enum RegistryFeedRefill {
    public static let entityType = "feed"
    public static let startedId = "refill-started"
    public static let endedId = "refill-ended"
    public static let startedVersionField = "startedVersion"
}
