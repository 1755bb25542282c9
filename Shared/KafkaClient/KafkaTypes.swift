import CRdKafka

/// A topic partition; the unit of ordering and of offset bookkeeping.
public struct TopicPartition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let topic: String
    public let partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }

    public static func < (lhs: TopicPartition, rhs: TopicPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// A message read from a topic. `value == nil` is a tombstone (a delete on a compacted topic).
public struct KafkaMessage: Sendable, Hashable {
    public let topic: String
    public let partition: Int32
    public let offset: Int64
    public let key: [UInt8]?
    public let value: [UInt8]?
    /// Milliseconds since the epoch (create or log-append time), nil when the broker sent none.
    public let timestampMs: Int64?

    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?, timestampMs: Int64? = nil) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.timestampMs = timestampMs
    }

    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }
}

/// A message to produce. Messages with the same key land in the same partition, in order.
public struct KafkaOutgoingMessage: Sendable, Hashable {
    public var topic: String
    public var key: [UInt8]?
    /// nil produces a tombstone.
    public var value: [UInt8]?
    /// An explicit partition, or nil to let the partitioner hash the key.
    public var partition: Int32?

    public init(topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32? = nil) {
        self.topic = topic
        self.key = key
        self.value = value
        self.partition = partition
    }

    public init(topic: String, key: String, value: [UInt8]?, partition: Int32? = nil) {
        self.init(topic: topic, key: Array(key.utf8), value: value, partition: partition)
    }
}

/// What the broker said about one produced message.
public struct KafkaDeliveryReport: Sendable, Hashable {
    public let topic: String
    public let partition: Int32
    public let offset: Int64
    public let error: KafkaError?

    public var isDelivered: Bool { error == nil }
}

/// Where a consumer starts reading a partition.
public enum KafkaStartOffset: Sendable, Hashable {
    /// The group's committed offset (or `auto.offset.reset` when there is none).
    case committed
    case beginning
    case end
    /// The next offset to read, as stored by the owner (e.g. in PostgreSQL with its results).
    case offset(Int64)

    var rawValue: Int64 {
        switch self {
        case .committed: return -1000 // RD_KAFKA_OFFSET_STORED
        case .beginning: return -2 // RD_KAFKA_OFFSET_BEGINNING
        case .end: return -1 // RD_KAFKA_OFFSET_END
        case .offset(let value): return value
        }
    }
}

/// Low and high watermarks of a partition: `high` is the offset the next produced message gets.
public struct KafkaWatermarks: Sendable, Hashable {
    public let low: Int64
    public let high: Int64
}

extension Array where Element == UInt8 {
    init(copying pointer: UnsafeRawPointer?, count: Int) {
        guard let pointer, count > 0 else {
            self = []
            return
        }
        self = Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
