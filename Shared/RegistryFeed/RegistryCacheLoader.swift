import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import ServiceLifecycle
import ServiceRuntime
import Synchronization

/// Settings of a `RegistryCacheLoader`.
public struct RegistryCacheLoaderConfiguration: Sendable {
    public var kafka: KafkaConfiguration
    /// The loader joins a group of its own, `<prefix>-<random>`, so every process reads the whole
    /// topic and never shares partitions with another replica.
    public var groupIdPrefix: String
    public var topic: String
    /// "Caught up" also needs the partition to have been quiet (no batch) this long, because the
    /// broker's high watermark may point at the start of the last batch rather than past its end.
    public var quietPeriod: Duration
    /// How often catch-up is checked until it is reached.
    public var checkInterval: Duration

    public init(
        kafka: KafkaConfiguration, groupIdPrefix: String = "registry-cache", topic: String = Topic.registryChanges.name,
        quietPeriod: Duration = .milliseconds(250), checkInterval: Duration = .milliseconds(100)
    ) {
        self.kafka = kafka
        self.groupIdPrefix = groupIdPrefix
        self.topic = topic
        self.quietPeriod = quietPeriod
        self.checkInterval = checkInterval
    }
}

/// Keeps a `RegistryCache` equal to `registry.changes`: reads the topic from its first offset (a
/// late starter rebuilds everything, since the topic is compacted: the latest record of every key
/// is kept) and then follows it, applying each batch as it arrives.
///
/// A `Service`: add it to the process's `ServiceGroup`; graceful shutdown stops reading after the
/// current batch. Gate readiness on `waitUntilCaughtUp(timeout:)`.
///
/// **Caught up** means: the partitions are assigned, and for each one either it is empty or the
/// loader applied an offset ≥ high watermark − 1, and no batch arrived for `quietPeriod`. With
/// Kafka the high watermark is the log end, so offset high − 1 is the last record. The local broker
/// (Tansu 0.6) reports instead the base offset of the last record batch + 1 (see
/// `KafkaConsumer.swift`), so high − 1 is only the first record of the last batch; a fetch returns
/// whole batches, so having read that offset and then seeing the partition go quiet means the rest
/// of the batch was read too. Once reached it stays true: later changes are followed live.
///
/// Records that cannot be decoded are logged and skipped (they never stop the loader).
public final class RegistryCacheLoader: Service, Sendable {
    public let cache: RegistryCache
    public let groupId: String
    private let configuration: RegistryCacheLoaderConfiguration
    private let consumer: KafkaConsumer
    private let progress: ProgressTracker
    private let logger: Logger

    public init(cache: RegistryCache, configuration: RegistryCacheLoaderConfiguration, logger: Logger) throws(KafkaError) {
        self.cache = cache
        self.configuration = configuration
        self.logger = logger
        let groupId = "\(configuration.groupIdPrefix)-\(UInt64.random(in: 0...UInt64.max))"
        self.groupId = groupId
        let progress = ProgressTracker()
        self.progress = progress
        let consumerConfiguration = KafkaConsumerConfiguration.background(
            client: configuration.kafka, groupId: groupId, topics: [configuration.topic])
        self.consumer = try KafkaConsumer(
            configuration: consumerConfiguration, rebalanceListener: FromTheBeginning(progress: progress), logger: logger
        )
    }

    /// True once the cache holds everything the topic held when the loader started (see the type's
    /// documentation); stays true afterwards.
    public var isCaughtUp: Bool { progress.caughtUp.load(ordering: .acquiring) }

    /// Whether the loader has read the start of a refill of the feed (`RegistryFeedRefill`) and not
    /// yet its end: the view then holds part of the registry only.
    public var isReadingRefill: Bool { progress.state.withLock { $0.refillStartedAt != nil } }

    /// Records decoded and handed to the cache, and records skipped because they did not decode.
    public var recordsRead: Int { progress.state.withLock { $0.recordsRead } }
    public var decodeFailures: Int { progress.state.withLock { $0.decodeFailures } }

    /// Waits until `isCaughtUp`; `false` when `timeout` passed first (or the task was cancelled).
    public func waitUntilCaughtUp(timeout: Duration) async -> Bool {
        await poll(timeout: timeout) { isCaughtUp }
    }

    /// Waits until the cache holds every change the feed held at `instant` or later: once `instant`
    /// has passed, the partitions' high watermarks are read and the loader must have applied up to
    /// them. A watermark query that fails (as it may right after a broker restart) is asked again
    /// until the deadline. `false` when `timeout` passed first (or the task was cancelled). A
    /// decision that depends on something the view may not hold yet (a device enrolled a moment
    /// ago) waits on this instead of refusing from a stale view.
    public func waitUntilCurrent(asOf instant: Date, timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        let early = instant.timeIntervalSinceNow
        if early > 0 {
            guard ContinuousClock.now + .milliseconds(Int64(early * 1000)) < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(Int64(early * 1000)))
        }
        guard await waitUntilCaughtUp(timeout: deadline - ContinuousClock.now) else { return false }
        var targets = await readTargets()
        while targets == nil {
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            try? await Task.sleep(for: configuration.checkInterval)
            targets = await readTargets()
        }
        guard let targets else { return false }
        while true {
            let read = progress.state.withLock { $0.lastOffset }
            if targets.allSatisfy({ (read[$0.key] ?? -1) >= $0.value }) { return true }
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// For a consumer that decides from the view: waits until it has caught up (at most `timeout`), or
    /// until a graceful shutdown. Returns false on that shutdown (nothing should be read or decided); a
    /// view still behind at the timeout is said in the log and the consumer goes on with what it holds.
    public func waitBeforeDeciding(timeout: Duration, logger: Logger) async -> Bool {
        let caughtUp = (try? await cancelWhenGracefulShutdown { await self.waitUntilCaughtUp(timeout: timeout) }) ?? false
        if Task.isShuttingDownGracefully {
            logger.info("graceful shutdown before the registry cache caught up: nothing was read or decided")
            return false
        }
        if !caughtUp {
            logger.warning("registry cache not caught up; deciding with what it holds", metadata: ["records": "\(recordsRead)"])
        }
        return true
    }

    /// The last offset of every assigned non-empty partition; `nil` when a query failed or no partition
    /// is assigned (between a revocation and the next assignment nothing is read, so the view cannot be
    /// known to be current).
    private func readTargets() async -> [TopicPartition: Int64]? {
        var targets: [TopicPartition: Int64] = [:]
        let assigned = progress.state.withLock({ $0.assigned })
        guard !assigned.isEmpty else { return nil }
        for tp in assigned {
            guard let marks = try? await consumer.watermarks(tp) else { return nil }
            if marks.high > marks.low { targets[tp] = marks.high - 1 }
        }
        return targets
    }

    /// What `waitUntilSettled` found.
    public enum Settlement: Sendable, Equatable {
        /// Current as of the instant, and the feed has been quiet for the settle time since this
        /// process started reading it.
        case settled
        /// Current as of the instant and holding records, but the feed never went quiet before the
        /// timeout (a registry publishing without pause: a bulk import, or a refill still running).
        case busy
        /// Not current as of the instant, holding no record at all (the feed was lost and not yet
        /// refilled), or in the middle of a refill: nothing can be judged from this view.
        case behind
    }

    /// `waitUntilCurrent(asOf:timeout:)`, and then settled: the view holds at least one record, is
    /// not inside a refill (it read the refill's end marker, `RegistryFeedRefill`) and no batch
    /// arrived for `settle`. After the broker lost the feed, the registry republishes every entity
    /// and the topic fills again over seconds: a view that is "current" against the refilled topic's
    /// first records is not the registry yet, and a decision waits for the refill to end rather than
    /// refusing a device it has not read again. The quiet period covers a feed refilled without
    /// markers, and is needed once per process: later waits need only be current and outside a
    /// refill, so a registry that publishes without pause never holds up a running process. A refill
    /// that meets a running process (a view that settled on part of the feed, a topic deleted and
    /// recreated) holds it too, until the refill's end marker.
    public func waitUntilSettled(asOf instant: Date, settle: Duration, timeout: Duration) async -> Settlement {
        let deadline = ContinuousClock.now + timeout
        guard await waitUntilCurrent(asOf: instant, timeout: timeout) else { return .behind }
        if progress.settled.load(ordering: .acquiring), !isReadingRefill { return .settled }
        while true {
            let (records, inRefill, lastBatchAt) = progress.state.withLock {
                ($0.recordsRead, $0.refillStartedAt != nil, $0.lastBatchAt)
            }
            if records > 0, !inRefill, let lastBatchAt, ContinuousClock.now - lastBatchAt >= settle {
                progress.settled.store(true, ordering: .releasing)
                return .settled
            }
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return records > 0 && !inRefill ? .busy : .behind }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    public func run() async throws {
        try await consumer.consume(alongside: { [self] in await self.monitorCatchUp() }) { batch in
            apply(batch)
            return true
        }
    }

    private func apply(_ batch: KafkaMessageBatch) {
        var records: [RegistryRecord] = []
        records.reserveCapacity(batch.messages.count)
        var failures = 0
        for message in batch.messages {
            guard let key = message.keyString else {
                failures += 1
                logger.warning("registry change without a key skipped", metadata: ["offset": "\(message.offset)"])
                continue
            }
            do {
                records.append(try RegistryRecord.decode(key: key, value: message.value))
            } catch {
                failures += 1
                logger.warning(
                    "undecodable registry change skipped",
                    metadata: [
                        "key": .string(key), "offset": "\(message.offset)", "error": .string(String(describing: error)),
                    ])
            }
        }
        // A record the cache cannot read (a field it needs is missing: a newer registry, say) changes
        // nothing it holds: said and counted as an undecodable one is.
        for (record, outcome) in zip(records, cache.apply(records)) {
            guard case .malformed(let reason) = outcome else { continue }
            failures += 1
            logger.warning(
                "registry change the cache cannot read skipped", metadata: ["key": .string("\(record.key)"), "reason": .string(reason)])
        }
        let next = batch.nextOffsets
        progress.state.withLock { state in
            for record in records { state.followRefill(record) }
            for (tp, offset) in next { state.lastOffset[tp] = max(state.lastOffset[tp] ?? -1, offset - 1) }
            state.lastBatchAt = .now
            state.recordsRead += records.count
            state.decodeFailures += failures
        }
    }

    private func monitorCatchUp() async {
        while !Task.isCancelled, !isCaughtUp {
            try? await Task.sleep(for: configuration.checkInterval)
            if await checkCaughtUp() {
                progress.caughtUp.store(true, ordering: .releasing)
                logger.info(
                    "registry cache caught up",
                    metadata: [
                        "records": "\(recordsRead)", "beacons": "\(cache.counts.beacons)", "group": .string(groupId),
                    ])
            }
        }
    }

    private func checkCaughtUp() async -> Bool {
        let snapshot = progress.state.withLock { $0 }
        guard let assignedAt = snapshot.assignedAt, !snapshot.assigned.isEmpty else { return false }
        let quietSince = snapshot.lastBatchAt ?? assignedAt
        guard ContinuousClock.now - quietSince >= configuration.quietPeriod else { return false }
        for tp in snapshot.assigned {
            guard let marks = try? await consumer.watermarks(tp) else { return false }
            if marks.high <= marks.low { continue }
            guard let read = snapshot.lastOffset[tp], read >= marks.high - 1 else { return false }
        }
        return true
    }
}

// MARK: - Internals

final class ProgressTracker: Sendable {
    struct State: Sendable {
        var assigned: [TopicPartition] = []
        var assignedAt: ContinuousClock.Instant?
        var lastOffset: [TopicPartition: Int64] = [:]
        var lastBatchAt: ContinuousClock.Instant?
        var recordsRead = 0
        var decodeFailures = 0
        /// The version of the refill start marker read last, until its end marker is read.
        var refillStartedAt: Int64?

        mutating func followRefill(_ record: RegistryRecord) {
            guard case .upsert(let change) = record, change.key.entityType.rawValue == RegistryFeedRefill.entityType else { return }
            switch change.key.entityId {
            case RegistryFeedRefill.startedId:
                refillStartedAt = change.version
            case RegistryFeedRefill.endedId:
                if change.payload?[RegistryFeedRefill.startedVersionField]?.int64Value == refillStartedAt { refillStartedAt = nil }
            default:
                break
            }
        }
    }

    let state = Mutex(State())
    let caughtUp = Atomic(false)
    let settled = Atomic(false)
}

/// Starts every assigned partition at offset 0 (the consumer moves it up to the low watermark when
/// the start was deleted), whatever the group committed.
struct FromTheBeginning: KafkaRebalanceListener {
    let progress: ProgressTracker

    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        progress.state.withLock { state in
            state.assigned = partitions
            state.assignedAt = .now
        }
        return Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(0)) })
    }

    func partitionsRevoked(_ partitions: [TopicPartition]) async {
        progress.state.withLock { state in
            state.assigned.removeAll { partitions.contains($0) }
        }
    }
}
