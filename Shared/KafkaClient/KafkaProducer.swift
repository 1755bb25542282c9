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
                guard let message, let opaque = message.pointee._private else { return }
                let err = message.pointee.err
                DeliveryBatch.complete(
                    opaque: opaque, partition: message.pointee.partition, offset: message.pointee.offset,
                    error: err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError.from(code: err)
                )
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
        try await enqueue(messages).reports()
    }

    /// `sendBatch` in two steps: hands every message to librdkafka, in order, and returns without
    /// waiting for the broker. Messages enqueued after this returns follow these in each partition
    /// (the producer is idempotent), so a consumer can decide its next batch while this one is
    /// acknowledged. The reports arrive whether or not anyone awaits them.
    public func enqueue(_ messages: [KafkaOutgoingMessage]) async throws(KafkaError) -> KafkaPendingDelivery {
        guard !messages.isEmpty else { return KafkaPendingDelivery(batch: nil) }
        if let fatal = handle.fatalError { throw fatal }
        // Counted while it hands messages over: the poll loop polls until every enqueue that passed
        // this check has finished, so no message is queued after the final flush without a report.
        guard state.withLock({ $0.beginEnqueue() }) else { throw KafkaError.shutdown() }
        defer { state.withLock { $0.endEnqueue() } }
        let batch = DeliveryBatch(messages: messages)
        batch.keepAliveUntilComplete()
        var topic: (name: String, handle: TopicHandle)?
        var index = 0
        // While the queue stays full, each look for room waits twice as long as the one before, up to 50 ms:
        // many waiting senders polling every millisecond would take the CPU the poll loop needs to drain it.
        var roomWait = Duration.milliseconds(1)
        while index < messages.count {
            let message = messages[index]
            if topic?.name != message.topic { topic = (message.topic, topicHandle(message.topic)) }
            let err = produce(message, topic: topic!.handle, opaque: batch.opaque(for: index))
            if err == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                // The poll loop drains the queue as the broker acknowledges; wait for room. If the
                // producer stops meanwhile, the rest fails back to the caller, who keeps it.
                do throws(KafkaError) {
                    try checkAcceptingWork()
                    // A cancelled caller gets the rest back now: its sleep below would return at once,
                    // and this loop would spin until librdkafka had room.
                    if Task.isCancelled { throw KafkaError.shutdown() }
                } catch {
                    for rest in index..<messages.count { batch.complete(index: rest, partition: -1, offset: -1, error: error) }
                    break
                }
                try? await Task.sleep(for: roomWait)
                roomWait = min(roomWait * 2, .milliseconds(50))
                continue
            }
            roomWait = .milliseconds(1)
            if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                batch.complete(index: index, partition: message.partition ?? -1, offset: -1, error: KafkaError.from(code: err))
            }
            index += 1
        }
        return KafkaPendingDelivery(batch: batch)
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

    /// The fatal error librdkafka reported (an idempotent producer the broker fenced), if any: the
    /// producer takes no more work, and the process should be replaced by a new one.
    public var fatalError: KafkaError? { handle.fatalError }

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
                rd_kafka_produce(
                    topic.pointer, partition, flags, UnsafeMutableRawPointer(mutating: value), valueLength, key, keyLength, opaque)
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
                while state.withLock({ $0.mustPoll }) {
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
    /// `enqueue` calls handing messages to librdkafka now.
    private(set) var enqueuing = 0

    /// Whether `run()` was called.
    private(set) var started = false

    /// Returns false when `run()` was already called. A producer shut down before it ran runs once all
    /// the same, to flush what was queued meanwhile: its senders wait for those reports.
    mutating func start() -> Bool {
        guard !started, state != .finished else { return false }
        started = true
        if state == .created { state = .running }
        return true
    }

    mutating func beginDraining() {
        if state == .running || state == .created { state = .draining }
    }

    mutating func finish() { state = .finished }

    /// Admits an `enqueue` call; false once shutdown began.
    mutating func beginEnqueue() -> Bool {
        guard acceptsWork else { return false }
        enqueuing += 1
        return true
    }

    mutating func endEnqueue() { enqueuing -= 1 }

    var isRunning: Bool { state == .running }
    var acceptsWork: Bool { state == .created || state == .running }
    /// The poll loop goes on while running, and while an admitted `enqueue` may still produce: the
    /// flush after it then covers every message produced.
    var mustPoll: Bool { state == .running || enqueuing > 0 }
}

/// `rd_kafka_topic_t*`, created once per topic and freed with the producer.
struct TopicHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Messages enqueued and not yet acknowledged (`KafkaProducer.enqueue`).
public struct KafkaPendingDelivery: Sendable {
    fileprivate let batch: DeliveryBatch?

    /// Every message's delivery report, in the order they were enqueued.
    public func reports() async -> [KafkaDeliveryReport] {
        guard let batch else { return [] }
        return await batch.wait()
    }
}

/// Collects the delivery reports of one `enqueue` call. Each message's opaque points at its slot
/// in one buffer allocated per batch (no allocation or reference counting per message); a slot
/// leads back to the batch and the message's index. The batch keeps itself alive until every
/// report arrived, so the callback's unretained reference is always valid.
final class DeliveryBatch: @unchecked Sendable {
    private struct Slot {
        var batch: UnsafeRawPointer
        var index: Int
    }

    private struct State {
        var remaining: Int
        var reports: [KafkaDeliveryReport?]
        /// Everyone awaiting the reports (a `KafkaPendingDelivery` is a value: several tasks may hold it).
        var continuations: [CheckedContinuation<[KafkaDeliveryReport], Never>] = []
        /// librdkafka holds pointers into the batch: it keeps itself alive until the last report.
        var keepAlive: DeliveryBatch?
    }

    private let topics: [String]
    private let slots: UnsafeMutablePointer<Slot>
    private let state: Mutex<State>

    init(messages: [KafkaOutgoingMessage]) {
        topics = messages.map(\.topic)
        slots = .allocate(capacity: messages.count)
        state = Mutex(State(remaining: messages.count, reports: Array(repeating: nil, count: messages.count)))
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        for i in 0..<messages.count { (slots + i).initialize(to: Slot(batch: me, index: i)) }
    }

    deinit {
        slots.deinitialize(count: topics.count)
        slots.deallocate()
    }

    func opaque(for index: Int) -> UnsafeMutableRawPointer { UnsafeMutableRawPointer(slots + index) }

    func keepAliveUntilComplete() {
        state.withLock { if $0.remaining > 0 { $0.keepAlive = self } }
    }

    /// Called from librdkafka's delivery-report callback.
    static func complete(opaque: UnsafeMutableRawPointer, partition: Int32, offset: Int64, error: KafkaError?) {
        let slot = opaque.assumingMemoryBound(to: Slot.self).pointee
        let batch = Unmanaged<DeliveryBatch>.fromOpaque(slot.batch).takeUnretainedValue()
        batch.complete(index: slot.index, partition: partition, offset: offset, error: error)
    }

    func complete(index: Int, partition: Int32, offset: Int64, error: KafkaError?) {
        let report = KafkaDeliveryReport(topic: topics[index], partition: partition, offset: offset, error: error)
        var released: DeliveryBatch?
        let finished: ([CheckedContinuation<[KafkaDeliveryReport], Never>], [KafkaDeliveryReport])? = state.withLock { state in
            state.reports[index] = report
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            released = state.keepAlive
            state.keepAlive = nil
            guard !state.continuations.isEmpty else { return nil }
            defer { state.continuations = [] }
            return (state.continuations, state.reports.map { $0! })
        }
        if let (continuations, reports) = finished {
            for continuation in continuations { continuation.resume(returning: reports) }
        }
        _ = released // released here, outside the lock
    }

    func wait() async -> [KafkaDeliveryReport] {
        await withCheckedContinuation { continuation in
            let ready: [KafkaDeliveryReport]? = state.withLock { state in
                if state.remaining == 0 { return state.reports.map { $0! } }
                state.continuations.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
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
