import CRdKafka
import Dispatch
import Logging
import Synchronization

/// State that librdkafka's callbacks reach through the configuration opaque. Callbacks run on
/// librdkafka's own threads (log, error) or on the thread that polls (rebalance), so everything
/// here is Sendable.
final class RdKafkaCallbacks: Sendable {
    typealias RebalanceHandler =
        @Sendable (
            _ handle: OpaquePointer, _ event: rd_kafka_resp_err_t, _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
        ) -> Void

    let logger: Logger
    let rebalance: RebalanceHandler?
    /// The first fatal error librdkafka reported; once set, the client refuses new work.
    let fatalError = Mutex<KafkaError?>(nil)

    init(logger: Logger, rebalance: RebalanceHandler? = nil) {
        self.logger = logger
        self.rebalance = rebalance
    }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> RdKafkaCallbacks? {
        guard let opaque else { return nil }
        return Unmanaged<RdKafkaCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }
}

/// Owns one `rd_kafka_t`. librdkafka handles are thread-safe; `@unchecked` because the raw pointer
/// is only freed in `deinit`, after every user is gone.
final class RdKafkaHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let callbacks: RdKafkaCallbacks
    /// Blocking librdkafka calls (poll, flush, commit, metadata, close) run here, never on the
    /// cooperative thread pool.
    let blockingQueue: DispatchQueue

    init(
        kind: rd_kafka_type_t,
        properties: [String: String],
        callbacks: RdKafkaCallbacks,
        label: String,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) {
        guard let conf = rd_kafka_conf_new() else { throw KafkaError.configuration("rd_kafka_conf_new failed") }
        var errstr = [CChar](repeating: 0, count: 512)
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            if rd_kafka_conf_set(conf, name, value, &errstr, errstr.count) != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError.configuration("\(name)=\(value): \(String(cBuffer: errstr))")
            }
        }
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbacks).toOpaque())
        rd_kafka_conf_set_log_cb(conf) { handle, level, facility, message in
            guard let handle, let callbacks = RdKafkaCallbacks.from(rd_kafka_opaque(handle)) else { return }
            let text = message.map { String(cString: $0) } ?? ""
            let fac = facility.map { String(cString: $0) } ?? ""
            callbacks.logger.log(level: Logger.Level(syslog: level), "librdkafka: \(text)", metadata: ["rdkafka.facility": .string(fac)])
        }
        rd_kafka_conf_set_error_cb(conf) { handle, code, reason, opaque in
            guard let callbacks = RdKafkaCallbacks.from(opaque) else { return }
            let text = reason.map { String(cString: $0) } ?? ""
            let err = rd_kafka_resp_err_t(rawValue: code)
            if err == RD_KAFKA_RESP_ERR__FATAL, let handle {
                RdKafkaHandle.recordFatalError(handle, callbacks)
            } else {
                // Transport errors are common and recovered from automatically (e.g. broker restart).
                callbacks.logger.warning("kafka error", metadata: ["error": .string("\(String(cString: rd_kafka_err2name(err))): \(text)")])
            }
        }
        if callbacks.rebalance != nil {
            rd_kafka_conf_set_rebalance_cb(conf) { handle, err, partitions, opaque in
                guard let handle, let partitions, let callbacks = RdKafkaCallbacks.from(opaque) else { return }
                callbacks.rebalance?(handle, err, partitions)
            }
        }
        configure(conf)
        guard let handle = rd_kafka_new(kind, conf, &errstr, errstr.count) else {
            // rd_kafka_new only takes ownership of conf on success.
            rd_kafka_conf_destroy(conf)
            throw KafkaError.configuration(String(cBuffer: errstr))
        }
        self.pointer = handle
        self.callbacks = callbacks
        self.blockingQueue = DispatchQueue(label: "kafka.\(label)")
    }

    deinit {
        // rd_kafka_destroy joins librdkafka's threads, so it runs on the handle's queue, never on the
        // cooperative pool where the last reference is often dropped (a short-lived admin client at the
        // end of an async function). The callbacks live until it returns: its threads may still call them.
        nonisolated(unsafe) let pointer = self.pointer
        let callbacks = self.callbacks
        blockingQueue.async {
            withExtendedLifetime(callbacks) { rd_kafka_destroy(pointer) }
        }
    }

    /// Runs a blocking librdkafka call on this handle's queue and awaits it.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(KafkaError) -> T) async throws(KafkaError) -> T {
        let result: Result<T, KafkaError> = await withCheckedContinuation { continuation in
            blockingQueue.async {
                continuation.resume(returning: Result { () throws(KafkaError) -> T in try body() })
            }
        }
        return try result.get()
    }

    var fatalError: KafkaError? { callbacks.fatalError.withLock { $0 } }

    /// Keeps the handle's fatal error (the first one) for `fatalError`. A producer learns of it from the
    /// error callback; a group consumer from a message carrying `RD_KAFKA_RESP_ERR__FATAL` on its queue.
    func recordFatalError() { Self.recordFatalError(pointer, callbacks) }

    fileprivate static func recordFatalError(_ handle: OpaquePointer, _ callbacks: RdKafkaCallbacks) {
        var buf = [CChar](repeating: 0, count: 512)
        let original = rd_kafka_fatal_error(handle, &buf, buf.count)
        let fatal = KafkaError(
            kind: .fatal, code: original.rawValue, codeName: String(cString: rd_kafka_err2name(original)),
            message: String(cBuffer: buf), isFatal: true, isRetriable: false
        )
        callbacks.fatalError.withLock { if $0 == nil { $0 = fatal } }
        callbacks.logger.critical("kafka fatal error", metadata: ["error": .string(fatal.description)])
    }

    /// Low and high watermarks as the broker knows them (a network round trip).
    func watermarks(_ tp: TopicPartition, timeoutMs: Int32 = 5_000) throws(KafkaError) -> KafkaWatermarks {
        var low: Int64 = 0
        var high: Int64 = 0
        let err = rd_kafka_query_watermark_offsets(pointer, tp.topic, tp.partition, &low, &high, timeoutMs)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
        return KafkaWatermarks(low: low, high: high)
    }

    /// Topic names and partition counts the cluster reports.
    func metadata(timeoutMs: Int32) throws(KafkaError) -> [String: Int32] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(pointer, 1, nil, &metadata, timeoutMs)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError.from(code: err) }
        defer { rd_kafka_metadata_destroy(metadata) }
        var topics: [String: Int32] = [:]
        for i in 0..<Int(metadata.pointee.topic_cnt) {
            let topic = metadata.pointee.topics[i]
            guard topic.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
            topics[String(cString: topic.topic)] = topic.partition_cnt
        }
        return topics
    }
}

extension Logger.Level {
    /// librdkafka logs with syslog levels (0 emerg ... 7 debug).
    init(syslog level: Int32) {
        switch level {
        case ...2: self = .critical
        case 3: self = .error
        case 4: self = .warning
        case 5: self = .notice
        case 6: self = .info
        default: self = .debug
        }
    }
}

/// librdkafka's version, e.g. "2.8.0". The broker needs >= 2.8 (ApiVersions v3).
public var librdkafkaVersion: String { String(cString: rd_kafka_version_str()) }

/// Partition lists cross the C boundary in both directions.
enum PartitionList {
    static func make(_ entries: [(TopicPartition, Int64?)]) -> UnsafeMutablePointer<rd_kafka_topic_partition_list_t> {
        let list = rd_kafka_topic_partition_list_new(Int32(entries.count))!
        for (tp, offset) in entries {
            let element = rd_kafka_topic_partition_list_add(list, tp.topic, tp.partition)!
            if let offset { element.pointee.offset = offset }
        }
        return list
    }

    static func read(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [(TopicPartition, Int64, rd_kafka_resp_err_t)] {
        (0..<Int(list.pointee.cnt)).map { i in
            let element = list.pointee.elems[i]
            return (TopicPartition(topic: String(cString: element.topic), partition: element.partition), element.offset, element.err)
        }
    }
}

extension String {
    /// A NUL-terminated error buffer filled by librdkafka.
    init(cBuffer: [CChar]) {
        self = String(decoding: cBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
