import CRdKafka
import Dispatch
import Logging
import ServiceLifecycle
import Synchronization

/// An idempotent producer (enable.idempotence, acks=all). `send` returns when the broker has
/// acknowledged the message (its delivery report), so a caller that got a report without an error
/// knows the message is durable on the broker.
///
/// It is a `Service`: `run()` drives librdkafka's poll loop (which fires delivery reports) on a
/// dedicated thread, and on graceful shutdown flushes every outstanding message before returning.
/// Sends made before `run()` starts are queued and acknowledged once it runs.
public final class KafkaProducer: Service, Sendable {
    private let handle: RdKafkaHandle
    private let configuration: KafkaProducerConfiguration
    private let logger: Logger
    private let state = Mutex(ProducerStateMachine())
    private let topics = Mutex<[String: TopicHandle]>([:])
    private let pollQueue: DispatchQueue

    public init(configuration: KafkaProducerConfiguration, logger: Logger) throws(KafkaError) {
        self.configuration = configuration
        self.logger = logger
        self.handle = try RdKafkaHandle(
            kind: RD_KAFKA_PRODUCER,
            properties: configuration.properties,
            callbacks: RdKafkaCallbacks(logger: logger),
            label: "producer"
        ) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
                guard let message, let ticket = message.pointee._private else { return }
                let delivery = Unmanaged<DeliveryTicket>.fromOpaque(ticket).takeRetainedValue()
                let report = KafkaDeliveryReport(
                    topic: delivery.topic,
                    partition: message.pointee.partition,
                    offset: message.pointee.offset,
                    error: message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError.from(code: message.pointee.err)
                )
                delivery.batch.complete(index: delivery.index, report: report)
            }
        }
        self.pollQueue = DispatchQueue(label: "kafka.producer.poll")
    }

    deinit {
        topics.withLock { handles in
            for topic in handles.values { rd_kafka_topic_destroy(topic.pointer) }
        }
    }

    /// Produces one message and waits for its delivery report.
    /// - Throws: `KafkaError` when the message was not delivered (retriable or not, see the error).
    @discardableResult
    public func send(_ message: KafkaOutgoingMessage) async throws(KafkaError) -> KafkaDeliveryReport {
        let report = try await sendBatch([message])[0]
        if let error = report.error { throw error }
        return report
    }

    /// Produces many messages and waits for all their delivery reports, returned in input order.
    /// Individual failures are in the reports; the call throws only when the producer cannot take
    /// work at all (shut down, or a fatal idempotence error).
    public func sendBatch(_ messages: [KafkaOutgoingMessage]) async throws(KafkaError) -> [KafkaDeliveryReport] {
        guard !messages.isEmpty else { return [] }
        try checkAcceptingWork()
        let batch = DeliveryBatch(count: messages.count)
        for (index, message) in messages.enumerated() {
            let topic = topicHandle(message.topic)
            while true {
                let ticket = Unmanaged.passRetained(DeliveryTicket(batch: batch, index: index, topic: message.topic))
                let err = produce(message, topic: topic, opaque: ticket.toOpaque())
                if err == RD_KAFKA_RESP_ERR_NO_ERROR { break }
                ticket.release()
                if err == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                    // The poll loop drains the queue as the broker acknowledges; wait for room.
                    try checkAcceptingWork()
                    try? await Task.sleep(for: .milliseconds(1))
                    continue
                }
                batch.complete(index: index, report: KafkaDeliveryReport(
                    topic: message.topic, partition: message.partition ?? -1, offset: -1, error: KafkaError.from(code: err)
                ))
                break
            }
        }
        return await batch.wait()
    }

    public func run() async throws {
        guard state.withLock({ $0.start() }) else { return }
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await pollUntilStopped()
            } onCancel: {
                self.beginShutdown()
            }
        } onGracefulShutdown: {
            self.beginShutdown()
        }
    }

    /// Stops accepting new messages; `run()` then flushes and returns.
    public func beginShutdown() {
        state.withLock { $0.beginDraining() }
    }

    /// Topic names and partition counts, as a readiness probe of the broker connection.
    public func metadata(timeoutMs: Int32 = 2_000) async throws(KafkaError) -> [String: Int32] {
        try await handle.blocking { [handle] () throws(KafkaError) in try handle.metadata(timeoutMs: timeoutMs) }
    }

    // MARK: - Internals

    private func checkAcceptingWork() throws(KafkaError) {
        if let fatal = handle.fatalError { throw fatal }
        if !state.withLock({ $0.acceptsWork }) { throw KafkaError.shutdown() }
    }

    private func produce(_ message: KafkaOutgoingMessage, topic: TopicHandle, opaque: UnsafeMutableRawPointer) -> rd_kafka_resp_err_t {
        let partition = message.partition ?? -1 // RD_KAFKA_PARTITION_UA: let the partitioner hash the key
        let flags = Int32(RD_KAFKA_MSG_F_COPY)
        let result: Int32 = withOptionalBytes(message.key) { key, keyLength in
            withOptionalBytes(message.value) { value, valueLength in
                rd_kafka_produce(topic.pointer, partition, flags, UnsafeMutableRawPointer(mutating: value), valueLength, key, keyLength, opaque)
            }
        }
        return result == 0 ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_last_error()
    }

    private func topicHandle(_ name: String) -> TopicHandle {
        topics.withLock { handles in
            if let existing = handles[name] { return existing }
            let created = TopicHandle(pointer: rd_kafka_topic_new(handle.pointer, name, nil))
            handles[name] = created
            return created
        }
    }

    private func pollUntilStopped() async {
        let configuration = self.configuration
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pollQueue.async { [self] in
                while state.withLock({ $0.isRunning }) {
                    rd_kafka_poll(handle.pointer, 100)
                }
                let err = rd_kafka_flush(handle.pointer, Int32(configuration.flushTimeoutMs))
                if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    // Whatever is still queued is failed back to its sender (who keeps it and retries),
                    // so no caller waits forever on a report that will never come.
                    let left = rd_kafka_outq_len(handle.pointer)
                    logger.warning("producer flush timed out; failing outstanding messages", metadata: ["outstanding": "\(left)"])
                    rd_kafka_purge(handle.pointer, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
                    rd_kafka_poll(handle.pointer, 0)
                }
                state.withLock { $0.finish() }
                continuation.resume()
            }
        }
    }
}

/// The producer's lifecycle; the only mutable state of `KafkaProducer`.
struct ProducerStateMachine: Sendable {
    enum State: Sendable { case created, running, draining, finished }
    private(set) var state: State = .created

    /// Returns false when `run()` was already called.
    mutating func start() -> Bool {
        guard state == .created else { return false }
        state = .running
        return true
    }

    mutating func beginDraining() {
        if state == .running || state == .created { state = .draining }
    }

    mutating func finish() { state = .finished }

    var isRunning: Bool { state == .running }
    var acceptsWork: Bool { state == .created || state == .running }
}

/// `rd_kafka_topic_t*`, created once per topic and freed with the producer.
struct TopicHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Collects the delivery reports of one `sendBatch` call.
final class DeliveryBatch: Sendable {
    private struct State {
        var remaining: Int
        var reports: [KafkaDeliveryReport?]
        var continuation: CheckedContinuation<[KafkaDeliveryReport], Never>?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(remaining: count, reports: Array(repeating: nil, count: count), continuation: nil))
    }

    func complete(index: Int, report: KafkaDeliveryReport) {
        let finished: (CheckedContinuation<[KafkaDeliveryReport], Never>, [KafkaDeliveryReport])? = state.withLock { state in
            state.reports[index] = report
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.reports.map { $0! })
        }
        if let (continuation, reports) = finished { continuation.resume(returning: reports) }
    }

    func wait() async -> [KafkaDeliveryReport] {
        await withCheckedContinuation { continuation in
            let ready: [KafkaDeliveryReport]? = state.withLock { state in
                if state.remaining == 0 { return state.reports.map { $0! } }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// Travels through librdkafka as the message opaque and comes back in the delivery report.
final class DeliveryTicket {
    let batch: DeliveryBatch
    let index: Int
    let topic: String

    init(batch: DeliveryBatch, index: Int, topic: String) {
        self.batch = batch
        self.index = index
        self.topic = topic
    }
}

@inline(__always)
func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawPointer?, Int) -> R) -> R {
    guard let bytes else { return body(nil, 0) }
    if bytes.isEmpty {
        // A NULL pointer would make an empty value a tombstone; an empty value needs a real pointer.
        var placeholder: UInt8 = 0
        return withUnsafeBytes(of: &placeholder) { body($0.baseAddress, 0) }
    }
    return bytes.withUnsafeBytes { body($0.baseAddress, $0.count) }
}
