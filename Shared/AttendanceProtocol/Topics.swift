/// Every Kafka topic of the platform. Topic names are spelled here and nowhere else.
public enum Topic: String, CaseIterable, Sendable {
    /// Device events as the gateway received them. Key: user id, so one user's punches stay in order.
    case rawEvents = "attendance.events.raw"
    /// Raw events with the policy decision. Key: user id (the merger's per-user order).
    case vettedEvents = "attendance.events.vetted"
    /// The final outcome of each request. Key: gateway instance, so each gateway finds the answers
    /// to its own waiting requests in order. Gateways read every partition (a group id of their own)
    /// and keep the verdicts whose `gatewayInstance` is theirs.
    case verdicts = "attendance.verdicts"
    /// Session opened / extended / soft exit / reopened / closed. Key: user id.
    case sessions = "attendance.sessions"
    /// Device telemetry batches. Key: device id.
    case deviceTelemetry = "device.telemetry"
    /// Every registry create, update and delete. Key: `<entityType>:<entityId>`; compacted, so the
    /// latest value per entity stays forever and a deleted entity leaves a tombstone (null value).
    case registryChanges = "registry.changes"
    /// Messages a consumer could not process, with the reason. Key: the original message's key.
    case deadLetters = "attendance.dlq"

    /// The topic name on the broker.
    public var name: String { rawValue }

    /// Partitions when the topic is created. Event topics share one count so a user's raw and vetted
    /// events land on the same partition number; the registry has one partition so a late consumer
    /// rebuilds its cache in the order the changes happened.
    public var defaultPartitionCount: Int32 {
        switch self {
        case .rawEvents, .vettedEvents, .sessions, .deviceTelemetry, .verdicts: return 6
        case .registryChanges, .deadLetters: return 1
        }
    }

    public var cleanupPolicy: CleanupPolicy {
        self == .registryChanges ? .compact : .delete
    }

    /// How long a `delete` topic keeps messages; `nil` for the compacted registry (forever).
    /// Raw and vetted events outlive the longest offline period devices retry over (72 h).
    public var retentionMilliseconds: Int64? {
        let hour: Int64 = 3_600_000
        switch self {
        case .rawEvents, .vettedEvents, .sessions: return 7 * 24 * hour
        case .verdicts: return 24 * hour
        case .deviceTelemetry: return 3 * 24 * hour
        case .deadLetters: return 14 * 24 * hour
        case .registryChanges: return nil
        }
    }

    /// Topic-level configuration for the admin client when it creates the topic.
    public var topicConfig: [String: String] {
        var config = ["cleanup.policy": cleanupPolicy.rawValue]
        if let retention = retentionMilliseconds { config["retention.ms"] = String(retention) }
        return config
    }

    /// What the partition key of this topic is, in words (for docs and the admin CLI).
    public var keyDescription: String {
        switch self {
        case .rawEvents, .vettedEvents, .sessions: return "userId"
        case .verdicts: return "gatewayInstance"
        case .deviceTelemetry: return "deviceId"
        case .registryChanges: return "<entityType>:<entityId>"
        case .deadLetters: return "the original message's key"
        }
    }

    /// The message type carried by this topic.
    public var messageType: any TopicMessage.Type {
        switch self {
        case .rawEvents: return RawEventEnvelope.self
        case .vettedEvents: return VettedEvent.self
        case .verdicts: return AttendanceVerdict.self
        case .sessions: return SessionChange.self
        case .deviceTelemetry: return DeviceTelemetryBatch.self
        case .registryChanges: return RegistryChange.self
        case .deadLetters: return DeadLetter.self
        }
    }
}

/// Kafka's `cleanup.policy`.
public enum CleanupPolicy: String, Sendable, Hashable {
    /// Old segments are deleted after the retention time.
    case delete
    /// Only the latest value per key is kept; a null value (tombstone) deletes the key.
    case compact
}

/// A partition key bound to its topic. The only way to build one is through the constructor for
/// that topic, so a producer cannot key a raw event by device or a verdict by user.
public struct PartitionKey: Hashable, Sendable, CustomStringConvertible {
    public let topic: Topic
    /// The key bytes as a string (UTF-8 on the wire).
    public let value: String

    private init(_ topic: Topic, _ value: String) {
        self.topic = topic
        self.value = value
    }

    public static func rawEvent(userId: String) -> PartitionKey { .init(.rawEvents, userId) }
    public static func vettedEvent(userId: String) -> PartitionKey { .init(.vettedEvents, userId) }
    public static func verdict(gatewayInstance: String) -> PartitionKey { .init(.verdicts, gatewayInstance) }
    public static func session(userId: String) -> PartitionKey { .init(.sessions, userId) }
    public static func deviceTelemetry(deviceId: String) -> PartitionKey { .init(.deviceTelemetry, deviceId) }
    public static func registryChange(_ key: RegistryKey) -> PartitionKey { .init(.registryChanges, key.description) }
    /// A dead letter keeps the key of the message it carries, so it lands beside its neighbours.
    public static func deadLetter(originalKey: String) -> PartitionKey { .init(.deadLetters, originalKey) }

    public var description: String { "\(topic.name)/\(value)" }
}

/// A message carried by one Kafka topic.
public protocol TopicMessage: SchemaVersioned, Codable, Hashable {
    /// The topic this message is produced to.
    static var topic: Topic { get }
    /// The key to produce it with; always for `Self.topic`.
    var partitionKey: PartitionKey { get }
}
