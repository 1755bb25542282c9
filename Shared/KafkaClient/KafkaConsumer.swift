import AsyncAlgorithms
import CRdKafka
import Dispatch
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// Told when the group gives this consumer partitions or takes them away. An owner that keeps its
/// offsets elsewhere (the session merger keeps them in PostgreSQL, in the same transaction as its
/// results) answers `partitionsAssigned` with the next offset to read for each partition it knows.
///
/// Called on the consumer's poll thread while librdkafka waits for the answer: don't call back into
/// the consumer's `batches` from here.
public protocol KafkaRebalanceListener: Sendable {
    /// - Returns: the next offset to read per partition; partitions left out start from the group's
    ///   committed offset (or `auto.offset.reset`).
    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64]
    func partitionsRevoked(_ partitions: [TopicPartition]) async
}

extension KafkaRebalanceListener {
    public func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] { [:] }
    public func partitionsRevoked(_ partitions: [TopicPartition]) async {}
}

/// The messages of one poll, in partition order. `nextOffsets` is what to commit (or store) once
/// the batch's work is durable.
public struct KafkaMessageBatch: Sendable {
    public let messages: [KafkaMessage]

    public init(messages: [KafkaMessage]) {
        self.messages = messages
    }

    /// For each partition in the batch, the offset of its first message.
    public var firstOffsets: [TopicPartition: Int64] {
        var first: [TopicPartition: Int64] = [:]
        for message in messages {
            let tp = message.topicPartition
            first[tp] = min(first[tp] ?? .max, message.offset)
        }
        return first
    }

    /// For each partition in the batch, the offset after its last message.
    public var nextOffsets: [TopicPartition: Int64] {
        var next: [TopicPartition: Int64] = [:]
        for message in messages {
            let tp = message.topicPartition
            next[tp] = max(next[tp] ?? 0, message.offset + 1)
        }
        return next
    }
}

/// A group consumer with manual offsets. `run()` drives the poll loop on a dedicated thread and
/// hands batches to `batches`, one at a time: the next poll happens only after the owner took the
/// previous batch, so a slow owner slows reading instead of filling memory.
///
/// A partition is given up only once the owner has given back every batch handed to it (by asking for
/// the next one or by ending its iteration), so no batch of it is still on its way into the owner's
/// work when the owner's revoke hook runs; offsets of a partition given up are no longer committed.
///
/// On graceful shutdown it stops polling, lets the owner finish the batch it is working on (and
/// commit), then leaves the group.
public final class KafkaConsumer: Service, Sendable {
    private let handle: RdKafkaHandle
    private let configuration: KafkaConsumerConfiguration
    private let logger: Logger
    private let channel = AsyncChannel<KafkaMessageBatch>()
    private let pollQueue = DispatchQueue(label: "kafka.consumer.poll")
    private let state = Mutex(ConsumerStateMachine())
    private let assigned: AssignmentTracker
    private let handoff = BatchHandoff()
    private let queue: ConsumerQueue
    /// Records a consumer that keeps its offsets elsewhere found deleted by retention when it was given
    /// their partition (the `RecordsLostToRetention` alert), by group and topic.
    static func recordsLost(group: String, topic: String) -> Counter {
        Counter(label: "kafka_consumer_records_lost_to_retention_total", dimensions: [("group", group), ("topic", topic)])
    }

    public init(
        configuration: KafkaConsumerConfiguration,
        rebalanceListener: (any KafkaRebalanceListener)? = nil,
        logger: Logger
    ) throws(KafkaError) {
        let assigned = AssignmentTracker()
        let rebalance = RebalanceCoordinator(
            listener: rebalanceListener, group: configuration.groupId, assigned: assigned, handoff: handoff, logger: logger,
            probeProperties: configuration.client.baseProperties.merging(configuration.client.properties) { _, override in override },
            quirks: configuration.client.brokerQuirks
        )
        self.configuration = configuration
        self.logger = logger
        self.assigned = assigned
        // At 0 from the start, for an owner that keeps its offsets (the only one that counts losses): an
        // alert on its increase sees the first loss (a counter that appears with its first increment has
        // no earlier sample to increase from).
        for topic in configuration.topics where rebalanceListener != nil {
            _ = Self.recordsLost(group: configuration.groupId, topic: topic)
        }
        self.handle = try RdKafkaHandle(
            kind: RD_KAFKA_CONSUMER,
            properties: configuration.properties,
            callbacks: RdKafkaCallbacks(
                logger: logger,
                rebalance: { handle, err, partitions in
                    rebalance.handle(handle, err, partitions)
                }),
            label: "consumer"
        )
        // Route the main queue (errors, logs) to the consumer queue so one poll serves everything.
        rd_kafka_poll_set_consumer(handle.pointer)
        self.queue = ConsumerQueue(pointer: rd_kafka_queue_get_consumer(handle.pointer))
    }

    deinit {
        rd_kafka_queue_destroy(queue.pointer)
    }

    /// The batches, in poll order. Iterate from one task; iteration ends at shutdown.
    public var batches: KafkaMessageBatches { KafkaMessageBatches(consumer: self) }

    /// Partitions currently assigned to this member.
    public var assignment: Set<TopicPartition> { assigned.partitions.withLock { $0 } }

    public func run() async throws {
        guard state.withLock({ $0.start() }) else { return }
        try subscribe()
        var failure: (any Error)?
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                do {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { await self.reportLagWhilePolling() }
                        try await self.pollLoop()
                        group.cancelAll()
                    }
                } catch {
                    failure = error
                }
            } onCancel: {
                self.triggerShutdown()
            }
        } onGracefulShutdown: {
            self.triggerShutdown()
        }
        channel.finish()
        await waitForOwnerToDrain()
        // A batch the finished channel never delivered, or an owner past its drain time: leaving the
        // group does not wait for either.
        handoff.ownerGone()
        await close()
        if let failure { throw failure }
    }

    /// Stops polling; `run()` then waits for the owner's current batch and leaves the group.
    public func triggerShutdown() {
        state.withLock { $0.stop() }
        channel.finish()
    }

    /// Commits the next offsets to read (message offset + 1) for the given partitions, leaving out
    /// those this member gave up in a rebalance (and was not given again): their new owner commits
    /// them, and a late commit of this one would move the group back.
    public func commit(_ offsets: [TopicPartition: Int64]) async throws(KafkaError) {
        let givenUp = assigned.givenUp.withLock { $0 }
        let offsets = givenUp.isEmpty ? offsets : offsets.filter { !givenUp.contains($0.key) }
        guard !offsets.isEmpty else { return }
        let entries = offsets.sorted { $0.key < $1.key }.map { ($0.key, Optional($0.value)) }
        try await handle.blocking { [handle] () throws(KafkaError) in
            let list = PartitionList.make(entries)
            defer { rd_kafka_topic_partition_list_destroy(list) }
            let err = rd_kafka_commit(handle.pointer, list, 0)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
            for (tp, _, perPartition) in PartitionList.read(list) where perPartition != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError.from(code: perPartition, message: "commit \(tp): \(String(cString: rd_kafka_err2str(perPartition)))")
            }
        }
    }

    /// Commits the offsets after every message of `batch`.
    public func commit(_ batch: KafkaMessageBatch) async throws(KafkaError) {
        try await commit(batch.nextOffsets)
    }

    /// Commits the offsets after every message of `batch` where the group's committed offsets are what
    /// the consumer resumes from. A commit that fails (the group rebalancing, the coordinator out of
    /// reach) is logged, never thrown: the next commit covers this batch, and a restart before it reads
    /// the batch again, which every reader of the platform's topics dedupes. Stopping the process for
    /// it would turn a rolling deploy into a crash.
    public func commitOrWarn(_ batch: KafkaMessageBatch, logger: Logger) async {
        do {
            try await commit(batch)
        } catch {
            logger.warning(
                "committing offsets failed; the next commit covers them", metadata: ["error": .string("\(error)")])
        }
    }

    /// The group's committed offsets for the given partitions (nil where none).
    public func committed(_ partitions: [TopicPartition], timeoutMs: Int32 = 5_000) async throws(KafkaError) -> [TopicPartition: Int64] {
        try await handle.blocking { [handle] () throws(KafkaError) in
            let list = PartitionList.make(partitions.map { ($0, nil) })
            defer { rd_kafka_topic_partition_list_destroy(list) }
            let err = rd_kafka_committed(handle.pointer, list, timeoutMs)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
            var result: [TopicPartition: Int64] = [:]
            for (tp, offset, _) in PartitionList.read(list) where offset >= 0 { result[tp] = offset }
            return result
        }
    }

    public func watermarks(_ partition: TopicPartition) async throws(KafkaError) -> KafkaWatermarks {
        try await handle.blocking { [handle] () throws(KafkaError) in try handle.watermarks(partition) }
    }

    /// Topic names and partition counts, as a readiness probe of the broker connection.
    public func metadata(timeoutMs: Int32 = 2_000) async throws(KafkaError) -> [String: Int32] {
        try await handle.blocking { [handle] () throws(KafkaError) in try handle.metadata(timeoutMs: timeoutMs) }
    }

    /// Per assigned partition: the high watermark the fetcher last saw minus the position handed to
    /// the owner. Both are librdkafka's cached values (no broker round trip). Partitions not read
    /// since their assignment have no position yet and are left out.
    public func currentLag() -> [TopicPartition: Int64] {
        let partitions = assignment
        guard !partitions.isEmpty else { return [:] }
        let list = PartitionList.make(partitions.map { ($0, nil) })
        defer { rd_kafka_topic_partition_list_destroy(list) }
        guard rd_kafka_position(handle.pointer, list) == RD_KAFKA_RESP_ERR_NO_ERROR else { return [:] }
        var lag: [TopicPartition: Int64] = [:]
        for (tp, position, err) in PartitionList.read(list) where err == RD_KAFKA_RESP_ERR_NO_ERROR && position >= 0 {
            var low: Int64 = -1
            var high: Int64 = -1
            guard rd_kafka_get_watermark_offsets(handle.pointer, tp.topic, tp.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR,
                high >= 0
            else { continue }
            lag[tp] = max(0, high - position)
        }
        return lag
    }

    // MARK: - Internals

    /// Publishes `kafka_consumer_lag{group,topic,partition}` every `lagReportIntervalMs`, from its own
    /// task: the poll loop stops while the owner is busy, which is exactly when lag matters. A partition
    /// this member no longer holds reads 0 here (its new owner reports it), so a group's sum does not
    /// keep a partition's last value after a rebalance.
    private func reportLagWhilePolling() async {
        let interval = configuration.lagReportIntervalMs
        guard interval > 0 else { return }
        let group = configuration.groupId
        func gauge(_ tp: TopicPartition) -> Gauge {
            Gauge(label: "kafka_consumer_lag", dimensions: [("group", group), ("topic", tp.topic), ("partition", String(tp.partition))])
        }
        var reported = Set<TopicPartition>()
        while !Task.isCancelled, state.withLock({ $0.isPolling }) {
            try? await Task.sleep(for: .milliseconds(interval))
            if Task.isCancelled { return }
            for (tp, lag) in currentLag() {
                gauge(tp).record(lag)
                reported.insert(tp)
            }
            let held = assignment
            for tp in reported where !held.contains(tp) {
                gauge(tp).record(0)
                reported.remove(tp)
            }
        }
    }

    private func subscribe() throws(KafkaError) {
        let list = PartitionList.make(configuration.topics.map { (TopicPartition(topic: $0, partition: -1), nil) })
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let err = rd_kafka_subscribe(handle.pointer, list)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(code: err) }
    }

    private func pollLoop() async throws(KafkaError) {
        while state.withLock({ $0.isPolling }) {
            if let fatal = handle.fatalError { throw fatal }
            let batch = await pollBatch()
            guard !batch.messages.isEmpty else { continue }
            // Counted before it leaves: the owner may not have started on it when the next poll serves
            // a revocation, which then waits for it.
            handoff.handingOut()
            // Suspends until the owner asks for the next batch (or shutdown finishes the channel,
            // in which case the batch is dropped uncommitted and read again by the next owner).
            await channel.send(batch)
        }
    }

    private func pollBatch() async -> KafkaMessageBatch {
        let maxBatch = configuration.maxBatchSize
        let timeout = Int32(configuration.pollTimeoutMs)
        return await withCheckedContinuation { continuation in
            pollQueue.async { [queue, logger, assigned, handle] in
                // The rebalance callback runs inside these calls. A revocation served by the second one
                // comes after the first message was taken: what was taken of a revoked partition must not
                // reach the owner, whose revoke hook has already run (its offsets could overwrite the next
                // owner's).
                let revocationsBefore = assigned.revocations.load(ordering: .sequentiallyConsistent)
                // rd_kafka_consume_batch_queue waits out its whole timeout unless the batch fills, which
                // put `pollTimeoutMs` on every hop at low load. So: wait only for the first message,
                // then take what is already fetched without waiting.
                var buffer = [UnsafeMutablePointer<rd_kafka_message_t>?](repeating: nil, count: maxBatch)
                var count = 0
                if let first = rd_kafka_consume_queue(queue.pointer, timeout) {
                    buffer[0] = first
                    count = 1
                    if maxBatch > 1 {
                        let more = buffer.withUnsafeMutableBufferPointer { rest in
                            rd_kafka_consume_batch_queue(queue.pointer, 0, rest.baseAddress! + 1, maxBatch - 1)
                        }
                        count += max(more, 0)
                    }
                }
                let revoked = assigned.revocations.load(ordering: .sequentiallyConsistent) != revocationsBefore
                let stillAssigned = revoked ? assigned.partitions.withLock { $0 } : []
                var dropped = 0
                var messages: [KafkaMessage] = []
                messages.reserveCapacity(max(count, 0))
                for i in 0..<max(count, 0) {
                    guard let raw = buffer[i] else { continue }
                    defer { rd_kafka_message_destroy(raw) }
                    let m = raw.pointee
                    if m.err == RD_KAFKA_RESP_ERR__FATAL {
                        // The consumer cannot go on (a group consumer hears of it here, not in the error
                        // callback): the poll loop ends with it.
                        handle.recordFatalError()
                        continue
                    }
                    if m.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                        logger.warning("consumer error", metadata: ["error": .string(KafkaError.from(code: m.err).description)])
                        continue
                    }
                    if revoked,
                        !stillAssigned.contains(TopicPartition(topic: String(cString: rd_kafka_topic_name(m.rkt)), partition: m.partition))
                    {
                        dropped += 1
                        continue
                    }
                    var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
                    let timestamp = rd_kafka_message_timestamp(raw, &timestampType)
                    messages.append(
                        KafkaMessage(
                            topic: String(cString: rd_kafka_topic_name(m.rkt)),
                            partition: m.partition,
                            offset: m.offset,
                            key: m.key.map { [UInt8](copying: UnsafeRawPointer($0), count: m.key_len) },
                            value: m.payload.map { [UInt8](copying: UnsafeRawPointer($0), count: m.len) },
                            timestampMs: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp
                        ))
                }
                if dropped > 0 {
                    logger.debug("messages of revoked partitions left out of the batch", metadata: ["count": "\(dropped)"])
                }
                continuation.resume(returning: KafkaMessageBatch(messages: messages))
            }
        }
    }

    fileprivate func iteratorStarted() { state.withLock { $0.ownerStarted() } }

    fileprivate func iteratorFinished() {
        let waiter = state.withLock { $0.ownerFinished() }
        handoff.ownerGone()
        waiter?.resume()
    }

    fileprivate func batchGivenBack() { handoff.givenBack() }

    private func waitForOwnerToDrain() async {
        let drainTimeout = configuration.drainTimeoutMs
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    if !self.state.withLock({ $0.awaitOwner(continuation) }) { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(drainTimeout))
                let waiter = self.state.withLock { $0.ownerFinished() }
                self.handoff.ownerGone()
                waiter?.resume()
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pollQueue.async { [handle, logger] in
                // Leaves the group (revoking partitions through the listener) so the others
                // rebalance now instead of after the session timeout.
                let err = rd_kafka_consumer_close(handle.pointer)
                if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    logger.warning("consumer close", metadata: ["error": .string(KafkaError.from(code: err).description)])
                }
                continuation.resume()
            }
        }
        state.withLock { $0.closed() }
    }
}

/// The sequence of batches a consumer reads. Ending the iteration (or breaking out of it) tells the
/// consumer the owner is done, so shutdown can leave the group.
public struct KafkaMessageBatches: AsyncSequence, Sendable {
    public typealias Element = KafkaMessageBatch
    let consumer: KafkaConsumer

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncChannel<KafkaMessageBatch>.AsyncIterator
        let owner: OwnerToken
        /// Whether the owner holds a batch: asking for the next one gives it back.
        var holding = false

        public mutating func next() async -> KafkaMessageBatch? {
            if holding {
                holding = false
                owner.consumer.batchGivenBack()
            }
            if let batch = await base.next() {
                holding = true
                return batch
            }
            owner.finish()
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        consumer.iteratorStarted()
        return AsyncIterator(base: consumer.channelForIteration.makeAsyncIterator(), owner: OwnerToken(consumer: consumer))
    }

    /// Tells the consumer the owner stopped iterating, whether the sequence ended or the owner
    /// broke out of its loop (the iterator, and this token with it, is then released).
    public final class OwnerToken: Sendable {
        let consumer: KafkaConsumer
        private let finished = Atomic(false)

        init(consumer: KafkaConsumer) { self.consumer = consumer }

        func finish() {
            if !finished.exchange(true, ordering: .acquiringAndReleasing) { consumer.iteratorFinished() }
        }

        deinit { finish() }
    }
}

extension KafkaConsumer {
    fileprivate var channelForIteration: AsyncChannel<KafkaMessageBatch> { channel }
}

/// The consumer's lifecycle and its handshake with the owner at shutdown.
struct ConsumerStateMachine: Sendable {
    enum Phase: Sendable { case created, polling, stopping, closed }
    private(set) var phase: Phase = .created
    private var ownerIterating = false
    private var drainWaiter: CheckedContinuation<Void, Never>?

    mutating func start() -> Bool {
        guard phase == .created else { return false }
        phase = .polling
        return true
    }

    mutating func stop() {
        if phase == .polling || phase == .created { phase = .stopping }
    }

    mutating func closed() { phase = .closed }

    var isPolling: Bool { phase == .polling }

    mutating func ownerStarted() { ownerIterating = true }

    /// Returns the shutdown waiter to resume, if any.
    mutating func ownerFinished() -> CheckedContinuation<Void, Never>? {
        ownerIterating = false
        defer { drainWaiter = nil }
        return drainWaiter
    }

    /// Stores the waiter; false when there is no owner to wait for.
    mutating func awaitOwner(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard ownerIterating else { return false }
        drainWaiter = continuation
        return true
    }
}

/// The partitions a consumer holds, shared with its rebalance callback.
final class AssignmentTracker: Sendable {
    let partitions = Mutex<Set<TopicPartition>>([])
    /// Revoked and not assigned again: their offsets are the next owner's to commit.
    let givenUp = Mutex<Set<TopicPartition>>([])
    /// Grows with each revocation (and rebalance error), after `partitions` lost what was revoked.
    let revocations = Atomic<Int>(0)
}

/// The batches handed to the owner that it has not given back yet. A revocation waits for them on the
/// poll thread: a batch the owner has received but not yet registered as its work (the merger's store
/// in flight, say) would otherwise be stored after its partition's next owner started from offsets
/// without it.
final class BatchHandoff: Sendable {
    private struct State {
        var outstanding = 0
        var waiters: [DispatchSemaphore] = []
    }
    private let state = Mutex(State())

    func handingOut() { state.withLock { $0.outstanding += 1 } }

    /// The owner asked for the next batch: it is done taking the one before.
    func givenBack() { release { $0.outstanding = max(0, $0.outstanding - 1) } }

    /// The owner ended its iteration, or shutdown stopped waiting for it: nothing is out any more.
    func ownerGone() { release { $0.outstanding = 0 } }

    /// Blocks the calling thread (the poll thread, never the cooperative pool) until every batch
    /// handed out was given back.
    func waitUntilGivenBack() -> Bool {
        let semaphore = state.withLock { state -> DispatchSemaphore? in
            guard state.outstanding > 0 else { return nil }
            let semaphore = DispatchSemaphore(value: 0)
            state.waiters.append(semaphore)
            return semaphore
        }
        guard let semaphore else { return false }
        semaphore.wait()
        return true
    }

    private func release(_ change: (inout State) -> Void) {
        let waiters = state.withLock { state -> [DispatchSemaphore] in
            change(&state)
            guard state.outstanding == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.signal() }
    }
}

/// `rd_kafka_queue_t*` of the consumer, freed with it.
struct ConsumerQueue: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Applies assignments and revocations, asking the owner's listener for stored offsets. Runs on the
/// poll thread inside librdkafka's rebalance callback, so it may block (it is not the cooperative pool).
final class RebalanceCoordinator: Sendable {
    private let listener: (any KafkaRebalanceListener)?
    private let group: String
    private let assigned: AssignmentTracker
    private let handoff: BatchHandoff
    private let logger: Logger
    private let probeProperties: [String: String]
    private let quirks: BrokerQuirks

    init(
        listener: (any KafkaRebalanceListener)?, group: String, assigned: AssignmentTracker, handoff: BatchHandoff,
        logger: Logger, probeProperties: [String: String], quirks: BrokerQuirks
    ) {
        self.group = group
        self.quirks = quirks
        self.handoff = handoff
        self.listener = listener
        self.probeProperties = probeProperties
        self.assigned = assigned
        self.logger = logger
    }

    func handle(_ rk: OpaquePointer, _ event: rd_kafka_resp_err_t, _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        // NULL while the consumer is closing (its group left before the rebalance was served): eager then.
        let cooperative = rd_kafka_rebalance_protocol(rk).map { String(cString: $0) == "COOPERATIVE" } ?? false
        let tps = PartitionList.read(partitions).map(\.0)
        switch event {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            applyStoredOffsets(rk, tps, partitions)
            if cooperative {
                if let error = rd_kafka_incremental_assign(rk, partitions) {
                    logger.error("incremental assign failed", metadata: ["error": .string(KafkaError.consuming(error).description)])
                }
            } else {
                let err = rd_kafka_assign(rk, partitions)
                if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    logger.error("assign failed", metadata: ["error": .string(KafkaError.from(code: err).description)])
                }
            }
            assigned.partitions.withLock { $0.formUnion(tps) }
            assigned.givenUp.withLock { $0.subtract(tps) }
            logger.info("partitions assigned", metadata: ["partitions": .string(tps.map(\.description).joined(separator: ","))])
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            if handoff.waitUntilGivenBack() {
                logger.debug("the owner gave back its batches; giving up partitions")
            }
            if let listener {
                blockingAwait { await listener.partitionsRevoked(tps) }
            }
            if cooperative {
                if let error = rd_kafka_incremental_unassign(rk, partitions) {
                    logger.error("incremental unassign failed", metadata: ["error": .string(KafkaError.consuming(error).description)])
                }
            } else {
                rd_kafka_assign(rk, nil)
            }
            assigned.partitions.withLock { $0.subtract(tps) }
            assigned.givenUp.withLock { $0.formUnion(tps) }
            assigned.revocations.add(1, ordering: .sequentiallyConsistent)
            logger.info("partitions revoked", metadata: ["partitions": .string(tps.map(\.description).joined(separator: ","))])
        default:
            logger.error("rebalance error", metadata: ["error": .string(KafkaError.from(code: event).description)])
            rd_kafka_assign(rk, nil)
            let lost = assigned.partitions.withLock { held in
                defer { held.removeAll() }
                return held
            }
            assigned.givenUp.withLock { $0.formUnion(lost) }
            assigned.revocations.add(1, ordering: .sequentiallyConsistent)
        }
    }

    /// Writes the owner's stored offsets into the assignment. A stored offset past the end of the
    /// partition means the broker lost data (a memory-backed broker after a restart, or a topic
    /// deleted and re-created): a broker may then answer fetches there with nothing at all (no
    /// OFFSET_OUT_OF_RANGE; the local stack's does), so everything produced next would be skipped silently. Start from the
    /// beginning instead and rely on the owner's idempotency to ignore what it already has.
    ///
    /// On a broker whose high watermark is the base of the last record batch
    /// (`BrokerQuirks.highWatermarkIsLastBatchBase`), a stored offset above it is checked against the
    /// real end by reading the last batch before it is declared lost.
    private func applyStoredOffsets(
        _ rk: OpaquePointer, _ tps: [TopicPartition], _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        guard let listener, !tps.isEmpty else { return }
        let stored: [TopicPartition: Int64]
        do {
            stored = try blockingAwait { try await listener.partitionsAssigned(tps) }
        } catch {
            logger.error(
                "rebalance listener failed; starting from committed offsets", metadata: ["error": .string(String(reflecting: error))])
            return
        }
        for i in 0..<Int(partitions.pointee.cnt) {
            let element = partitions.pointee.elems[i]
            let tp = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
            guard var offset = stored[tp] else { continue }
            var low: Int64 = 0
            var high: Int64 = 0
            let err = rd_kafka_query_watermark_offsets(rk, tp.topic, tp.partition, &low, &high, 5_000)
            if err == RD_KAFKA_RESP_ERR_NO_ERROR, offset > high, high > 0, quirks.contains(.highWatermarkIsLastBatchBase),
                let end = LogEndProbe.trueEnd(of: tp, lastBatchBase: high - 1, properties: probeProperties, logger: logger),
                offset <= end
            {
                // An under-reported watermark: the stored offset is inside the last batch.
                logger.debug(
                    "stored offset is within the log",
                    metadata: ["partition": .string(tp.description), "stored": "\(offset)", "end": "\(end)"])
            } else if err == RD_KAFKA_RESP_ERR_NO_ERROR, offset > high {
                logger.warning(
                    "stored offset is past the end of the partition; the broker lost data. Reading from the beginning",
                    metadata: ["partition": .string(tp.description), "stored": "\(offset)", "high": "\(high)", "low": "\(low)"]
                )
                offset = low
            } else if err == RD_KAFKA_RESP_ERR_NO_ERROR, offset < low {
                // Records the owner never stored are gone: counted for the `RecordsLostToRetention` alert.
                logger.error(
                    "stored offset was deleted by retention; the records before the earliest kept are lost. Reading from there",
                    metadata: ["partition": .string(tp.description), "stored": "\(offset)", "low": "\(low)"])
                KafkaConsumer.recordsLost(group: group, topic: tp.topic).increment(by: Int(low - offset))
                offset = low
            }
            partitions.pointee.elems[i].offset = offset
        }
    }
}

/// Waits for async work from a thread that may block (a dispatch queue, never the cooperative pool).
func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = Mutex<Result<T, any Error>?>(nil)
    let semaphore = DispatchSemaphore(value: 0)
    Task {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        box.withLock { $0 = result }
        semaphore.signal()
    }
    semaphore.wait()
    return try box.withLock { $0! }.get()
}

func blockingAwait(_ body: @escaping @Sendable () async -> Void) {
    _ = try? blockingAwait { () async throws -> Bool in
        await body()
        return true
    }
}

extension KafkaConsumer {
    /// Runs the consumer and hands each batch to `body`, one at a time, until the batches end
    /// (shutdown) or `body` returns false; then stops the consumer and waits for it to leave the
    /// group. `alongside` (a pruning or monitoring loop, say) runs beside the batches and is cancelled
    /// when they end. A consumer that fails to start ends the batches and rethrows its error.
    public func consume(
        alongside: (@Sendable () async -> Void)? = nil,
        _ body: (KafkaMessageBatch) async throws -> Bool
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await self.run()
                } catch {
                    // A consumer that fails to start never ends `batches` by itself.
                    self.triggerShutdown()
                    throw error
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { side in
                if let alongside { side.addTask { await alongside() } }
                for await batch in batches {
                    guard try await body(batch) else { break }
                }
                side.cancelAll()
            }
            triggerShutdown()
            try await group.waitForAll()
        }
    }
}
