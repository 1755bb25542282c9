import CRdKafka
import Logging

/// Topic administration. Uses its own lightweight handle; every call blocks off the cooperative pool.
public final class KafkaAdmin: Sendable {
    private let handle: RdKafkaHandle

    public init(configuration: KafkaConfiguration, logger: Logger) throws(KafkaError) {
        var properties = configuration.baseProperties
        properties.merge(configuration.properties) { _, override in override }
        handle = try RdKafkaHandle(
            kind: RD_KAFKA_PRODUCER, properties: properties, callbacks: RdKafkaCallbacks(logger: logger), label: "admin")
    }

    /// Runs `body` off the cooperative pool, then serves the handle's queue: nothing else polls an admin
    /// handle, and the error events a broker outage queues on it would otherwise pile up for as long as
    /// it lives (the broker watch keeps one for the whole process).
    private func serving<T: Sendable>(_ body: @escaping @Sendable () throws(KafkaError) -> T) async throws(KafkaError) -> T {
        try await handle.blocking { [handle] () throws(KafkaError) -> T in
            defer { rd_kafka_poll(handle.pointer, 0) }
            return try body()
        }
    }

    /// Creates the topics that don't exist; existing topics are left as they are.
    /// - Returns: the names of the topics created by this call.
    @discardableResult
    public func createTopics(_ specs: [KafkaTopicSpec], timeoutMs: Int32 = 15_000) async throws(KafkaError) -> [String] {
        guard !specs.isEmpty else { return [] }
        return try await serving { [handle] () throws(KafkaError) -> [String] in
            var newTopics: [OpaquePointer?] = []
            defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
            var errstr = [CChar](repeating: 0, count: 512)
            for spec in specs {
                guard let topic = rd_kafka_NewTopic_new(spec.name, spec.partitions, spec.replicationFactor, &errstr, errstr.count) else {
                    throw KafkaError.configuration("topic \(spec.name): \(String(cBuffer: errstr))")
                }
                newTopics.append(topic)
                for (key, value) in spec.config.sorted(by: { $0.key < $1.key }) {
                    let err = rd_kafka_NewTopic_set_config(topic, key, value)
                    guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                        throw KafkaError.from(code: err, message: "topic \(spec.name) \(key)=\(value)")
                    }
                }
            }
            let resultQueue = rd_kafka_queue_new(handle.pointer)
            defer { rd_kafka_queue_destroy(resultQueue) }
            let options = rd_kafka_AdminOptions_new(handle.pointer, RD_KAFKA_ADMIN_OP_CREATETOPICS)
            defer { rd_kafka_AdminOptions_destroy(options) }
            rd_kafka_AdminOptions_set_operation_timeout(options, timeoutMs, nil, 0)
            rd_kafka_AdminOptions_set_request_timeout(options, timeoutMs, nil, 0)
            newTopics.withUnsafeMutableBufferPointer { buffer in
                rd_kafka_CreateTopics(handle.pointer, buffer.baseAddress, buffer.count, options, resultQueue)
            }
            guard let event = rd_kafka_queue_poll(resultQueue, timeoutMs + 1_000) else {
                throw KafkaError(
                    kind: .deliveryTimeout, message: "CreateTopics got no answer in \(timeoutMs) ms", isFatal: false, isRetriable: true)
            }
            defer { rd_kafka_event_destroy(event) }
            let eventError = rd_kafka_event_error(event)
            guard eventError == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError.from(code: eventError, message: String(cString: rd_kafka_event_error_string(event)))
            }
            guard let result = rd_kafka_event_CreateTopics_result(event) else { return [] }
            var count = 0
            guard let topicResults = rd_kafka_CreateTopics_result_topics(result, &count) else { return [] }
            var created: [String] = []
            for i in 0..<count {
                guard let topicResult = topicResults[i] else { continue }
                let name = String(cString: rd_kafka_topic_result_name(topicResult))
                let err = rd_kafka_topic_result_error(topicResult)
                switch err {
                case RD_KAFKA_RESP_ERR_NO_ERROR: created.append(name)
                case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS: continue
                default:
                    let message = rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) } ?? ""
                    throw KafkaError.from(code: err, message: "create topic \(name): \(message)")
                }
            }
            return created
        }
    }

    /// Topic names and partition counts the cluster reports.
    public func topics(timeoutMs: Int32 = 5_000) async throws(KafkaError) -> [String: Int32] {
        try await serving { [handle] () throws(KafkaError) in try handle.metadata(timeoutMs: timeoutMs) }
    }

    public func watermarks(_ partition: TopicPartition) async throws(KafkaError) -> KafkaWatermarks {
        try await serving { [handle] () throws(KafkaError) in try handle.watermarks(partition) }
    }
}

/// librdkafka's in-process mock cluster, for unit tests that need a broker but not a real one.
public final class KafkaMockCluster: Sendable {
    private let owner: RdKafkaHandle
    private let cluster: MockClusterPointer
    public let bootstrapServers: String

    public init(brokers: Int32 = 1, logger: Logger = Logger(label: "kafka.mock")) throws(KafkaError) {
        owner = try RdKafkaHandle(kind: RD_KAFKA_PRODUCER, properties: [:], callbacks: RdKafkaCallbacks(logger: logger), label: "mock")
        guard let pointer = rd_kafka_mock_cluster_new(owner.pointer, brokers) else {
            throw KafkaError.configuration("rd_kafka_mock_cluster_new failed")
        }
        cluster = MockClusterPointer(pointer: pointer)
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(pointer))
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster.pointer)
    }

    public func createTopic(_ name: String, partitions: Int32, replicationFactor: Int32 = 1) throws(KafkaError) {
        let err = rd_kafka_mock_topic_create(cluster.pointer, name, partitions, replicationFactor)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
    }

    /// Makes the next `count` produce requests to `topic`'s leader fail with `error` (to test retries).
    public func failNextProduceRequests(count: Int, with error: Int32) {
        failNextRequests(apiKey: 0, count: count, with: error)
    }

    /// Makes the next `count` offset commits fail with `error`.
    public func failNextOffsetCommits(count: Int, with error: Int32) {
        failNextRequests(apiKey: 8, count: count, with: error)
    }

    private func failNextRequests(apiKey: Int16, count: Int, with error: Int32) {
        var errors = [rd_kafka_resp_err_t](repeating: rd_kafka_resp_err_t(rawValue: error), count: count)
        rd_kafka_mock_push_request_errors_array(cluster.pointer, apiKey, errors.count, &errors)
    }
}

struct MockClusterPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}
