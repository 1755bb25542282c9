import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime
import SessionMergerCore
import Synchronization

/// What one batch did, after its transaction committed.
package struct VettedBatchResult: Sendable {
    /// One verdict per decoded message, in message order (produce them after commit).
    package var verdicts: [AttendanceVerdict]
    /// Messages that could not be decoded (already sent to the sink).
    package var deadLetters: [DeadLetter]
    /// The session changes written to the outbox, in order.
    package var sessionChanges: [SessionDelta]
    /// The offsets stored with the batch (next offset to read per partition).
    package var nextOffsets: [TopicPartition: Int64]
    /// Transaction attempts (more than 1 when a write conflict forced a retry).
    package var attempts: Int
    /// The transactions the batch was stored in: 1, or one per write lane with messages.
    package var transactions = 1
    /// Accepted events older than their timeline's watermark: recorded and answered, in no session.
    package var beyondHorizon = 0
}

/// Turns a polled batch of `attendance.events.vetted` messages into ONE PostgreSQL transaction:
///
/// 1. decode; undecodable messages become dead letters (sent before the transaction);
/// 2. a key recorded earlier, or earlier in this batch, is not applied again; it is answered
///    `duplicate` (same fingerprint, accepted original: the original receipt and session),
///    `rejected` (same fingerprint, rejected original: its reasons and action) or `payloadMismatch`
///    (different fingerprint). Keys recorded earlier are found in `merger.events` only when needed:
///    a batch is first tried as all new, and the events insert itself reports a key already there
///    (`ON CONFLICT DO NOTHING`); then that transaction is rolled back and the batch is decided
///    again with the keys looked up first (a redelivery, after a device retry or a restart);
/// 3. policy-rejected events and events without a site are recorded `rejected` (409) and never
///    reach a timeline;
/// 4. accepted events are applied to the `SessionTimeline` of their (user, site), loaded and locked
///    in key order; then `closeIdle(now:)` and, for large timelines, `compact(now:)`;
/// 5. write the events, the session keys, the timelines (optimistic version), the sessions, the
///    session changes (outbox) and the offsets; commit.
///
/// A write conflict (a concurrent transaction recorded a key or wrote a timeline first) rolls back
/// and retries; the retry sees the other transaction's result. Every other error is thrown with the
/// transaction rolled back: nothing of the batch is stored and the caller retries it.
///
/// With `writeLanes` above 1, every user belongs to one lane (`lane(ofUser:count:)`, a stable hash), and
/// a batch of at least `2 * minimumMessagesPerLane` messages is stored as one transaction per lane that
/// has messages, run concurrently (steps 2-5 each, each with its lane's offsets: see
/// `StoredOffsetsTable`). After a crash between two lanes' commits, the partition resumes at the
/// smallest lane offset and the messages of a lane below its own offset are skipped: each message is
/// stored once, with its offsets, as in one transaction. The batch's verdicts go out once every lane has
/// committed, so a committed lane's events are then answered only when their devices send them again
/// (`duplicate`, with the stored receipt), as after a crash right after one transaction's commit.
package final class VettedBatchProcessor: Sendable {
    private let client: PostgresClient
    private let configuration: SessionMergerConfiguration
    private let deadLetters: any DeadLetterSink
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private let userSites: @Sendable (String) -> [String]?
    private let timelineCache: TimelineCache
    private let sessionKeySites: SessionKeySiteCache
    /// The last batch held keys recorded before it: look the next one's keys up first.
    private let redeliveriesSeen = Atomic<Bool>(false)
    /// Per assigned partition whose lanes stored up to different offsets: each lane's offset (its
    /// messages below it are stored). Set on assignment, dropped once a batch passes them all.
    private let laneOffsets = Mutex<[TopicPartition: [Int64]]>([:])
    /// What this process loaded or stored per partition: a table restored under it stops the process.
    private let offsetsWatch = StoredOffsetsWatch()

    /// - Parameter userSites: the sites a user works at (the registry feed's users), used to place a
    ///   check-out or heartbeat whose session key is not known yet (it overtook its check-in) when
    ///   the user has exactly one site.
    package init(
        client: PostgresClient, configuration: SessionMergerConfiguration, deadLetters: any DeadLetterSink,
        logger: Logger, clock: @escaping @Sendable () -> Date = { Date() },
        userSites: @escaping @Sendable (String) -> [String]? = { _ in nil }
    ) {
        self.client = client
        self.configuration = configuration
        self.deadLetters = deadLetters
        self.logger = logger
        self.clock = clock
        self.userSites = userSites
        self.timelineCache = TimelineCache(capacity: configuration.timelineCacheCapacity)
        // Keys are far fewer than events (one per device session); the same bound serves.
        self.sessionKeySites = SessionKeySiteCache(capacity: configuration.timelineCacheCapacity)
    }

    /// Timelines held in memory between batches.
    package var cachedTimelines: Int { timelineCache.count }

    /// The consumer identity written into dead letters.
    var consumerName: String { "session-merger/\(configuration.consumer.groupId)" }

    /// The stored next offsets of `partitions` (the rebalance listener seeks there): the smallest of
    /// their lanes'. The lanes' own offsets are kept to skip what each lane already stored.
    package func storedOffsets(for partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        let stored = try await StoredOffsetsTable.load(
            groupId: configuration.consumer.groupId, partitions: partitions, lanes: configuration.writeLanes, client: client,
            logger: logger)
        laneOffsets.withLock { offsets in
            for partition in partitions { offsets[partition] = nil }
            for (partition, lanes) in stored where lanes.lanes.contains(where: { $0 > lanes.resume }) {
                offsets[partition] = lanes.lanes
            }
        }
        let resume = stored.mapValues(\.resume)
        offsetsWatch.loaded(resume, of: partitions)
        return resume
    }

    /// The write lane of a user's messages among `count`: FNV-1a of the user id, so a user keeps their
    /// lane across batches and restarts (the stored lane offsets depend on it).
    static func lane(ofUser userId: String, count: Int) -> Int {
        guard count > 1 else { return 0 }
        return Int(FNV1a.hash(userId) % UInt64(count))
    }

    /// `messages` without those a lane stored before a restart (below that lane's stored offset). A
    /// partition read from below its resume offset is not the log the offsets were stored against (the
    /// broker lost it, and the consumer reads the new one from its start): nothing of it is skipped.
    private func withoutStored(_ messages: [DecodedMessage]) -> [DecodedMessage] {
        let lanes = configuration.writeLanes
        return laneOffsets.withLock { offsets in
            guard !offsets.isEmpty else { return messages }
            for item in messages {
                let partition = TopicPartition(topic: item.message.topic, partition: item.message.partition)
                if let stored = offsets[partition], item.message.offset < stored.min() ?? 0 { offsets[partition] = nil }
            }
            return messages.filter { item in
                let partition = TopicPartition(topic: item.message.topic, partition: item.message.partition)
                guard let stored = offsets[partition] else { return true }
                return item.message.offset >= stored[Self.lane(ofUser: item.raw.userId, count: lanes)]
            }
        }
    }

    /// Forgets the lane offsets a committed batch has gone past (kept until then: a batch stored again
    /// after a failure must skip the same messages).
    private func forgetLaneOffsets(passedBy nextOffsets: [TopicPartition: Int64]) {
        laneOffsets.withLock { offsets in
            guard !offsets.isEmpty else { return }
            for (partition, next) in nextOffsets where (offsets[partition]?.max() ?? .max) <= next { offsets[partition] = nil }
        }
    }

    /// The offsets to store for each of `lanes`: `nextOffsets`, except that a lane stored further
    /// before a restart keeps its offset (its messages up to there were skipped as stored, and a lower
    /// offset would have them read and answered again after another restart). Lanes with the same
    /// offsets share one entry.
    private func offsetsToStore(_ nextOffsets: [TopicPartition: Int64], lanes: [Int]) -> [([TopicPartition: Int64], [Int])] {
        let known = laneOffsets.withLock { $0 }
        guard !known.isEmpty else { return [(nextOffsets, lanes)] }
        var groups: [([TopicPartition: Int64], [Int])] = []
        for lane in lanes {
            var offsets = nextOffsets
            for (partition, next) in nextOffsets {
                if let stored = known[partition], stored.indices.contains(lane) { offsets[partition] = max(next, stored[lane]) }
            }
            if let index = groups.firstIndex(where: { $0.0 == offsets }) {
                groups[index].1.append(lane)
            } else {
                groups.append((offsets, [lane]))
            }
        }
        return groups
    }

    /// A batch decoded, ready to be stored.
    package struct DecodedBatch: Sendable {
        var decoded: [DecodedMessage]
        var letters: [DeadLetter]
        var nextOffsets: [TopicPartition: Int64]
        /// The offset of the batch's first message per partition.
        var firstOffsets: [TopicPartition: Int64]
        /// The messages in the batch.
        package var count: Int
    }

    /// Processes one batch in one transaction (see the type's documentation): `decode`, then `store`.
    package func process(_ messages: [KafkaMessage]) async throws -> VettedBatchResult {
        try await store(await decode(messages))
    }

    /// Decodes a batch (step 1): no PostgreSQL, so the pipeline decodes the next batch while the
    /// previous one is being stored.
    package func decode(_ messages: [KafkaMessage]) async -> DecodedBatch {
        let (decoded, letters) = await decode(messages, failedAt: clock())
        let batch = KafkaMessageBatch(messages: messages)
        return DecodedBatch(
            decoded: decoded, letters: letters, nextOffsets: batch.nextOffsets, firstOffsets: batch.firstOffsets, count: messages.count)
    }

    /// Stores a decoded batch in one transaction (steps 2-5), or in lanes; the dead letters are sent first.
    package func store(_ batch: DecodedBatch) async throws -> VettedBatchResult {
        let outcome: TransactionOutcome, attempts: Int
        var transactions = 1
        offsetsWatch.reading(from: batch.firstOffsets)
        let messages = withoutStored(batch.decoded)
        if let lanes = Self.writeLanes(of: messages, count: configuration.writeLanes) {
            (outcome, attempts) = try await storeInLanes(lanes, of: messages, letters: batch.letters, nextOffsets: batch.nextOffsets)
            transactions = lanes.count
        } else {
            (outcome, attempts) = try await storeLane(
                messages, letters: batch.letters, nextOffsets: batch.nextOffsets, offsetLanes: Array(0..<configuration.writeLanes))
        }
        forgetLaneOffsets(passedBy: batch.nextOffsets)
        offsetsWatch.committed(batch.nextOffsets)
        // Redeliveries come in runs (a producer retrying after a restart): look up first until a batch
        // holds none.
        redeliveriesSeen.store(outcome.recordedBefore > 0, ordering: .relaxed)
        return VettedBatchResult(
            verdicts: outcome.verdicts, deadLetters: batch.letters, sessionChanges: outcome.changes, nextOffsets: batch.nextOffsets,
            attempts: attempts, transactions: transactions, beyondHorizon: outcome.beyondHorizon)
    }

    /// Stores `messages` in one transaction with `nextOffsets` as the offsets of `offsetLanes`, the
    /// dead letters sent first; then keeps its timelines and session keys in memory.
    private func storeLane(
        _ messages: [DecodedMessage], letters: [DeadLetter], nextOffsets: [TopicPartition: Int64], offsetLanes: [Int]
    ) async throws -> (TransactionOutcome, Int) {
        func transaction(_ letters: [DeadLetter], lookUpRecorded: Bool) async throws -> (TransactionOutcome, Int) {
            try await BatchTransaction.run(
                client: client, deadLetters: letters, to: deadLetters, retries: configuration.conflictRetries, logger: logger,
                isConflict: { $0 is MergerWriteConflict }
            ) { connection in
                try await self.apply(
                    messages, nextOffsets: nextOffsets, offsetLanes: offsetLanes, now: self.clock(), lookUpRecorded: lookUpRecorded,
                    on: connection)
            }
        }
        let outcome: TransactionOutcome, attempts: Int
        if redeliveriesSeen.load(ordering: .relaxed) {
            (outcome, attempts) = try await transaction(letters, lookUpRecorded: true)
        } else {
            do {
                (outcome, attempts) = try await transaction(letters, lookUpRecorded: false)
            } catch is RecordedKeysInBatch {
                // The dead letters went out with the first try.
                let (retried, retries) = try await transaction([], lookUpRecorded: true)
                (outcome, attempts) = (retried, retries + 1)
            }
        }
        timelineCache.store(outcome.timelines)
        sessionKeySites.store(outcome.sessionKeySites)
        return (outcome, attempts)
    }

    /// Stores a batch as concurrent transactions, one per lane with messages (users never span two
    /// lanes, so the lanes touch disjoint rows), each with its lane's offsets; the first also stores
    /// those of the lanes without messages in this batch (they have nothing of it to store). A failure
    /// leaves the batch to be stored again: the events of lanes that committed are then found recorded
    /// and answered from their rows, as any redelivery.
    private func storeInLanes(
        _ lanes: [(lane: Int, indices: [Int])], of decoded: [DecodedMessage], letters: [DeadLetter],
        nextOffsets: [TopicPartition: Int64]
    ) async throws -> (TransactionOutcome, Int) {
        let idle = Set(0..<configuration.writeLanes).subtracting(lanes.map(\.lane)).sorted()
        let outcomes = try await withThrowingTaskGroup(of: (Int, TransactionOutcome, Int).self) { group in
            for (position, lane) in lanes.enumerated() {
                group.addTask {
                    let (outcome, attempts) = try await self.storeLane(
                        lane.indices.map { decoded[$0] }, letters: position == 0 ? letters : [], nextOffsets: nextOffsets,
                        offsetLanes: position == 0 ? [lane.lane] + idle : [lane.lane])
                    return (position, outcome, attempts)
                }
            }
            var outcomes = [(TransactionOutcome, Int)?](repeating: nil, count: lanes.count)
            for try await (position, outcome, attempts) in group { outcomes[position] = (outcome, attempts) }
            return outcomes.compactMap { $0 }
        }
        // One verdict per message, back in message order; each lane's session changes in its order.
        var verdicts = [AttendanceVerdict?](repeating: nil, count: decoded.count)
        for (lane, (outcome, _)) in zip(lanes, outcomes) {
            for (index, verdict) in zip(lane.indices, outcome.verdicts) { verdicts[index] = verdict }
        }
        return (
            TransactionOutcome(
                verdicts: verdicts.compactMap { $0 }, changes: outcomes.flatMap(\.0.changes), timelines: [:], sessionKeySites: [:],
                recordedBefore: outcomes.reduce(0) { $0 + $1.0.recordedBefore },
                beyondHorizon: outcomes.reduce(0) { $0 + $1.0.beyondHorizon }),
            outcomes.map(\.1).max() ?? 1
        )
    }

    /// The fewest messages a write lane gets: below it, a second transaction costs more than it saves.
    static let minimumMessagesPerLane = 64

    /// Splits a batch into its users' lanes (`lane(ofUser:count:)`), each lane's messages in batch
    /// order, as positions in the batch; nil when it is to be stored in one transaction (one lane asked,
    /// fewer than `2 * minimumMessagesPerLane` messages, or every message in one lane).
    static func writeLanes(of messages: [DecodedMessage], count: Int) -> [(lane: Int, indices: [Int])]? {
        guard count > 1, messages.count >= 2 * minimumMessagesPerLane else { return nil }
        var result = [[Int]](repeating: [], count: count)
        var laneOfUser: [String: Int] = [:]
        for (index, message) in messages.enumerated() {
            let user = message.raw.userId
            let lane = laneOfUser[user] ?? lane(ofUser: user, count: count)
            laneOfUser[user] = lane
            result[lane].append(index)
        }
        let filled = result.enumerated().filter { !$0.element.isEmpty }.map { (lane: $0.offset, indices: $0.element) }
        return filled.count > 1 ? filled : nil
    }

    /// Decodes a batch, in order. Large batches are split across the cores: decoding is most of the
    /// merger's own CPU, and PostgreSQL waits for it.
    private func decode(_ messages: [KafkaMessage], failedAt: Date) async -> ([DecodedMessage], [DeadLetter]) {
        let consumer = consumerName
        @Sendable func decode(_ slice: ArraySlice<KafkaMessage>) -> ([DecodedMessage], [DeadLetter]) {
            var decoded: [DecodedMessage] = []
            var letters: [DeadLetter] = []
            decoded.reserveCapacity(slice.count)
            for message in slice {
                guard let value = message.value, !value.isEmpty else {
                    letters.append(DeadLetter(emptyRecord: message, consumer: consumer, failedAt: failedAt))
                    continue
                }
                do throws(ProtocolDecodingError) {
                    let (vetted, rawSource) = try ProtocolCodec.wire.decode(VettedEventRecord.self, from: value, keepingSourceOf: "raw")
                    guard let rawSource else { throw ProtocolDecodingError.missingField(path: "raw") }
                    decoded.append(DecodedMessage(message: message, vetted: vetted, rawSource: rawSource))
                } catch {
                    letters.append(DeadLetter(undecodable: message, error: error, consumer: consumer, failedAt: failedAt))
                }
            }
            return (decoded, letters)
        }
        let lanes = min(ProcessInfo.processInfo.activeProcessorCount, messages.count / 64)
        guard lanes > 1 else { return decode(messages[...]) }
        let chunk = (messages.count + lanes - 1) / lanes
        return await withTaskGroup(of: (Int, [DecodedMessage], [DeadLetter]).self) { group in
            for lane in 0..<lanes {
                let slice = messages[(lane * chunk)..<min(messages.count, (lane + 1) * chunk)]
                group.addTask {
                    let (decoded, letters) = decode(slice); return (lane, decoded, letters)
                }
            }
            var parts = [([DecodedMessage], [DeadLetter])](repeating: ([], []), count: lanes)
            for await (lane, decoded, letters) in group { parts[lane] = (decoded, letters) }
            return (parts.flatMap(\.0), parts.flatMap(\.1))
        }
    }

    // MARK: - The transaction

    struct DecodedMessage: Sendable {
        var message: KafkaMessage
        /// What the merger reads of the event: the payload's details are not decoded (they were the
        /// larger part of decoding, and decoding a quarter of the merger's CPU).
        var vetted: VettedEventRecord
        /// The raw envelope's JSON as it arrived: stored as it is rather than encoded again (encoding
        /// it was a quarter of the merger's CPU).
        var rawSource: ArraySlice<UInt8>
        var raw: VettedEventRecord.Envelope { vetted.raw }
        var key: String { vetted.raw.idempotencyKey }
    }

    /// What the transaction decided for one message.
    enum Disposition {
        /// Recorded before this batch.
        case recorded(RecordedEvent)
        /// A repeat of message `index` of this batch.
        case repeatOf(Int)
        /// New and rejected (by policy, or because it cannot become a fact).
        case rejected(reasons: [String], action: AppAction, retryAfter: Int?, siteId: String?)
        /// New and accepted.
        case accepted(AttendanceFact)
    }

    /// A batch tried as all new holds keys recorded before it: decide it again knowing them.
    struct RecordedKeysInBatch: Error {}

    struct TransactionOutcome {
        var verdicts: [AttendanceVerdict]
        var changes: [SessionDelta]
        /// The timelines written, at the version they had before (for the cache).
        var timelines: [MergerStore.TimelineKey: LoadedTimeline]
        /// Session keys this transaction found or stored in `session_keys`, with their site.
        var sessionKeySites: [MergerStore.UserSessionKey: String]
        /// Keys of the batch recorded before it (looked up first; 0 when the batch was tried as all new).
        var recordedBefore: Int
        /// Accepted events older than their timeline's watermark.
        var beyondHorizon: Int
    }

    private func apply(
        _ batch: [DecodedMessage], nextOffsets: [TopicPartition: Int64], offsetLanes: [Int], now: Date, lookUpRecorded: Bool,
        on connection: PostgresConnection
    ) async throws -> TransactionOutcome {
        let logger = self.logger
        let policy = configuration.policy
        let recorded =
            lookUpRecorded
            ? try await MergerStore.recordedEvents(keys: Array(Set(batch.map(\.key))), on: connection, logger: logger) : [:]

        // Sites of device session keys: the site first recorded with the key (the table), else the first
        // this batch names, so a key-only event goes where it would in any other batching.
        var batchKeySites: [MergerStore.UserSessionKey: String] = [:]
        var wantedKeys = Set<MergerStore.UserSessionKey>()
        for item in batch where item.vetted.decision.outcome == .accept {
            guard let sessionKey = item.raw.payload.sessionKey else { continue }
            let key = MergerStore.UserSessionKey(userId: item.raw.userId, sessionKey: sessionKey)
            if let site = Self.explicitSite(item.raw) {
                if batchKeySites[key] == nil { batchKeySites[key] = site }
            } else {
                wantedKeys.insert(key)
            }
        }
        let keys = wantedKeys.union(batchKeySites.keys)
        let cachedKeySites = sessionKeySites.sites(of: keys)
        var storedKeySites = try await MergerStore.sitesOfSessionKeys(
            keys.filter { cachedKeySites[$0] == nil }, on: connection, logger: logger)
        storedKeySites.merge(cachedKeySites) { stored, _ in stored }
        // A session key nobody has seen yet (its check-in is late): the user's only site, from the
        // registry, else from the user's timelines.
        var userFallback: [String: String] = [:]
        let unresolvedUsers = Set(wantedKeys.filter { storedKeySites[$0] == nil && batchKeySites[$0] == nil }.map(\.userId))
        var askTimelines: [String] = []
        for user in unresolvedUsers {
            if let sites = userSites(user), sites.count == 1 { userFallback[user] = sites[0] } else { askTimelines.append(user) }
        }
        for (user, sites) in try await MergerStore.timelineSites(users: askTimelines, on: connection, logger: logger) where sites.count == 1
        {
            userFallback[user] = sites[0]
        }

        // Decide every message (first occurrence of a key decides; repeats follow it).
        var dispositions: [Disposition] = []
        dispositions.reserveCapacity(batch.count)
        var firstIndex: [String: Int] = [:]
        for (index, item) in batch.enumerated() {
            if let earlier = recorded[item.key] {
                dispositions.append(.recorded(earlier))
                continue
            }
            if let first = firstIndex[item.key] {
                dispositions.append(.repeatOf(first))
                continue
            }
            firstIndex[item.key] = index
            let decision = item.vetted.decision
            guard decision.outcome == .accept else {
                let reasons = decision.reasons.isEmpty ? ["refused by attendance policy"] : decision.reasons
                dispositions.append(
                    .rejected(
                        reasons: reasons, action: decision.action, retryAfter: decision.retryAfterSeconds,
                        siteId: Self.explicitSite(item.raw)))
                continue
            }
            let userId = item.raw.userId
            do throws(FactMappingError) {
                var fact = try AttendanceFact(record: item.vetted) { sessionKey in
                    let key = MergerStore.UserSessionKey(userId: userId, sessionKey: sessionKey)
                    return storedKeySites[key] ?? batchKeySites[key] ?? userFallback[userId]
                }
                // The timeline's clock is its latest receipt: one stamped ahead of this host's clock (a
                // gateway whose clock runs ahead) would age the user's check-outs past their grace at once
                // for as long. It counts as now; the events table keeps the receipt as stamped.
                fact.receivedAt = min(fact.receivedAt, now)
                dispositions.append(.accepted(fact))
            } catch {
                let reason: String
                switch error {
                case .unknownSite(_, let sessionKey):
                    reason =
                        sessionKey.map { "unknown_site: no site is known for session key \($0) (its check-in was never recorded)" }
                        ?? "unknown_site: the event names no site"
                case .rejectedByPolicy(_, let reasons):
                    reason = reasons.first ?? "refused by attendance policy"
                }
                dispositions.append(.rejected(reasons: [reason], action: .contactAdmin, retryAfter: nil, siteId: nil))
            }
        }

        // Timelines of the accepted facts, locked in key order.
        var timelineKeys = Set<MergerStore.TimelineKey>()
        for case .accepted(let fact) in dispositions {
            timelineKeys.insert(MergerStore.TimelineKey(userId: fact.userId, siteId: fact.siteId))
        }
        var timelines = try await MergerStore.lockTimelines(
            Array(timelineKeys), policy: policy, cache: timelineCache, on: connection, logger: logger)
        for key in timelineKeys where timelines[key] == nil {
            timelines[key] = LoadedTimeline(
                timeline: try SessionTimeline(userId: key.userId, siteId: key.siteId, policy: policy), version: 0)
        }

        // Apply in message order.
        var changes: [SessionDelta] = []
        var sessionOf: [Int: String] = [:]
        var moved: [MergerStore.TimelineKey: Set<String>] = [:]
        var beyondHorizon = 0
        for (index, disposition) in dispositions.enumerated() {
            guard case .accepted(let fact) = disposition else { continue }
            let key = MergerStore.TimelineKey(userId: fact.userId, siteId: fact.siteId)
            let outcome = try timelines[key]!.timeline.apply(fact)
            if case .beyondHorizon = outcome.disposition { beyondHorizon += 1 }
            changes += outcome.changes
            if let session = outcome.sessionId { sessionOf[index] = session }
            if !outcome.movedKeys.isEmpty { moved[key, default: []].formUnion(outcome.movedKeys) }
        }
        // An event a later one in this batch moved is recorded where it ended up.
        if !moved.isEmpty {
            for (index, disposition) in dispositions.enumerated() {
                guard case .accepted(let fact) = disposition else { continue }
                let key = MergerStore.TimelineKey(userId: fact.userId, siteId: fact.siteId)
                guard moved[key]?.contains(fact.idempotencyKey) == true else { continue }
                sessionOf[index] = timelines[key]!.timeline.placement(ofIdempotencyKey: fact.idempotencyKey)?.sessionId
            }
        }
        // Where the moved events recorded before are now (written after this batch's rows).
        var moves: [(key: String, sessionId: String?)] = []
        for (key, keys) in moved {
            for eventKey in keys.sorted() {
                guard let placement = timelines[key]!.timeline.placement(ofIdempotencyKey: eventKey) else { continue }
                moves.append((eventKey, placement.sessionId))
            }
        }
        for key in timelineKeys.sorted() {
            changes += timelines[key]!.timeline.closeIdle(now: now)
            if timelines[key]!.timeline.eventCount > configuration.compactionThreshold {
                changes += timelines[key]!.timeline.compact(now: now).changes
            }
        }

        // Rows and verdicts.
        var events: [MergerStore.EventRow] = []
        var rowIndex: [String: Int] = [:]
        var newKeySites: [MergerStore.UserSessionKey: String] = [:]
        var verdicts: [AttendanceVerdict] = []
        for (index, item) in batch.enumerated() {
            let raw = item.raw
            let decision = item.vetted.decision
            func verdict(
                _ outcome: VerdictOutcome, receipt: String? = nil, sessionId: String? = nil, reasons: [String] = [],
                action: AppAction = .noAction, retryAfter: Int? = nil, policyVersion: Int? = nil, siteId: String?
            ) -> AttendanceVerdict {
                AttendanceVerdict(
                    requestId: raw.requestId, idempotencyKey: raw.idempotencyKey, userId: raw.userId, deviceId: raw.deviceId,
                    siteId: siteId ?? raw.siteId, outcome: outcome, serverReceiptId: receipt, sessionId: sessionId,
                    reasons: reasons, action: action, retryAfterSeconds: retryAfter, policyVersion: policyVersion,
                    eventTime: raw.payload.eventTime, decidedAt: now, gatewayInstance: raw.gatewayInstance)
            }
            func replay(of original: RecordedEvent) -> AttendanceVerdict {
                if original.payloadFingerprint != raw.payloadFingerprint {
                    return verdict(
                        .payloadMismatch, reasons: ["the Idempotency-Key was first used with a different payload"],
                        siteId: original.siteId)
                }
                if original.accepted {
                    return verdict(
                        .duplicate, receipt: original.serverReceiptId, sessionId: original.sessionId,
                        action: original.action, policyVersion: original.policyVersion, siteId: original.siteId)
                }
                return verdict(
                    .rejected, reasons: original.reasons, action: original.action, retryAfter: original.retryAfterSeconds,
                    policyVersion: original.policyVersion, siteId: original.siteId)
            }

            switch dispositions[index] {
            case .recorded(let original):
                verdicts.append(replay(of: original))
            case .repeatOf:
                // The first occurrence comes earlier in the batch, so its row is already built.
                verdicts.append(replay(of: Self.recordedEvent(from: events[rowIndex[item.key]!])))
            case .rejected(let reasons, let action, let retryAfter, let siteId):
                let row = try Self.eventRow(
                    item, accepted: false, siteId: siteId, sessionId: nil, reasons: reasons, action: action,
                    retryAfter: retryAfter)
                rowIndex[item.key] = events.count
                events.append(row)
                verdicts.append(
                    verdict(
                        .rejected, reasons: reasons, action: action, retryAfter: retryAfter, policyVersion: decision.policyVersion,
                        siteId: siteId))
            case .accepted(let fact):
                let sessionId = sessionOf[index]
                let row = try Self.eventRow(
                    item, accepted: true, siteId: fact.siteId, sessionId: sessionId, reasons: [], action: decision.action,
                    retryAfter: nil)
                rowIndex[item.key] = events.count
                events.append(row)
                if let sessionKey = fact.sessionKey {
                    let key = MergerStore.UserSessionKey(userId: fact.userId, sessionKey: sessionKey)
                    if storedKeySites[key] == nil, newKeySites[key] == nil { newKeySites[key] = fact.siteId }
                }
                verdicts.append(
                    verdict(
                        .accepted, receipt: row.server_receipt_id, sessionId: sessionId, action: decision.action,
                        policyVersion: decision.policyVersion, siteId: fact.siteId))
            }
        }

        let inserted = try await MergerStore.insertEvents(events, on: connection, logger: logger)
        if inserted < events.count {
            // Keys looked up first and recorded since: a concurrent transaction (retried as a conflict).
            // Not looked up: recorded before this batch, which was decided as all new.
            guard lookUpRecorded else { throw RecordedKeysInBatch() }
            throw MergerWriteConflict(what: "\(events.count - inserted) idempotency keys were recorded by a concurrent transaction")
        }
        let insertedKeySites = try await MergerStore.insertSessionKeys(newKeySites, on: connection, logger: logger)
        try await MergerStore.saveTimelines(timelines, on: connection, logger: logger)
        try await MergerStore.applySessionChanges(changes, changedAt: now, on: connection, logger: logger)
        try await MergerStore.moveEvents(moves, on: connection, logger: logger)
        for (offsets, lanes) in offsetsToStore(nextOffsets, lanes: offsetLanes) {
            try await StoredOffsetsTable.store(
                groupId: configuration.consumer.groupId, offsets, lanes: lanes, of: configuration.writeLanes, watch: offsetsWatch,
                on: connection, logger: logger)
        }
        return TransactionOutcome(
            verdicts: verdicts, changes: changes, timelines: timelines,
            sessionKeySites: storedKeySites.merging(insertedKeySites) { stored, _ in stored }, recordedBefore: recorded.count,
            beyondHorizon: beyondHorizon)
    }

    /// The site the envelope or the body names (events and check-ins always do).
    static func explicitSite(_ raw: VettedEventRecord.Envelope) -> String? {
        if let site = raw.siteId, !site.isEmpty { return site }
        guard let site = raw.payload.siteId, !site.isEmpty else { return nil }
        return site
    }

    static func eventRow(
        _ item: DecodedMessage, accepted: Bool, siteId: String?, sessionId: String?, reasons: [String], action: AppAction,
        retryAfter: Int?
    ) throws -> MergerStore.EventRow {
        let raw = item.raw
        let decision = item.vetted.decision
        return MergerStore.EventRow(
            idempotency_key: raw.idempotencyKey, request_id: raw.requestId, user_id: raw.userId, device_id: raw.deviceId,
            site_id: siteId, kind: raw.payload.kind.rawValue, event_type: raw.payload.eventType.rawValue,
            session_key: raw.payload.sessionKey, event_time: raw.payload.eventTime, received_at: raw.receivedAt,
            payload_fingerprint: raw.payloadFingerprint, outcome: accepted ? "accepted" : "rejected",
            http_status: accepted ? 201 : 409, server_receipt_id: ServerReceipt.id(forIdempotencyKey: raw.idempotencyKey),
            session_id: sessionId, reasons: reasons, action: action.rawValue, retry_after_seconds: retryAfter,
            policy_version: decision.policyVersion, risk_score: decision.riskScore, decided_at: decision.decidedAt,
            envelope: String(decoding: item.rawSource, as: UTF8.self),
            gateway_instance: raw.gatewayInstance,
            source_topic: item.message.topic, source_partition: item.message.partition, source_offset: item.message.offset)
    }

    static func recordedEvent(from row: MergerStore.EventRow) -> RecordedEvent {
        RecordedEvent(
            idempotencyKey: row.idempotency_key, payloadFingerprint: row.payload_fingerprint, accepted: row.outcome == "accepted",
            serverReceiptId: row.server_receipt_id, sessionId: row.session_id, reasons: row.reasons,
            action: AppAction(rawValue: row.action), retryAfterSeconds: row.retry_after_seconds,
            policyVersion: row.policy_version, siteId: row.site_id)
    }
}
