import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import Metrics
import PolicyServiceCore
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime
import Synchronization

/// Topic names and batching of the policy pipeline (tests use their own topics).
package struct PolicyPipelineConfiguration: Sendable {
    package var consumer = ConsumerGroupConfiguration.policy
    package var rawTopic: String
    package var vettedTopic: String
    package var deadLetterTopic: String
    /// How long decisions wait for the registry cache to catch up before the first batch; a
    /// decision against an empty cache would refuse every beacon as unknown.
    package var registryCatchUpTimeout: Duration = .seconds(60)
    /// How long after a gateway received an event the registry may take to publish a change the
    /// event depends on (its publisher is woken at each commit and publishes within milliseconds;
    /// this leaves room for a loaded machine). A batch with an event that relies on something the
    /// registry view lacks (`RegistryView.mayBeBehind`) is decided once the view holds the feed as of
    /// the newest such receipt plus this.
    package var registryPublishMargin: Duration = .milliseconds(150)
    /// And until the view has settled: no feed batch for this long (a refill after the broker lost
    /// the feed arrives batch after batch; see `RegistryCacheLoader.waitUntilSettled`).
    package var registrySettle: Duration = .seconds(2)
    /// How long a batch waits for the view to settle once it is current; then it is decided (a
    /// warning): the registry is publishing without pause. A view that is not current, or holds
    /// nothing (the feed lost and not yet refilled), is never decided from: the batch waits on, a
    /// warning every `registryLagWait`, since every device would be refused as not enrolled. The
    /// events meanwhile wait in the topic (the gateway answers 202).
    package var registryLagWait: Duration = .seconds(60)
    /// Between attempts to deliver what the broker refused; the batch is not committed meanwhile.
    package var redeliveryBackoff: Duration = .milliseconds(500)
    /// How often expired spent nonces are pruned.
    package var noncePruneInterval: TimeInterval = 60
    /// How long a spent nonce is kept after its expiry. A proof is judged at its event's time, and
    /// the gateway takes events up to 7 days old (queued offline), so a replay of a nonce dated
    /// within its life can arrive a week later: keep rows longer than that, and than any backlog.
    package var spentNonceRetention: TimeInterval = 8 * 86_400

    package init(topics: TopicNames = TopicNames()) {
        rawTopic = topics[.rawEvents]
        vettedTopic = topics[.vettedEvents]
        deadLetterTopic = topics[.deadLetters]
    }
}

/// `attendance.events.raw` → rule engine → `attendance.events.vetted`.
///
/// At-least-once: a batch's offsets are committed only after every vetted event (and every dead
/// letter) of the batch has its delivery report. A crash before the commit replays the batch; the
/// merger's unique idempotency key makes the replay harmless. Decisions are made in offset order
/// per partition and each accepted punch is recorded in the history before the next decision, so
/// the rate-limit and dwell rules see the punches earlier in the same batch. With a `PunchLedger`,
/// the history also holds the punches decided before a restart or by the partition's previous owner,
/// and a batch is committed only once its accepted punches are stored.
package final class PolicyPipeline: Service, Sendable {
    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let engine: PolicyEngine
    private let book: Mutex<PolicyBook>
    private let registry: RegistryCacheView
    private let registryLoader: RegistryCacheLoader?
    private let history: PolicyHistory
    /// The durable, shared spent-nonce check (`nil` when `gatt_challenge` is not hosted).
    private let nonceLedger: GattNonceLedger?
    /// The durable, shared punch history (`nil`: the history is this process's decisions alone).
    private let punchLedger: PunchLedger?
    private let lastNoncePrune = Mutex<Date>(.distantPast)
    private let lastHistoryPrune = Mutex<Date>(.distantPast)
    private let configuration: PolicyPipelineConfiguration
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let processed = Atomic<Int>(0)
    /// Unready while the policy's database refuses every claim, read or store a batch needs (`/health/ready`).
    package let storeHealth = BatchStoreHealth()
    private let behindAnswers = Atomic<Int>(0)
    private let registryWaits = Atomic<Int>(0)

    package init(
        consumer: KafkaConsumer, producer: KafkaProducer, engine: PolicyEngine = .standard, book: PolicyBook,
        registry: RegistryCacheView, registryLoader: RegistryCacheLoader?, history: PolicyHistory = PolicyHistory(),
        nonceLedger: GattNonceLedger? = nil, punchLedger: PunchLedger? = nil,
        configuration: PolicyPipelineConfiguration = PolicyPipelineConfiguration(), logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.consumer = consumer
        self.producer = producer
        self.engine = engine
        self.book = Mutex(book)
        self.registry = registry
        self.registryLoader = registryLoader
        self.history = history
        self.nonceLedger = nonceLedger
        self.punchLedger = punchLedger
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        // At 0 from the start, for the `DeadLettersWritten` alert (see `undecodable`).
        _ = Self.deadLetters
    }

    /// Undecodable raw events sent to the dead-letter topic.
    static let deadLetters = Counter(label: "policy_dead_letters_total")

    /// Events decided since start (for tests and the log).
    package var processedCount: Int { processed.load(ordering: .relaxed) }
    /// How often a batch's registry wait found the view behind (as `policy_registry_waits_total{current="behind"}`).
    package var registryBehindCount: Int { behindAnswers.load(ordering: .relaxed) }
    /// How many batches have started waiting for the registry view (for tests: a batch is waiting).
    package var registryWaitCount: Int { registryWaits.load(ordering: .relaxed) }

    /// Replaces the policy book; the next decision uses it.
    package func setPolicyBook(_ newBook: PolicyBook) { book.withLock { $0 = newBook } }

    package func run() async throws {
        // Ended by a graceful shutdown too: a service stopped while the feed cannot be read (the broker
        // down at start) stops at once, not after the whole catch-up wait.
        if let registryLoader, !(await registryLoader.waitBeforeDeciding(timeout: configuration.registryCatchUpTimeout, logger: logger)) {
            return
        }
        var acknowledging: Task<Void, any Error>?
        do {
            for await batch in consumer.batches.cancelOnGracefulShutdown() {
                try await handle(batch, after: &acknowledging)
            }
        } catch is CancellationError where Task.isShuttingDownGracefully && !Task.isCancelled {
            // Graceful shutdown ended a wait for the registry view or the spent-nonce store: that
            // batch is neither decided nor committed, and the partition's next owner reads it again.
            // The service stops as on any other shutdown, once the batch before it is acknowledged.
            logger.info("graceful shutdown ended a batch's wait; it stays uncommitted for the next owner")
        } catch {
            // The service stops on this error (a producer that refuses work, a cancellation): the batch
            // being acknowledged stops with it, before `run()` returns, uncommitted for the next owner.
            acknowledging?.cancel()
            _ = await acknowledging?.result
            throw error
        }
        // Awaiting a task's value does not hand it the caller's cancellation: without this, a service
        // cancelled (its graceful shutdown over time) while the broker refuses the last batch would wait
        // for it until the process is stopped with a fatal error.
        let last = acknowledging
        do {
            try await withTaskCancellationHandler {
                try await last?.value
            } onCancel: {
                last?.cancel()
            }
        } catch is CancellationError where Task.isShuttingDownGracefully {
            // A graceful shutdown ended the last batch's storing or delivery: it stays uncommitted for
            // the next owner, and the service stops as on any other shutdown.
            logger.info("graceful shutdown ended the last batch's acknowledgement; it stays uncommitted for the next owner")
        }
    }

    /// Decides `batch` and hands its vetted events to the producer, then lets the broker acknowledge
    /// them while the next batch is decided: waiting for the delivery reports and the offset commit
    /// took most of each batch's time at moderate load, and every event waited for a whole cycle.
    /// Offsets are still committed only after the batch's delivery reports, in batch order; at most
    /// two batches are in flight. (A commit lost to a shutdown or a rebalance means a redelivery,
    /// which the merger dedupes.)
    func handle(_ batch: KafkaMessageBatch, after previous: inout Task<Void, any Error>?) async throws {
        let (outgoing, punches) = try await decideAll(batch)
        let enqueued = try await producer.enqueue(outgoing)
        let earlier = previous
        previous = Task {
            try await self.confirmDelivery(of: outgoing, enqueued: enqueued)
            if let ledger = self.punchLedger, !punches.isEmpty {
                try await self.untilStored("storing the batch's accepted punches", messages: batch.messages.count) {
                    try await ledger.store(punches)
                }
            }
            try await earlier?.value
            await self.consumer.commitOrWarn(batch, logger: self.logger)
            self.processed.add(batch.messages.count, ordering: .relaxed)
        }
        do {
            try await earlier?.value
        } catch {
            // The service stops on this error: the batch just handed over is not acknowledged either.
            previous?.cancel()
            throw error
        }
        if nonceLedger != nil { await pruneNoncesIfDue() }
        await pruneHistoryIfDue()
    }

    /// How long a user's punches stay in the history after their latest one: the longest look-back
    /// of any rule (a 7-day multi-device window either side of an event time up to 7 days old) and a
    /// day to spare. Pruned at most once an hour.
    package static let historyRetention: TimeInterval = 15 * 86_400

    private func pruneHistoryIfDue() async {
        let now = clock()
        guard Self.isDue(lastHistoryPrune, now: now, every: 3_600) else { return }
        history.prune(before: now.addingTimeInterval(-Self.historyRetention))
        // Inline, as the nonces' pruning: one statement an hour, and no task outlives the pipeline.
        guard let punchLedger else { return }
        do {
            try await punchLedger.store.prune(before: now.addingTimeInterval(-Self.historyRetention))
        } catch {
            logger.warning("pruning stored punches failed", metadata: ["error": .string(PostgresFailure.description(of: error))])
        }
    }

    /// Whether `every` seconds have passed since `last`, which then becomes `now`.
    private static func isDue(_ last: borrowing Mutex<Date>, now: Date, every interval: TimeInterval) -> Bool {
        last.withLock { last in
            guard now.timeIntervalSince(last) >= interval else { return false }
            last = now
            return true
        }
    }

    /// One outgoing message per message of `batch` (its vetted event, or a dead letter), and the
    /// punches the batch accepted.
    private func decideAll(_ batch: KafkaMessageBatch) async throws -> ([KafkaOutgoingMessage], [PunchRecord]) {
        var outgoing: [KafkaOutgoingMessage] = []
        var punches: [PunchRecord] = []
        outgoing.reserveCapacity(batch.messages.count)
        let book = self.book.withLock { $0 }
        // Decoded once, up front: the spent-nonce claim needs the whole batch before any decision.
        let decoded = batch.messages.map(Self.decode)
        let events = decoded.compactMap { try? $0.get() }
        // Both waits may last as long as a store or the registry is away; graceful shutdown ends them,
        // and the batch, neither decided nor committed, is read again by the next owner.
        if let nonceLedger { try await claimNonces(events, ledger: nonceLedger) }
        if let punchLedger {
            let now = clock()
            try await untilStored("reading the batch's users' punches", messages: events.count) {
                try await punchLedger.warm(events, history: self.history, now: now)
            }
        }
        try await waitForRegistryIfBehind(events)
        for (message, event) in zip(batch.messages, decoded) {
            switch event {
            case .success(let raw):
                let (message, punch) = decide(raw, message: message, book: book)
                outgoing.append(message)
                if let punch { punches.append(punch) }
            case .failure(let error): outgoing.append(undecodable(message, error: error))
            }
        }
        return (outgoing, punches)
    }

    /// How far behind this host's clock a gateway's receipt may be and still count as now when the
    /// registry view is waited for (s): the skew between two hosts' clocks, which NTP keeps well under it.
    package static let receiptSkewAllowance: TimeInterval = 5

    /// The instant the registry view must hold the feed as of, for events whose newest receipt is
    /// `newestReceipt`: that receipt plus `margin`, where a receipt ahead of `now` or less than
    /// `receiptSkewAllowance` behind it counts as `now`.
    package static func registryAsOf(newestReceipt: Date, now: Date, margin: Duration) -> Date {
        let newest = newestReceipt > now.addingTimeInterval(-receiptSkewAllowance) ? now : newestReceipt
        return newest.addingTimeInterval(Double(margin.components.seconds) + Double(margin.components.attoseconds) / 1e18)
    }

    /// No final refusal from a stale view: when an event relies on something the registry view lacks
    /// (its device, user, beacon or site assignment), the batch waits until the view holds the feed
    /// as of that event's receipt (plus the registry's publish margin) and has settled. A view that
    /// stays behind is never decided from (fail closed, as the nonce claim); one that is current but
    /// never settles is, after `registryLagWait`. Returns early only on cancellation or graceful
    /// shutdown, by throwing (only a batch that waits pays for watching the shutdown). A receipt
    /// stamped ahead of this host's clock (a gateway whose clock runs ahead) counts as now: the event
    /// was received before it is read here, and the view's wait would otherwise never end. So does a
    /// receipt less than `receiptSkewAllowance` behind it: a gateway whose clock runs a second behind
    /// stamps a receipt that would already be past the margin, and the view would be read without it.
    private func waitForRegistryIfBehind(_ events: [RawEventEnvelope]) async throws {
        guard let registryLoader else { return }
        let behind = events.filter { registry.mayBeBehind($0) }
        guard let latest = behind.map(\.receivedAt).max() else { return }
        registryWaits.add(1, ordering: .relaxed)
        let asOf = Self.registryAsOf(newestReceipt: latest, now: Date(), margin: configuration.registryPublishMargin)
        let started = ContinuousClock.now
        try await cancelWhenGracefulShutdown { [self] in
            while true {
                let attempt = ContinuousClock.now
                let settlement = await registryLoader.waitUntilSettled(
                    asOf: asOf, settle: configuration.registrySettle, timeout: configuration.registryLagWait)
                func count(_ label: String) {
                    Counter(label: "policy_registry_waits_total", dimensions: [("current", label)]).increment()
                }
                let metadata: Logger.Metadata = ["events": "\(behind.count)", "waited": "\(ContinuousClock.now - started)"]
                switch settlement {
                case .settled:
                    count("yes")
                    return
                case .busy:
                    // A wait that graceful shutdown ended answers busy too: the batch is left to the next owner.
                    try Task.checkCancellation()
                    count("busy")
                    logger.warning("the registry feed did not go quiet in time; deciding with the current view", metadata: metadata)
                    return
                case .behind:
                    count("behind")
                    behindAnswers.add(1, ordering: .relaxed)
                    try Task.checkCancellation()
                    logger.warning("the registry view is behind the feed or empty; the batch waits", metadata: metadata)
                    // A wait that ended at once (the instant lies beyond the timeout) is not retried in a spin.
                    let minimum = Duration.seconds(1)
                    if ContinuousClock.now - attempt < minimum { try await Task.sleep(for: minimum) }
                }
            }
        }
    }

    static func decode(_ message: KafkaMessage) -> Result<RawEventEnvelope, ProtocolDecodingError> {
        do throws(ProtocolDecodingError) {
            return .success(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: message.value ?? []))
        } catch {
            return .failure(error)
        }
    }

    /// Claims the batch's nonces, retrying until the store answers (fail closed: a batch is never
    /// decided without the durable reuse check). Returns early only on cancellation or graceful
    /// shutdown, by throwing.
    private func claimNonces(_ events: [RawEventEnvelope], ledger: GattNonceLedger) async throws {
        try await untilStored("claiming GATT nonces", messages: events.count) { try await ledger.prepare(events, history: self.history) }
    }

    /// Runs `work` until the policy's database answers (`BatchStoreRetry`): the batch waits meanwhile,
    /// rather than being decided without the durable checks or committed without its punches stored.
    /// Returns early only on cancellation or graceful shutdown, by throwing; the batch then stays
    /// uncommitted for the next owner.
    private func untilStored(_ what: String, messages: Int, _ work: () async throws -> Void) async throws {
        var logger = self.logger
        logger[metadataKey: "step"] = .string(what)
        let done: Void? = await BatchStoreRetry.untilStored(messages: messages, logger: logger, health: storeHealth, work)
        if done == nil { throw CancellationError() }
    }

    private func pruneNoncesIfDue() async {
        guard let nonceLedger else { return }
        let now = clock()
        guard Self.isDue(lastNoncePrune, now: now, every: configuration.noncePruneInterval) else { return }
        do {
            try await nonceLedger.store.prune(expiredBefore: now.addingTimeInterval(-configuration.spentNonceRetention))
        } catch {
            logger.warning("pruning spent GATT nonces failed", metadata: ["error": .string(PostgresFailure.description(of: error))])
        }
    }

    /// The vetted event for one raw record, or its dead letter when it cannot be read.
    func decide(_ message: KafkaMessage, book: PolicyBook) -> KafkaOutgoingMessage {
        switch Self.decode(message) {
        case .success(let raw): return decide(raw, message: message, book: book).message
        case .failure(let error): return undecodable(message, error: error)
        }
    }

    private func undecodable(_ message: KafkaMessage, error: ProtocolDecodingError) -> KafkaOutgoingMessage {
        Self.deadLetters.increment()
        logger.warning(
            "undecodable raw event sent to the dead-letter topic",
            metadata: [
                "partition": "\(message.partition)", "offset": "\(message.offset)", "error": .string(error.description),
            ])
        return deadLetter(message, error: error, now: clock())
    }

    /// The vetted event for one raw event (or its dead letter), and the punch it accepted, if any.
    func decide(_ raw: RawEventEnvelope, message: KafkaMessage, book: PolicyBook) -> (message: KafkaOutgoingMessage, punch: PunchRecord?) {
        let now = clock()
        let policy = book.policy(for: raw, history: history)
        let context = PolicyContext(registry: registry, history: history, now: now, settings: policy.settings)
        let decision = engine.decide(raw, context: context, policy: policy)
        let punch = history.record(decision, for: raw, registry: registry)
        Counter(label: "policy_decisions_total", dimensions: [("outcome", decision.outcome.rawValue)]).increment()
        for result in decision.ruleResults where result.fired {
            Counter(label: "policy_rule_fired_total", dimensions: [("rule", result.ruleId.rawValue), ("mode", result.mode.rawValue)])
                .increment()
        }
        let vetted = VettedEvent(raw: raw, decision: decision)
        do {
            let record = try ProtocolCodec.wire.record(for: vetted)
            return (KafkaOutgoingMessage(topic: configuration.vettedTopic, key: record.key, value: record.value), punch)
        } catch {
            // Only a non-finite number can fail to encode; what came in decoded, so this is a bug
            // worth a dead letter rather than a stopped pipeline.
            logger.error("vetted event failed to encode", metadata: ["error": .string(String(describing: error))])
            return (deadLetter(message, reason: .processingFailed, detail: String(describing: error), field: nil, now: now), nil)
        }
    }

    private func deadLetter(_ message: KafkaMessage, error: ProtocolDecodingError, now: Date) -> KafkaOutgoingMessage {
        KafkaOutgoingMessage(
            deadLetter: DeadLetter(undecodable: message, error: error, consumer: configuration.consumer.groupId, failedAt: now),
            topic: configuration.deadLetterTopic)
    }

    private func deadLetter(
        _ message: KafkaMessage, reason: DeadLetterReason, detail: String, field: String?, now: Date
    ) -> KafkaOutgoingMessage {
        let letter = DeadLetter(
            sourceTopic: message.topic, partition: message.partition, offset: message.offset, key: message.keyString,
            payload: Data(message.value ?? []), reason: reason, detail: detail, errorField: field,
            consumer: configuration.consumer.groupId, failedAt: now
        )
        return KafkaOutgoingMessage(deadLetter: letter, topic: configuration.deadLetterTopic)
    }

    /// Sends until every message has a successful delivery report, sending again only what the
    /// broker refused (the merger dedupes, so order across a retry does not matter). A producer
    /// that can no longer take work throws, and the batch stays uncommitted for the next owner.
    private func confirmDelivery(of messages: [KafkaOutgoingMessage], enqueued: KafkaPendingDelivery) async throws {
        var pending = messages
        var attempt = 0
        var reports = await enqueued.reports()
        while !pending.isEmpty {
            if attempt > 0 { reports = try await producer.sendBatch(pending) }
            let failed = zip(pending, reports).filter { !$0.1.isDelivered }
            guard !failed.isEmpty else { return }
            attempt += 1
            logger.warning(
                "vetted events not delivered; retrying",
                metadata: [
                    "failed": "\(failed.count)", "attempt": "\(attempt)", "error": .string(String(describing: failed[0].1.error)),
                ])
            pending = failed.map(\.0)
            try await Task.sleep(for: configuration.redeliveryBackoff)
        }
    }
}
