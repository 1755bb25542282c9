import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import Metrics
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime
import Synchronization

/// The merger's consumer loop: reads `attendance.events.vetted` in batches, hands each batch to the
/// `VettedBatchProcessor` (decoded while the previous batch is stored, then one PostgreSQL
/// transaction, offsets included), then produces the verdicts and commits the offsets to the broker
/// (informational).
///
/// A batch that fails (PostgreSQL down, say) is retried with backoff, never skipped: the next batch is
/// not taken before this one committed. On graceful shutdown the current batch finishes; a batch that
/// cannot be stored by then is left to the next owner of the partition (its offsets were not stored).
package final class MergerPipeline: Service, Sendable {
    package let consumer: KafkaConsumer
    package let processor: VettedBatchProcessor
    private let producer: KafkaProducer
    private let configuration: SessionMergerConfiguration
    private let logger: Logger
    /// Unready while no batch can be stored (`/health/ready`).
    package let storeHealth = BatchStoreHealth()
    private let afterCommit: @Sendable (VettedBatchResult) async throws -> Void
    /// The batch being stored while the next is read: partitions are given up only once it is stored.
    private let inFlight: StoreInFlight
    /// The registry view a late check-in's site falls back to (the user's only site): read before the
    /// first batch, so that such an event is not refused for good from an empty view after a restart.
    private let registry: RegistryCacheLoader?

    /// - Parameter afterCommit: called after each commit, before the verdicts are produced (tests
    ///   use it to die at that moment).
    package init(
        kafka: KafkaConfiguration, configuration: SessionMergerConfiguration, processor: VettedBatchProcessor,
        producer: KafkaProducer, logger: Logger, registry: RegistryCacheLoader? = nil,
        afterCommit: @escaping @Sendable (VettedBatchResult) async throws -> Void = { _ in }
    ) throws(KafkaError) {
        MergerMetrics.registerAtZero()
        let inFlight = StoreInFlight()
        self.inFlight = inFlight
        // A partition given up while its batch is still being stored would be read by its next owner from
        // offsets without that batch: it would store it again (a second verdict) and this store's late
        // offsets could overwrite the next owner's newer ones.
        self.consumer = try .resumingFromStoredOffsets(
            client: kafka, topics: [configuration.topics[.vettedEvents]], group: configuration.consumer, logger: logger,
            beforeRevoke: { await inFlight.waitUntilStored(logger: logger) }
        ) { try await processor.storedOffsets(for: $0) }
        self.processor = processor
        self.producer = producer
        self.configuration = configuration
        self.logger = logger
        self.afterCommit = afterCommit
        self.registry = registry
    }

    package func run() async throws {
        if let registry, !(await registry.waitBeforeDeciding(timeout: .seconds(60), logger: logger)) { return }
        var verdictsInFlight: Task<Void, Never>?
        // One batch is stored at a time, in order; the next one is decoded meanwhile (decoding is a
        // fifth of the merger's CPU, and PostgreSQL need not wait for it). `stores` holds at most one
        // task, whose answer is the verdicts it started producing, or nil when it could not store.
        // The verdicts being produced are awaited however the loop ends, so none outlives the pipeline.
        do {
            try await withThrowingTaskGroup(of: Task<Void, Never>?.self) { stores in
                var storing = false
                do {
                    try await consumer.consume { batch in
                        // From here on the batch is the pipeline's: a revoke waits until it is stored (it may
                        // still be decoded, or wait for the batch before it).
                        inFlight.began()
                        let decoded = await processor.decode(batch.messages)
                        if storing {
                            storing = false
                            let stored: Task<Void, Never>?
                            do {
                                stored = try await stores.next() ?? nil
                            } catch {
                                inFlight.ended()
                                throw error
                            }
                            guard let verdicts = stored else {
                                inFlight.ended()
                                return false
                            }
                            verdictsInFlight = verdicts
                        }
                        let previousVerdicts = verdictsInFlight
                        stores.addTask {
                            defer { self.inFlight.ended() }
                            return try await self.store(decoded, previousVerdicts: previousVerdicts)
                        }
                        storing = true
                        return true
                    }
                } catch {
                    // The batch being stored when reading failed: its verdicts are awaited too.
                    if storing, let child = try? await stores.next(), let verdicts = child { verdictsInFlight = verdicts }
                    throw error
                }
                // On shutdown the batch being stored finishes.
                if storing, let verdicts = try await stores.next() ?? nil { verdictsInFlight = verdicts }
            }
        } catch {
            await verdictsInFlight?.value
            throw error
        }
        await verdictsInFlight?.value
    }

    /// Stops reading after the current batch (as graceful shutdown does).
    package func stop() {
        consumer.triggerShutdown()
    }

    /// Stores `batch` (retrying until stored), then starts producing its verdicts and committing its
    /// offsets to the broker once `previousVerdicts` are out: a batch's verdicts are produced while
    /// the next batch is stored (waiting for their delivery reports took a tenth of each batch's
    /// time), one batch's at a time, so they stay in batch order.
    /// - Returns: the task producing the verdicts; nil when the batch could not be stored before
    ///   shutdown (stop consuming).
    private func store(_ batch: VettedBatchProcessor.DecodedBatch, previousVerdicts: Task<Void, Never>?) async throws -> Task<Void, Never>?
    {
        let processor = processor
        guard
            let (result, started) = await BatchStoreRetry.untilStored(
                messages: batch.count, logger: logger, health: storeHealth, onFailure: { MergerMetrics.batchFailures.increment() },
                {
                    let started = ContinuousClock.now
                    return (try await processor.store(batch), started)
                })
        else { return nil }
        let stored = ContinuousClock.now
        MergerMetrics.record(result, storeDuration: stored - started)
        if result.beyondHorizon > 0 {
            logger.warning(
                "accepted events older than their timeline's history were recorded in no session",
                metadata: ["events": "\(result.beyondHorizon)"])
        }
        try await afterCommit(result)
        await previousVerdicts?.value
        let verdicts = result.verdicts, nextOffsets = result.nextOffsets
        logger.debug(
            "batch stored",
            metadata: [
                "messages": "\(batch.count)", "storeMs": "\((stored - started).milliseconds)",
                "verdictsWaitMs": "\((ContinuousClock.now - stored).milliseconds)",
            ])
        return Task {
            await self.produceVerdicts(verdicts)
            await self.commitToBroker(nextOffsets)
        }
    }

    /// The broker's copy of the offsets is informational (lag metrics, tools); PostgreSQL's is the truth.
    private func commitToBroker(_ offsets: [TopicPartition: Int64]) async {
        guard configuration.commitOffsetsToBroker else { return }
        await consumer.commitInformational(offsets, logger: logger)
    }

    /// Verdicts may be lost on a crash or a broker failure: the device retries with the same key and
    /// gets the recorded outcome as a `duplicate` (or the replayed 409 / 422).
    private func produceVerdicts(_ verdicts: [AttendanceVerdict]) async {
        guard !verdicts.isEmpty else { return }
        do {
            let messages = try verdicts.map { verdict in
                KafkaOutgoingMessage(
                    topic: configuration.topics[.verdicts], key: verdict.partitionKey.value, value: try ProtocolCodec.wire.encode(verdict))
            }
            let reports = try await producer.sendBatch(messages)
            let failed = reports.filter { !$0.isDelivered }.count
            if failed > 0 {
                logger.warning("verdicts not delivered; devices will retry", metadata: ["failed": "\(failed)", "of": "\(reports.count)"])
            }
        } catch {
            logger.warning("producing verdicts failed; devices will retry", metadata: ["error": .string("\(error)")])
        }
    }
}

/// The merger's figures on `/metrics`: what the pipeline dashboards and the consumer-lag alert read.
enum MergerMetrics {
    static let batchFailures = Counter(label: "merger_batch_failures_total")
    static let batchStore = Timer(label: "merger_batch_store_seconds")
    static let sessionChanges = Counter(label: "merger_session_changes_total")
    static let deadLetters = Counter(label: "merger_dead_letters_total")
    /// Accepted events older than their timeline's history (recorded, in no session): the merger was
    /// behind by more than the horizon allows, or `MERGER_HORIZON_SECONDS` is below the event-age limit.
    static let beyondHorizon = Counter(label: "merger_events_beyond_horizon_total")

    /// The counters alerts watch the increase of, at 0 from the start: one that appears with its first
    /// increment has no earlier sample, and the alert would miss that first one.
    static func registerAtZero() {
        _ = (deadLetters, beyondHorizon)
    }

    static func record(_ result: VettedBatchResult, storeDuration: Duration) {
        batchStore.recordNanoseconds(storeDuration.nanoseconds)
        // How many batches the write lanes split (`MERGER_WRITE_LANES`): transactions="2" and up.
        Counter(label: "merger_batches_total", dimensions: [("transactions", String(result.transactions))]).increment()
        var byOutcome: [VerdictOutcome: Int] = [:]
        for verdict in result.verdicts { byOutcome[verdict.outcome, default: 0] += 1 }
        for (outcome, count) in byOutcome {
            Counter(label: "merger_events_total", dimensions: [("outcome", outcome.rawValue)]).increment(by: count)
        }
        if !result.sessionChanges.isEmpty { sessionChanges.increment(by: result.sessionChanges.count) }
        if !result.deadLetters.isEmpty { deadLetters.increment(by: result.deadLetters.count) }
        if result.beyondHorizon > 0 { beyondHorizon.increment(by: result.beyondHorizon) }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// Whether a batch is being stored, for the rebalance to wait on (`waitUntilStored`).
final class StoreInFlight: Sendable {
    private let count = Mutex(0)

    func began() { count.withLock { $0 += 1 } }
    func ended() { count.withLock { $0 -= 1 } }
    var storing: Bool { count.withLock { $0 > 0 } }

    /// Returns once no batch is being stored, or after `timeout` (a store retrying while PostgreSQL is
    /// away must not hold the rebalance forever: its offsets then lose to the next owner's, see above).
    func waitUntilStored(timeout: Duration = .seconds(30), logger: Logger) async {
        let deadline = ContinuousClock.now + timeout
        while storing {
            guard ContinuousClock.now < deadline else {
                logger.warning("giving up partitions while a batch is still being stored; its next owner may store it again")
                return
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
