import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Seeks every assigned partition to the offset its owner stored in PostgreSQL with its results
/// (the source of truth; the broker's committed offset may be absent or behind). Partitions without
/// a stored offset start from the group's committed offset, else the earliest. Before partitions are
/// given up (a rebalance, leaving the group at shutdown), `beforeRevoke` lets the owner finish storing
/// what it already took from them, so the next owner loads offsets that include it.
///
/// The stored offsets are read again while PostgreSQL does not answer (a restart during a rebalance):
/// starting the partitions from the broker's offsets instead could store offsets past records a
/// restored database lost, unnoticed. After `loadDeadline` without an answer the process ends (exit
/// code 75, as for a broker that lost its state) and its supervisor starts it again.
public struct StoredOffsetsListener: KafkaRebalanceListener {
    let storedOffsets: @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    let beforeRevoke: @Sendable () async -> Void
    let logger: Logger
    let loadDeadline: Duration
    /// Called instead of ending the process (tests).
    let giveUp: (@Sendable (String) -> Void)?

    public init(
        logger: Logger, beforeRevoke: @escaping @Sendable () async -> Void = {}, loadDeadline: Duration = .seconds(30),
        giveUp: (@Sendable (String) -> Void)? = nil,
        storedOffsets: @escaping @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    ) {
        self.storedOffsets = storedOffsets
        self.beforeRevoke = beforeRevoke
        self.logger = logger
        self.loadDeadline = loadDeadline
        self.giveUp = giveUp
    }

    public func partitionsRevoked(_ partitions: [TopicPartition]) async { await beforeRevoke() }

    public func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        let stored = try await loadStoredOffsets(partitions)
        logger.info(
            "seeking assigned partitions to their stored offsets",
            metadata: [
                "assigned": "\(partitions.count)",
                "stored": .string(stored.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")),
            ])
        return stored
    }

    private func loadStoredOffsets(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        let loaded = await retrying("reading the stored offsets of the assigned partitions", within: loadDeadline, logger: logger) {
            try await storedOffsets(partitions)
        }
        switch loaded {
        case .success(let stored): return stored
        case .failure(let error):
            if Task.isCancelled { throw error }
            let reason =
                "the stored offsets of the assigned partitions could not be read for \(loadDeadline): \(PostgresFailure.description(of: error))"
            guard let giveUp else {
                logger.critical("\(reason); exiting so that the supervisor starts this service again")
                exit(BrokerStateWatch.exitCode)
            }
            giveUp(reason)
            throw error
        }
    }
}

extension KafkaConsumer {
    /// A group consumer of `topics` for an owner that keeps its offsets in its own database, written in
    /// the same transaction as what it stored: it reads from the earliest offset where it has none and
    /// seeks to the stored ones on every assignment (`StoredOffsetsListener`).
    /// - Parameter background: off the request path: long broker waits, few idle fetches.
    public static func resumingFromStoredOffsets(
        client: KafkaConfiguration, topics: [String], group: ConsumerGroupConfiguration, background: Bool = false, logger: Logger,
        beforeRevoke: @escaping @Sendable () async -> Void = {},
        storedOffsets: @escaping @Sendable ([TopicPartition]) async throws -> [TopicPartition: Int64]
    ) throws(KafkaError) -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(client: client, group: group, topics: topics, background: background)
        configuration.autoOffsetReset = .earliest
        let listener = StoredOffsetsListener(logger: logger, beforeRevoke: beforeRevoke, storedOffsets: storedOffsets)
        return try KafkaConsumer(configuration: configuration, rebalanceListener: listener, logger: logger)
    }
}

extension KafkaConsumer {
    /// Commits `offsets` to the broker for tools and lag metrics only: an owner that stores its
    /// offsets with its results reads those, so a failure here is logged (debug) and otherwise ignored.
    public func commitInformational(_ offsets: [TopicPartition: Int64], logger: Logger) async {
        do {
            try await commit(offsets)
        } catch {
            logger.debug("committing offsets to the broker failed (informational)", metadata: ["error": .string("\(error)")])
        }
    }
}

/// What an owner of stored offsets last loaded or stored for each partition it holds, to notice a table
/// that went back under it: PostgreSQL restored from a backup (or the rows deleted) while the owner ran.
/// Its reading position is then past what the table holds, and storing on would write its later offsets
/// over the restored ones, so the records in between (what the restore lost) would never be read again.
///
/// The owner calls `loaded` when partitions are assigned, `reading` with each batch's first offsets
/// before storing it, passes the watch to `StoredOffsetsTable.store` (whose upsert also reads what the
/// table held, and which throws, rolling the batch's transaction back, when a partition's stored offset
/// was below what is expected, or gone), and calls `committed` once the batch's transactions committed. A stored offset above what is expected passes:
/// a batch whose commit went unacknowledged and is stored again, a lane that stored further. A batch
/// that starts below what is expected (a partition read again from the start of a broker's new log)
/// lowers the expectation to its start, so that lanes committing one after the other never see each
/// other's lower offsets as the table going back.
public final class StoredOffsetsWatch: Sendable {
    private let expected = Mutex<[TopicPartition: Int64]>([:])

    public init() {}

    /// At assignment: what the table holds for `partitions` (a partition absent from `stored` has
    /// nothing stored yet).
    public func loaded(_ stored: [TopicPartition: Int64], of partitions: [TopicPartition]) {
        expected.withLock { expected in
            for partition in partitions { expected[partition] = stored[partition] }
        }
    }

    /// Before a batch is stored: the offset of its first message per partition. A batch that starts
    /// below what is expected is a partition read again from an earlier offset (the consumer moved to
    /// the start of a broker's new log, or reset to the earliest kept): from then on the table is only
    /// expected to hold at least that offset, which every lane of the batch writes past.
    public func reading(from firstOffsets: [TopicPartition: Int64]) {
        expected.withLock { expected in
            for (partition, first) in firstOffsets {
                if let known = expected[partition], first < known { expected[partition] = first }
            }
        }
    }

    /// After a batch's transactions committed: its next offsets are stored.
    public func committed(_ nextOffsets: [TopicPartition: Int64]) {
        expected.withLock { $0.merge(nextOffsets) { _, new in new } }
    }

    /// What is expected of `partitions`, those this watch knows.
    func expectations(of partitions: [TopicPartition]) -> [TopicPartition: Int64] {
        expected.withLock { expected in expected.filter { partitions.contains($0.key) } }
    }

    /// Throws `StoredOffsetsWentBack` when a partition's stored offset (the smallest of its lanes', as
    /// the table held it before this transaction wrote) is below what this owner loaded or stored, or is
    /// gone. The caller's transaction then rolls back.
    func verify(groupId: String, _ expectations: [TopicPartition: Int64], stored: [TopicPartition: Int64]) throws {
        for (partition, expected) in expectations.sorted(by: { $0.key < $1.key }) where (stored[partition] ?? -1) < expected {
            throw StoredOffsetsWentBack(groupId: groupId, partition: partition, expected: expected, stored: stored[partition])
        }
    }
}

/// A stored offset went back under its running owner (`StoredOffsetsWatch`): nothing is stored, and
/// the owner must start again from what the table holds. `BatchStoreRetry` ends the process (exit
/// code 75, as for a broker that lost its state) so that its supervisor starts it afresh: the new
/// process seeks every partition to its stored offset and reads again what the restore lost, which
/// the owner's unique keys make harmless where it is still stored.
public struct StoredOffsetsWentBack: Error, CustomStringConvertible {
    public let groupId: String
    public let partition: TopicPartition
    public let expected: Int64
    public let stored: Int64?

    public var description: String {
        "the stored offset of \(partition) for \(groupId) went back under this process (expected at least \(expected), "
            + "the table holds \(stored.map(String.init) ?? "none")): PostgreSQL was restored from a backup or its offsets deleted"
    }
}

/// Where one partition resumes, and what each write lane of its owner has stored.
public struct StoredPartitionOffsets: Sendable, Hashable {
    /// Per lane, in lane order: every message of that lane below it is stored (0: nothing yet).
    public var lanes: [Int64]
    /// The next offset to read: the smallest of the lanes'.
    public var resume: Int64 { lanes.min() ?? 0 }

    public init(lanes: [Int64]) {
        self.lanes = lanes
    }
}

/// The `consumer_offsets` table in which an owner stores its consumer offsets with its results, in
/// the schema first on the connection's search path: `group_id`, `topic`, `partition`, `lane`,
/// `lanes`, `next_offset`, `updated_at`, keyed by (`group_id`, `topic`, `partition`, `lane`). Each
/// owner's migrations create it.
///
/// An owner that stores a batch in one transaction has one lane (lane 0 of 1). An owner that stores a
/// batch as `lanes` concurrent transactions, its messages split between them by a stable key, stores
/// each lane's row in that lane's transaction, so each transaction holds its data and the offsets that
/// cover them; the partition resumes at the smallest lane offset, and a message of a lane below that
/// lane's offset is already stored.
public enum StoredOffsetsTable {
    /// The statements that give an owner's `consumer_offsets`, as first created with one row per
    /// (`group_id`, `topic`, `partition`), a row per write lane: existing rows become lane 0 of 1. An
    /// owner's migration file names them with `byLanePlaceholder`, which `ServiceMigrations` replaces
    /// with this text, so every owner applies the same statements.
    public static let byLaneMigration = """
        ALTER TABLE __SCHEMA__.consumer_offsets
            ADD COLUMN lane int NOT NULL DEFAULT 0 CHECK (lane >= 0),
            ADD COLUMN lanes int NOT NULL DEFAULT 1 CHECK (lanes >= 1),
            ADD CONSTRAINT consumer_offsets_lane_in_range CHECK (lane < lanes);
        ALTER TABLE __SCHEMA__.consumer_offsets DROP CONSTRAINT consumer_offsets_pkey;
        ALTER TABLE __SCHEMA__.consumer_offsets ADD PRIMARY KEY (group_id, topic, partition, lane);
        """

    /// The line of a migration file that stands for `byLaneMigration`.
    public static let byLanePlaceholder = "__STORED_OFFSETS_BY_LANE__"

    /// The stored next offsets of `partitions` for `groupId`, an owner storing in one lane; a
    /// partition without one is absent.
    public static func load(
        groupId: String, partitions: [TopicPartition], client: PostgresClient, logger: Logger
    ) async throws -> [TopicPartition: Int64] {
        try await load(groupId: groupId, partitions: partitions, lanes: 1, client: client, logger: logger).mapValues(\.resume)
    }

    /// The stored offsets of `partitions` for an owner storing in `lanes` lanes; a partition without
    /// any is absent. Rows written under another lane count (the owner's setting changed) say nothing
    /// per lane: they are replaced, in the same transaction, by `lanes` rows at their smallest offset
    /// (or removed, when they do not cover every lane of their count), so a lane batch always finds
    /// a complete set of its own count.
    public static func load(
        groupId: String, partitions: [TopicPartition], lanes: Int, client: PostgresClient, logger: Logger
    ) async throws -> [TopicPartition: StoredPartitionOffsets] {
        try await client.withTransaction(logger: logger) { connection in
            try await load(groupId: groupId, partitions: partitions, lanes: lanes, on: connection, logger: logger)
        }
    }

    /// `load` with `lanes` lanes, in the caller's transaction.
    private static func load(
        groupId: String, partitions: [TopicPartition], lanes: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [TopicPartition: StoredPartitionOffsets] {
        precondition(lanes >= 1, "an owner stores in at least one lane")
        guard !partitions.isEmpty else { return [:] }
        let rows = try await connection.query(
            """
            SELECT o.topic, o.partition, o.lane, o.lanes, o.next_offset FROM consumer_offsets o
            JOIN unnest(\(partitions.map(\.topic))::text[], \(partitions.map(\.partition))::int4[]) AS q(topic, partition)
              ON o.topic = q.topic AND o.partition = q.partition
            WHERE o.group_id = \(groupId)
            """, logger: logger)
        var stored: [TopicPartition: [(lane: Int, lanes: Int, offset: Int64)]] = [:]
        for try await (topic, partition, lane, count, offset) in rows.decode((String, Int32, Int, Int, Int64).self) {
            stored[TopicPartition(topic: topic, partition: partition), default: []].append((lane, count, offset))
        }
        var found: [TopicPartition: StoredPartitionOffsets] = [:]
        for (partition, rows) in stored {
            let counts = Set(rows.map(\.lanes))
            if counts == [lanes] {
                // A lane without a row has stored nothing yet (its first batch did not commit).
                var offsets = [Int64](repeating: 0, count: lanes)
                for row in rows { offsets[row.lane] = row.offset }
                found[partition] = StoredPartitionOffsets(lanes: offsets)
                continue
            }
            let complete = counts.count == 1 && Set(rows.map(\.lane)) == Set(0..<rows[0].lanes)
            try await connection.query(
                """
                DELETE FROM consumer_offsets
                WHERE group_id = \(groupId) AND topic = \(partition.topic) AND partition = \(partition.partition)
                """, logger: logger)
            guard complete, let resume = rows.map(\.offset).min() else {
                logger.warning(
                    "stored offsets of another lane count with a lane missing: the partition is read again from its committed offset",
                    metadata: ["partition": "\(partition)"])
                continue
            }
            let normalized = [partition: resume]
            try await store(groupId: groupId, normalized, lanes: Array(0..<lanes), of: lanes, on: connection, logger: logger)
            found[partition] = StoredPartitionOffsets(lanes: [Int64](repeating: resume, count: lanes))
        }
        return found
    }

    /// Stores `offsets` (the next offset to read per partition) for `groupId`, one lane, in the
    /// caller's transaction.
    public static func store(
        groupId: String, _ offsets: [TopicPartition: Int64], watch: StoredOffsetsWatch? = nil, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await store(groupId: groupId, offsets, lanes: [0], of: 1, watch: watch, on: connection, logger: logger)
    }

    /// Stores `offsets` as the offsets of each of `lanes` (of `count`) in the caller's transaction.
    /// They replace the stored ones, not a maximum: after a broker that lost its log the consumer
    /// re-reads a partition from its start, and the offsets must follow it back. With a `watch`, the
    /// offsets the table held are checked not to have gone back under the owner (`StoredOffsetsWatch`),
    /// in the same statement; if they had, this throws and the caller's transaction rolls back.
    public static func store(
        groupId: String, _ offsets: [TopicPartition: Int64], lanes: [Int], of count: Int, watch: StoredOffsetsWatch? = nil,
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard !offsets.isEmpty, !lanes.isEmpty else { return }
        precondition(lanes.allSatisfy { (0..<count).contains($0) }, "lanes \(lanes) of \(count)")
        let sorted = offsets.sorted { $0.key < $1.key }
        var topics: [String] = [], partitions: [Int32] = [], laneColumn: [Int32] = [], nextOffsets: [Int64] = []
        for (partition, offset) in sorted {
            for lane in lanes {
                topics.append(partition.topic)
                partitions.append(partition.partition)
                laneColumn.append(Int32(lane))
                nextOffsets.append(offset)
            }
        }
        // One statement: the watched partitions' offsets as the table held them before it (a data-modifying
        // WITH runs on the statement's snapshot), and the upsert.
        let expectations = watch?.expectations(of: Array(offsets.keys)) ?? [:]
        let rows = try await connection.query(
            """
            WITH before AS (
                SELECT o.topic, o.partition, min(o.next_offset) AS next_offset FROM consumer_offsets o
                JOIN unnest(\(expectations.map(\.key.topic))::text[], \(expectations.map(\.key.partition))::int4[]) AS q(topic, partition)
                  ON o.topic = q.topic AND o.partition = q.partition
                WHERE o.group_id = \(groupId)
                GROUP BY o.topic, o.partition
            ), stored AS (
                INSERT INTO consumer_offsets (group_id, topic, partition, lane, lanes, next_offset, updated_at)
                SELECT \(groupId), u.topic, u.partition, u.lane, \(count), u.next_offset, now()
                FROM unnest(\(topics)::text[], \(partitions)::int4[], \(laneColumn)::int4[], \(nextOffsets)::int8[])
                     AS u(topic, partition, lane, next_offset)
                ON CONFLICT (group_id, topic, partition, lane)
                DO UPDATE SET lanes = EXCLUDED.lanes, next_offset = EXCLUDED.next_offset, updated_at = now()
            )
            SELECT topic, partition, next_offset FROM before
            """, logger: logger)
        var before: [TopicPartition: Int64] = [:]
        for try await (topic, partition, offset) in rows.decode((String, Int32, Int64).self) {
            before[TopicPartition(topic: topic, partition: partition)] = offset
        }
        try watch?.verify(groupId: groupId, expectations, stored: before)
    }

    /// Deletes `groupId`'s offsets: the broker lost its state and they point into topics that no
    /// longer exist. The next assignment reads each partition from its start; the owner's unique keys
    /// make the re-read harmless. Offsets left behind would skip the start of a recreated topic that has
    /// grown past them by the next start, so a failure (PostgreSQL away for a moment) is retried with
    /// backoff for up to `retryFor`; only then does the process exit with them (logged as critical:
    /// offsets past a partition's new end are still caught when it is assigned, others are not).
    /// Returns whether they were deleted.
    @discardableResult
    public static func forget(
        groupId: String, client: PostgresClient, logger: Logger, retryFor: Duration = .seconds(60)
    ) async -> Bool {
        let forgotten = await retrying("forgetting the stored offsets", within: retryFor, logger: logger) {
            try await client.query("DELETE FROM consumer_offsets WHERE group_id = \(groupId)", logger: logger)
        }
        if case .failure(let error) = forgotten {
            logger.critical(
                "forgetting the stored offsets failed; the next start may skip the start of recreated topics",
                metadata: ["group": .string(groupId), "error": .string(PostgresFailure.description(of: error))])
            return false
        }
        logger.notice("stored offsets forgotten: the broker lost its state", metadata: ["group": .string(groupId)])
        return true
    }
}

/// How a consumer whose offsets live with its results stores a batch: until it is stored. A failure
/// (PostgreSQL away, a serialization conflict) is logged and the same messages are stored again after
/// 100 ms, doubling up to 5 s, so nothing is skipped; `nil` when the process shuts down first. With a
/// `health`, a run of failures that lasts makes the service unready (`BatchStoreHealth`).
public enum BatchStoreRetry {
    public static func untilStored<Result: Sendable>(
        messages: Int, logger: Logger, health: BatchStoreHealth? = nil, onFailure: () -> Void = {},
        _ store: () async throws -> Result
    ) async -> Result? {
        var backoff = Duration.milliseconds(100)
        while true {
            let attempt = health?.attempting()
            do {
                let result = try await store()
                health?.stored(attempt)
                return result
            } catch let wentBack as StoredOffsetsWentBack {
                // Retrying cannot help and storing on would lose records: a fresh process reads them again.
                logger.critical("\(wentBack); exiting so that the supervisor starts this service afresh from the stored offsets")
                exit(BrokerStateWatch.exitCode)
            } catch {
                health?.failed(error, attempt: attempt)
                onFailure()
                logger.error(
                    "storing a batch failed; retrying it",
                    metadata: [
                        "error": .string(PostgresFailure.description(of: error)), "messages": "\(messages)",
                        "retryIn": .string("\(backoff)"),
                    ])
                if Task.isCancelled || Task.isShuttingDownGracefully { return nil }
                try? await Task.sleep(for: backoff)
                if Task.isCancelled { return nil }
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}

/// Whether a consumer is storing its batches: a readiness check (`storing`) that fails once every
/// attempt has failed for `unreadyAfter` (a full disk, a statement the database refuses each time, a
/// schema changed under the service), or once one attempt has been running that long (a statement
/// waiting on a lock, a pool whose every connection is taken, a database that stopped answering
/// without closing the connection). The database may still answer `SELECT 1` then, so without it
/// `/health/ready` would say ready while the consumer makes no progress.
public final class BatchStoreHealth: ReadinessCheck {
    public let name = "storing"
    public let unreadyAfter: Duration
    private let state = Mutex(State())

    private struct State {
        var failingSince: ContinuousClock.Instant?
        var lastError = ""
        /// When each attempt under way started (a consumer may store two batches' parts at once).
        var attempts: [Int: ContinuousClock.Instant] = [:]
        var nextAttempt = 0
    }

    public init(unreadyAfter: Duration = .seconds(60)) { self.unreadyAfter = unreadyAfter }

    /// An attempt starts; `stored` or `failed` ends it with what this returns.
    func attempting(now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { state in
            state.nextAttempt += 1
            state.attempts[state.nextAttempt] = now
            return state.nextAttempt
        }
    }

    func stored(_ attempt: Int?) {
        state.withLock { state in
            state.failingSince = nil
            if let attempt { state.attempts[attempt] = nil }
        }
    }

    func failed(_ error: any Error, attempt: Int?, now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            if state.failingSince == nil { state.failingSince = now }
            state.lastError = PostgresFailure.description(of: error)
            if let attempt { state.attempts[attempt] = nil }
        }
    }

    public func check() async throws { try check(now: .now) }

    func check(now: ContinuousClock.Instant) throws(NotStoring) {
        let state = state.withLock { $0 }
        if let started = state.attempts.values.min(), now - started >= unreadyAfter {
            throw NotStoring(reason: "storing a batch has been under way for \((now - started).components.seconds) s with no answer")
        }
        if let since = state.failingSince, now - since >= unreadyAfter {
            throw NotStoring(
                reason: "no batch stored for \((now - since).components.seconds) s, every attempt failed; the last: \(state.lastError)")
        }
    }

    /// No batch was stored for `unreadyAfter`, and why.
    public struct NotStoring: Error, CustomStringConvertible {
        let reason: String
        public var description: String { reason }
    }
}
