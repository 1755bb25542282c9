import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PolicyServiceCore
import PostgresNIO
import Synchronization

/// The accepted punches every policy instance shares and keeps across restarts.
package protocol PunchStore: Sendable {
    /// Stores accepted punches; a punch already stored (same user and idempotency key) is left as it is.
    func append(_ punches: [PunchRecord]) async throws
    /// The stored punches of these users whose event time is `since` or later, oldest first.
    func punches(userIds: [String], since: Date) async throws -> [PunchRecord]
    /// Deletes punches whose event time is before `cutoff`. Returns how many.
    @discardableResult
    func prune(before cutoff: Date) async throws -> Int
}

/// `PunchStore` on the policy schema's `accepted_punches` table: one statement per polled batch
/// for each direction (`unnest` of the batch's punches; `user_id = ANY` of the users not yet read).
package struct PostgresPunchStore: PunchStore {
    let client: PostgresClient
    let logger: Logger

    package func append(_ punches: [PunchRecord]) async throws {
        guard !punches.isEmpty else { return }
        // Registry ids are never empty, so an empty text stands for an unknown site or gate.
        let sites = punches.map { $0.siteId ?? "" }, gates = punches.map { $0.gateId ?? "" }
        try await client.query(
            """
            INSERT INTO accepted_punches (user_id, idempotency_key, device_id, site_id, gate_id, type, event_time)
            SELECT user_id, idempotency_key, device_id, NULLIF(site_id, ''), NULLIF(gate_id, ''), type, event_time FROM unnest(
                \(punches.map(\.userId))::text[], \(punches.map(\.idempotencyKey))::text[], \(punches.map(\.deviceId))::text[],
                \(sites)::text[], \(gates)::text[], \(punches.map(\.type.rawValue))::text[], \(punches.map(\.time))::timestamptz[]
            ) AS t(user_id, idempotency_key, device_id, site_id, gate_id, type, event_time)
            ON CONFLICT (user_id, idempotency_key) DO NOTHING
            """, logger: logger
        )
    }

    package func punches(userIds: [String], since: Date) async throws -> [PunchRecord] {
        guard !userIds.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT user_id, idempotency_key, device_id, site_id, gate_id, type, event_time FROM accepted_punches
            WHERE user_id = ANY(\(userIds)::text[]) AND event_time >= \(since)
            ORDER BY event_time, idempotency_key
            """, logger: logger
        )
        var punches: [PunchRecord] = []
        for try await (user, key, device, site, gate, type, time) in rows.decode(
            (String, String, String, String?, String?, String, Date).self)
        {
            // The table's CHECK admits only the two punch types.
            guard let type = AttendanceEventType(rawValue: type) else { continue }
            // Back at the wire's millisecond: PostgreSQL kept the time to the microsecond as PostgresNIO
            // truncated it (`…12.001Z` is stored as `…12.000999`), and a punch 1 µs early flips a rule's
            // verdict exactly at its interval after a restart.
            punches.append(
                PunchRecord(
                    idempotencyKey: key, userId: user, deviceId: device, siteId: site, gateId: gate, type: type,
                    time: WireTimestamp.truncatedToWirePrecision(time)))
        }
        return punches
    }

    @discardableResult
    package func prune(before cutoff: Date) async throws -> Int {
        let rows = try await client.query("DELETE FROM accepted_punches WHERE event_time < \(cutoff) RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}

/// Makes the history rules durable across restarts and rebalances. The in-memory `PolicyHistory` the
/// rules read holds what this instance decided; before a batch is decided, the stored punches of each
/// user the instance has not read since its partitions were last assigned are put in it
/// (`warm(_:history:now:)`), and a batch's accepted punches are stored before its offsets are
/// committed (`store(_:)`). Records are keyed by user, so one instance at a time decides a user's
/// punches: after an assignment, the stored ones are all there is to know.
///
/// A crash between storing and committing replays the batch: its punches are then in the history by
/// their idempotency keys, and a replay is never judged against itself.
package final class PunchLedger: KafkaRebalanceListener {
    package let store: any PunchStore
    /// How far back a user's punches are read: the history's retention.
    package let retention: TimeInterval
    /// Users whose stored punches are in the history since the last assignment, and how many
    /// assignments or revocations there have been (a read that spans one does not count).
    private let read = Mutex<(users: Set<String>, assignments: Int)>(([], 0))

    package init(store: any PunchStore, retention: TimeInterval = PolicyPipeline.historyRetention) {
        self.store = store
        self.retention = retention
    }

    /// Puts the stored punches of the batch's users not read since the last assignment in `history`.
    package func warm(_ events: [RawEventEnvelope], history: PolicyHistory, now: Date) async throws {
        let (unread, assignments) = read.withLock { read in (Array(Set(events.map(\.userId)).subtracting(read.users)), read.assignments) }
        guard !unread.isEmpty else { return }
        for punch in try await store.punches(userIds: unread, since: now.addingTimeInterval(-retention)) { history.record(punch) }
        // Read before an assignment that came meanwhile: another instance may have stored punches of
        // these users since, so they stay unread and the next batch reads them again.
        read.withLock { read in if read.assignments == assignments { read.users.formUnion(unread) } }
    }

    /// Stores a batch's accepted punches.
    package func store(_ punches: [PunchRecord]) async throws { try await store.append(punches) }

    /// Users decided by another instance meanwhile must be read again: every user is unread.
    package func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        forgetReads()
        return [:]
    }

    package func partitionsRevoked(_ partitions: [TopicPartition]) async { forgetReads() }

    private func forgetReads() {
        read.withLock { read in
            read.users.removeAll()
            read.assignments += 1
        }
    }

    /// How many users have been read since the last assignment (for tests).
    package var readUserCount: Int { read.withLock { $0.users.count } }
}
