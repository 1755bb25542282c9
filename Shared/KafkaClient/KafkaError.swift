import CRdKafka

/// Every failure of the Kafka layer, classified the way callers need to act on it:
/// a retriable error may succeed if tried again (same idempotency key, same message);
/// a fatal one means the client instance is unusable and must be recreated.
public struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// A configuration property was rejected by librdkafka.
        case configuration
        /// The broker or librdkafka reported an error code.
        case broker
        /// The producer's internal queue is full; back off and retry.
        case queueFull
        /// A message was not delivered within `delivery.timeout.ms`.
        case deliveryTimeout
        /// The client is shutting down or has shut down.
        case shutdown
        /// An idempotent producer hit an unrecoverable state (librdkafka's fatal error).
        case fatal
    }

    public let kind: Kind
    /// librdkafka's `rd_kafka_resp_err_t` raw value (0 when not applicable).
    public let code: Int32
    /// librdkafka's symbolic name for `code`, e.g. `_MSG_TIMED_OUT`.
    public let codeName: String
    public let message: String
    public let isFatal: Bool
    public let isRetriable: Bool

    public init(kind: Kind, code: Int32 = 0, codeName: String = "", message: String, isFatal: Bool, isRetriable: Bool) {
        self.kind = kind
        self.code = code
        self.codeName = codeName
        self.message = message
        self.isFatal = isFatal
        self.isRetriable = isRetriable
    }

    /// The broker no longer knows this client's group membership or producer id: after a broker
    /// that lost its state (or a fenced producer), the process must start afresh.
    public var meansBrokerStateLost: Bool {
        let lost: Set<rd_kafka_resp_err_t> = [
            RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID, RD_KAFKA_RESP_ERR__FENCED,
            RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
        ]
        return lost.contains(rd_kafka_resp_err_t(rawValue: code))
    }

    public var description: String {
        let cls = isFatal ? "fatal" : (isRetriable ? "retriable" : "permanent")
        return codeName.isEmpty ? "kafka \(cls) error: \(message)" : "kafka \(cls) error \(codeName): \(message)"
    }

    static func configuration(_ message: String) -> KafkaError {
        KafkaError(kind: .configuration, message: message, isFatal: true, isRetriable: false)
    }

    static func shutdown(_ message: String = "the Kafka client is shutting down") -> KafkaError {
        KafkaError(kind: .shutdown, message: message, isFatal: false, isRetriable: true)
    }

    /// Classifies a librdkafka response code. librdkafka does not expose retriability for plain
    /// response codes, so the transient network/broker codes are listed explicitly.
    static func from(code err: rd_kafka_resp_err_t, message: String? = nil) -> KafkaError {
        let name = String(cString: rd_kafka_err2name(err))
        let text = message ?? String(cString: rd_kafka_err2str(err))
        let raw = err.rawValue
        switch err {
        case RD_KAFKA_RESP_ERR__QUEUE_FULL:
            return KafkaError(kind: .queueFull, code: raw, codeName: name, message: text, isFatal: false, isRetriable: true)
        case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
            return KafkaError(kind: .deliveryTimeout, code: raw, codeName: name, message: text, isFatal: false, isRetriable: true)
        case RD_KAFKA_RESP_ERR__FATAL, RD_KAFKA_RESP_ERR__FENCED, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
            RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
            return KafkaError(kind: .fatal, code: raw, codeName: name, message: text, isFatal: true, isRetriable: false)
        case RD_KAFKA_RESP_ERR__DESTROY:
            return KafkaError(kind: .shutdown, code: raw, codeName: name, message: text, isFatal: false, isRetriable: true)
        case RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__RESOLVE,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
            RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION, RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC,
            RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION, RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID,
            RD_KAFKA_RESP_ERR__WAIT_COORD, RD_KAFKA_RESP_ERR__IN_PROGRESS, RD_KAFKA_RESP_ERR__NO_OFFSET,
            RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR, RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
            return KafkaError(kind: .broker, code: raw, codeName: name, message: text, isFatal: false, isRetriable: true)
        default:
            return KafkaError(kind: .broker, code: raw, codeName: name, message: text, isFatal: false, isRetriable: false)
        }
    }

    /// Converts (and destroys) an `rd_kafka_error_t`, which carries its own fatal/retriable flags.
    static func consuming(_ error: OpaquePointer) -> KafkaError {
        defer { rd_kafka_error_destroy(error) }
        let code = rd_kafka_error_code(error)
        let fatal = rd_kafka_error_is_fatal(error) != 0
        let retriable = rd_kafka_error_is_retriable(error) != 0
        return KafkaError(
            kind: fatal ? .fatal : .broker,
            code: code.rawValue,
            codeName: String(cString: rd_kafka_err2name(code)),
            message: String(cString: rd_kafka_error_string(error)),
            isFatal: fatal,
            isRetriable: retriable
        )
    }
}
