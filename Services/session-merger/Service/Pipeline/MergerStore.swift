import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import SessionMergerCore
import Synchronization

/// A transaction lost a race with another writer (the same idempotency key recorded, or the same
/// timeline written, by a concurrent transaction). It is rolled back and retried: the retry sees the
/// other writer's result (a duplicate, the newer timeline).
struct MergerWriteConflict: Error, CustomStringConvertible {
    let what: String
    var description: String { "write conflict: \(what)" }
}

/// An event already in `merger.events`: what a retry with the same key is answered with.
struct RecordedEvent: Sendable, Hashable {
    var idempotencyKey: String
    var payloadFingerprint: String
    var accepted: Bool
    var serverReceiptId: String
    var sessionId: String?
    var reasons: [String]
    var action: AppAction
    var retryAfterSeconds: Int?
    var policyVersion: Int?
    var siteId: String?
}

/// A timeline loaded for update, and what to write back.
struct LoadedTimeline {
    var timeline: SessionTimeline
    /// The stored version; 0 for a timeline that has no row yet.
    var version: Int64
}

/// How a timeline row's `state` is written: the timeline's header only, wrapped with a format number
/// (`{"format":2,"header":{...}}`, sorted keys). Its events live in `merger.events` already; storing
/// them again in the row made every batch re-encode and rewrite each touched timeline whole, a cost
/// growing with the timeline (measured: a quarter of the merger's CPU under a heartbeat load).
enum StoredTimeline {
    static let format = 2

    private struct Envelope: Codable {
        var format: Int
        var header: TimelineState.Header
    }

    /// Sorted members, no whitespace: the protocol codec's canonical layout, the bytes Foundation's
    /// `JSONEncoder` with `.sortedKeys` wrote before but for its `\/` escapes (rows written either
    /// way read back the same).
    static func encode(_ header: TimelineState.Header) throws -> String {
        try ProtocolCodec.canonical.encodeToString(Envelope(format: format, header: header))
    }

    /// The header of a row written in this format; nil for a row holding a whole `TimelineState`.
    static func header(from state: String) throws -> TimelineState.Header? {
        guard state.hasPrefix("{\"format\":") else { return nil }
        let envelope = try ProtocolCodec.wire.decode(Envelope.self, from: state)
        guard envelope.format == format else {
            throw StoredTimelineError(description: "timeline row format \(envelope.format) is not \(format)")
        }
        return envelope.header
    }
}

struct StoredTimelineError: Error, CustomStringConvertible {
    let description: String
}

/// The timelines the merger wrote last, by the version it wrote, so that the next batch of the same
/// users skips rebuilding them from PostgreSQL. A stored version other than the cached one (the idle
/// sweep, another replica, a rolled-back transaction) simply misses. Bounded: when full it is emptied,
/// a cheap policy that costs one rebuild per active timeline.
///
/// A batch takes its timelines out (`take`) and puts them back after its commit (`store`): the batch
/// then holds the only reference, so applying an event changes the timeline in place instead of
/// copying its arrays (a copy per touched timeline per batch, growing with the day's events, was a
/// tenth of the merger's CPU). A batch that fails leaves its timelines out; the next one rebuilds them.
final class TimelineCache: Sendable {
    private struct Entry {
        var timeline: SessionTimeline
        var version: Int64
    }

    private let entries = Mutex<[MergerStore.TimelineKey: Entry]>([:])
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The cached timeline of `key` at `version`, removed from the cache; `nil` on a miss (an entry at
    /// another version is dropped too).
    func take(_ key: MergerStore.TimelineKey, version: Int64) -> SessionTimeline? {
        entries.withLock { entries in
            guard let entry = entries.removeValue(forKey: key), entry.version == version else { return nil }
            return entry.timeline
        }
    }

    /// After the transaction that wrote them committed: each timeline at the version it now has.
    func store(_ timelines: [MergerStore.TimelineKey: LoadedTimeline]) {
        guard capacity > 0 else { return }
        entries.withLock { entries in
            if entries.count + timelines.count > capacity { entries.removeAll(keepingCapacity: true) }
            for (key, loaded) in timelines {
                entries[key] = Entry(timeline: loaded.timeline, version: loaded.version + 1)
            }
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

/// The site of each (user, device session key) known to be stored in `session_keys`. A stored row
/// never changes (the first site seen wins) and is never deleted, so an entry never goes stale: a
/// batch neither looks up nor inserts a key found here. Filled only after a commit; emptied when full.
final class SessionKeySiteCache: Sendable {
    private let entries = Mutex<[MergerStore.UserSessionKey: String]>([:])
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The cached sites of `keys` (the keys not found are not in the result).
    func sites(of keys: some Sequence<MergerStore.UserSessionKey>) -> [MergerStore.UserSessionKey: String] {
        entries.withLock { entries in
            var found: [MergerStore.UserSessionKey: String] = [:]
            for key in keys { if let site = entries[key] { found[key] = site } }
            return found
        }
    }

    /// After the transaction that read or wrote them committed.
    func store(_ sites: [MergerStore.UserSessionKey: String]) {
        guard capacity > 0, !sites.isEmpty else { return }
        entries.withLock { entries in
            if entries.count + sites.count > capacity { entries.removeAll(keepingCapacity: true) }
            // A site already cached is the stored one: keep it (an insert of another site did nothing).
            entries.merge(sites) { cached, _ in cached }
        }
    }
}

/// The SQL of the merger's tables, on a connection inside a transaction.
enum MergerStore {
    // MARK: Reading

    static func recordedEvents(keys: [String], on connection: PostgresConnection, logger: Logger) async throws -> [String: RecordedEvent] {
        guard !keys.isEmpty else { return [:] }
        let rows = try await connection.query(
            """
            SELECT idempotency_key, payload_fingerprint, outcome, server_receipt_id, session_id, reasons::text,
                   action, retry_after_seconds, policy_version, site_id
            FROM events WHERE idempotency_key = ANY(\(keys))
            """,
            logger: logger
        )
        var found: [String: RecordedEvent] = [:]
        for try await (key, fingerprint, outcome, receipt, sessionId, reasons, action, retryAfter, policyVersion, siteId)
            in rows.decode((String, String, String, String, String?, String, String, Int?, Int?, String?).self)
        {
            let reasonList = (try? JSONDecoder().decode([String].self, from: Data(reasons.utf8))) ?? []
            found[key] = RecordedEvent(
                idempotencyKey: key, payloadFingerprint: fingerprint, accepted: outcome == "accepted", serverReceiptId: receipt,
                sessionId: sessionId, reasons: reasonList, action: AppAction(rawValue: action), retryAfterSeconds: retryAfter,
                policyVersion: policyVersion, siteId: siteId)
        }
        return found
    }

    struct UserSessionKey: Hashable, Sendable {
        var userId: String
        var sessionKey: String
    }

    /// The site each (user, device session key) was first seen at.
    static func sitesOfSessionKeys(
        _ keys: Set<UserSessionKey>, on connection: PostgresConnection, logger: Logger
    ) async throws -> [UserSessionKey: String] {
        guard !keys.isEmpty else { return [:] }
        let list = Array(keys)
        // A primary-key probe per key rather than a join the planner may hash (see `lockTimelines`).
        let rows = try await connection.query(
            """
            SELECT k.user_id, k.session_key, k.site_id
            FROM UNNEST(\(list.map(\.userId))::text[], \(list.map(\.sessionKey))::text[]) AS q(user_id, session_key)
            CROSS JOIN LATERAL (
                SELECT user_id, session_key, site_id FROM session_keys
                WHERE user_id = q.user_id AND session_key = q.session_key
                LIMIT 1
            ) k
            """,
            logger: logger
        )
        var found: [UserSessionKey: String] = [:]
        for try await (user, key, site) in rows.decode((String, String, String).self) {
            found[UserSessionKey(userId: user, sessionKey: key)] = site
        }
        return found
    }

    /// The sites each user has a timeline at.
    static func timelineSites(users: [String], on connection: PostgresConnection, logger: Logger) async throws -> [String: [String]] {
        guard !users.isEmpty else { return [:] }
        let rows = try await connection.query(
            "SELECT user_id, site_id FROM timelines WHERE user_id = ANY(\(users))", logger: logger)
        var found: [String: [String]] = [:]
        for try await (user, site) in rows.decode((String, String).self) { found[user, default: []].append(site) }
        return found
    }

    struct TimelineKey: Hashable, Sendable, Comparable {
        var userId: String
        var siteId: String

        static func < (a: Self, b: Self) -> Bool { (a.userId, a.siteId) < (b.userId, b.siteId) }
    }

    /// Loads and locks (`FOR UPDATE`, in key order so concurrent writers never deadlock) the stored
    /// timelines among `keys`; keys without a row are absent from the answer. A timeline `cache` holds
    /// at the stored version is taken from there; the others are rebuilt from their header and events.
    ///
    /// One primary-key probe per key (a lateral subquery, which a locking clause keeps from being
    /// flattened), in the keys' order. A join with the keys let the planner hash the whole table
    /// once a batch named a few hundred timelines: a scan of every timeline per batch, 11 ms at
    /// 13,000 timelines against 1.5 ms for the probes, and growing with the table.
    static func lockTimelines(
        _ keys: [TimelineKey], policy: SessionPolicy, cache: TimelineCache? = nil, on connection: PostgresConnection, logger: Logger
    ) async throws -> [TimelineKey: LoadedTimeline] {
        guard !keys.isEmpty else { return [:] }
        let sorted = keys.sorted()
        let rows = try await connection.query(
            """
            SELECT t.user_id, t.site_id, t.state, t.version
            FROM UNNEST(\(sorted.map(\.userId))::text[], \(sorted.map(\.siteId))::text[]) WITH ORDINALITY AS q(user_id, site_id, n)
            CROSS JOIN LATERAL (
                SELECT user_id, site_id, state, version FROM timelines
                WHERE user_id = q.user_id AND site_id = q.site_id
                FOR UPDATE
            ) t
            ORDER BY q.n
            """,
            logger: logger
        )
        var stored: [StoredTimelineRow] = []
        for try await (user, site, state, version) in rows.decode((String, String, String, Int64).self) {
            stored.append(StoredTimelineRow(key: TimelineKey(userId: user, siteId: site), state: state, version: version))
        }
        return try await restore(stored, policy: policy, cache: cache, on: connection, logger: logger)
    }

    /// Locks up to `limit` timelines whose `next_check_at` has come, skipping those another
    /// transaction holds (the batch consumer): the idle sweep never waits for, nor blocks, a batch.
    static func lockDueTimelines(
        now: Date, limit: Int, policy: SessionPolicy, on connection: PostgresConnection, logger: Logger
    ) async throws -> [TimelineKey: LoadedTimeline] {
        let rows = try await connection.query(
            """
            SELECT user_id, site_id, state, version FROM timelines
            WHERE next_check_at IS NOT NULL AND next_check_at <= \(now)
            ORDER BY user_id, site_id
            LIMIT \(limit)
            FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        )
        var stored: [StoredTimelineRow] = []
        for try await (user, site, state, version) in rows.decode((String, String, String, Int64).self) {
            stored.append(StoredTimelineRow(key: TimelineKey(userId: user, siteId: site), state: state, version: version))
        }
        return try await restore(stored, policy: policy, cache: nil, on: connection, logger: logger)
    }

    struct StoredTimelineRow {
        var key: TimelineKey
        var state: String
        var version: Int64
    }

    /// Timelines from their rows: from `cache` when it holds the stored version, else from the stored
    /// header plus the (user, site)'s accepted events at or after its watermark, read in one query.
    /// Rows written before headers were stored (the whole state as JSON) are decoded as they are.
    static func restore(
        _ rows: [StoredTimelineRow], policy: SessionPolicy, cache: TimelineCache?, on connection: PostgresConnection, logger: Logger
    ) async throws -> [TimelineKey: LoadedTimeline] {
        var loaded: [TimelineKey: LoadedTimeline] = [:]
        var headers: [TimelineKey: (header: TimelineState.Header, version: Int64)] = [:]
        for row in rows {
            if let cached = cache?.take(row.key, version: row.version) {
                loaded[row.key] = LoadedTimeline(timeline: cached, version: row.version)
            } else if let header = try StoredTimeline.header(from: row.state) {
                headers[row.key] = (header, row.version)
            } else {
                let state = try JSONDecoder().decode(TimelineState.self, from: Data(row.state.utf8))
                loaded[row.key] = LoadedTimeline(timeline: try SessionTimeline(restoring: state, policy: policy), version: row.version)
            }
        }
        guard !headers.isEmpty else { return loaded }
        let keys = headers.keys.sorted()
        // A timeline without a watermark holds all of its events: -infinity.
        let since = keys.map { headers[$0]!.header.watermarkDate ?? Date.distantPast }
        let events = try await connection.query(
            """
            SELECT e.idempotency_key, e.user_id, e.site_id, e.event_type, e.event_time, e.session_key, e.received_at
            FROM UNNEST(\(keys.map(\.userId))::text[], \(keys.map(\.siteId))::text[], \(since)::timestamptz[]) AS q(user_id, site_id, since)
            JOIN events e
              ON e.user_id = q.user_id AND e.site_id = q.site_id AND e.outcome = 'accepted' AND e.event_time >= q.since
            """,
            logger: logger
        )
        var facts: [TimelineKey: [AttendanceFact]] = [:]
        for try await (key, user, site, type, time, sessionKey, receivedAt) in events.decode(
            (String, String, String, String, Date, String?, Date).self)
        {
            guard let eventType = AttendanceEventType(rawValue: type) else {
                throw StoredTimelineError(description: "event \(key) has an unknown event_type \(type)")
            }
            facts[TimelineKey(userId: user, siteId: site), default: []].append(
                AttendanceFact(
                    idempotencyKey: key, userId: user, siteId: site, kind: AttendanceFact.Kind(eventType), eventTime: time,
                    sessionKey: sessionKey, receivedAt: receivedAt))
        }
        for (key, stored) in headers {
            let state = TimelineState(header: stored.header, events: facts[key] ?? [])
            loaded[key] = LoadedTimeline(timeline: try SessionTimeline(restoring: state, policy: policy), version: stored.version)
        }
        return loaded
    }

    // MARK: Writing

    /// One `merger.events` row.
    struct EventRow {
        var idempotency_key: String
        var request_id: String
        var user_id: String
        var device_id: String
        var site_id: String?
        var kind: String
        var event_type: String
        var session_key: String?
        var event_time: Date
        var received_at: Date
        var payload_fingerprint: String
        var outcome: String
        var http_status: Int
        var server_receipt_id: String
        var session_id: String?
        var reasons: [String]
        var action: String
        var retry_after_seconds: Int?
        var policy_version: Int?
        var risk_score: Double?
        var decided_at: Date
        /// The raw event envelope's wire JSON, as the policy service sent it.
        var envelope: String
        var gateway_instance: String
        var source_topic: String?
        var source_partition: Int32?
        var source_offset: Int64?
    }

    /// `merger.events` rows as one typed array per column: PostgresNIO binds arrays in the binary
    /// format, so PostgreSQL unnests them without parsing a JSON document of the whole batch (which,
    /// with the Swift side encoding it, cost more than the insert itself). Arrays cannot hold NULL
    /// here, so nullable columns carry a placeholder and a bit in `nulls`.
    private struct EventColumns {
        static let siteNull: Int32 = 1, sessionKeyNull: Int32 = 2, sessionIdNull: Int32 = 4, retryAfterNull: Int32 = 8
        static let policyVersionNull: Int32 = 16, riskScoreNull: Int32 = 32, sourceNull: Int32 = 64

        var keys: [String] = [], requestIds: [String] = [], users: [String] = [], devices: [String] = []
        var sites: [String] = [], kinds: [String] = [], eventTypes: [String] = [], sessionKeys: [String] = []
        var eventTimes: [Int64] = [], receivedAts: [Int64] = [], fingerprints: [String] = [], outcomes: [String] = []
        var httpStatuses: [Int32] = [], receipts: [String] = [], sessionIds: [String] = [], reasons: [String] = []
        var actions: [String] = [], retryAfters: [Int32] = [], policyVersions: [Int32] = [], riskScores: [Double] = []
        var decidedAts: [Int64] = [], envelopes: [String] = [], gateways: [String] = [], sourceTopics: [String] = []
        var sourcePartitions: [Int32] = [], sourceOffsets: [Int64] = [], nulls: [Int32] = []

        /// Times travel as whole microseconds since 1970, rounded to the wire's millisecond: the values
        /// the envelope carries, stored exactly. (A `Date` bound as timestamptz is truncated to the
        /// microsecond, so `…08.123` could be stored as `…08.122999` and differ from the same time
        /// decoded from the wire, where timelines compare them.)
        static func microseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1_000).rounded()) * 1_000 }

        init(_ rows: [EventRow]) throws {
            for row in rows {
                var nulls: Int32 = 0
                func text(_ value: String?, _ bit: Int32) -> String {
                    if value == nil { nulls |= bit }
                    return value ?? ""
                }
                keys.append(row.idempotency_key)
                requestIds.append(row.request_id)
                users.append(row.user_id)
                devices.append(row.device_id)
                sites.append(text(row.site_id, Self.siteNull))
                kinds.append(row.kind)
                eventTypes.append(row.event_type)
                sessionKeys.append(text(row.session_key, Self.sessionKeyNull))
                eventTimes.append(Self.microseconds(row.event_time))
                receivedAts.append(Self.microseconds(row.received_at))
                fingerprints.append(row.payload_fingerprint)
                outcomes.append(row.outcome)
                httpStatuses.append(Int32(row.http_status))
                receipts.append(row.server_receipt_id)
                sessionIds.append(text(row.session_id, Self.sessionIdNull))
                reasons.append(row.reasons.isEmpty ? "[]" : try MergerJSON.string(row.reasons))
                actions.append(row.action)
                if row.retry_after_seconds == nil { nulls |= Self.retryAfterNull }
                retryAfters.append(Int32(clamping: row.retry_after_seconds ?? 0))
                if row.policy_version == nil { nulls |= Self.policyVersionNull }
                policyVersions.append(Int32(clamping: row.policy_version ?? 0))
                if row.risk_score == nil { nulls |= Self.riskScoreNull }
                riskScores.append(row.risk_score ?? 0)
                decidedAts.append(Self.microseconds(row.decided_at))
                envelopes.append(row.envelope)
                gateways.append(row.gateway_instance)
                if row.source_topic == nil || row.source_partition == nil || row.source_offset == nil { nulls |= Self.sourceNull }
                sourceTopics.append(row.source_topic ?? "")
                sourcePartitions.append(row.source_partition ?? 0)
                sourceOffsets.append(row.source_offset ?? 0)
                self.nulls.append(nulls)
            }
        }
    }

    /// Inserts the rows whose key is not recorded yet; returns how many were inserted (fewer than the
    /// rows: a key was recorded before, by an earlier batch or a concurrent transaction).
    static func insertEvents(_ rows: [EventRow], on connection: PostgresConnection, logger: Logger) async throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let c = try EventColumns(rows)
        let result = try await connection.query(
            """
            WITH inserted AS (
                INSERT INTO events (
                    idempotency_key, request_id, user_id, device_id, site_id, kind, event_type, session_key, event_time,
                    received_at, recorded_at, payload_fingerprint, outcome, http_status, server_receipt_id, session_id,
                    reasons, action, retry_after_seconds, policy_version, risk_score, decided_at, envelope,
                    gateway_instance, source_topic, source_partition, source_offset)
                SELECT r.idempotency_key, r.request_id, r.user_id, r.device_id,
                       CASE WHEN r.nulls & \(EventColumns.siteNull) = 0 THEN r.site_id END, r.kind, r.event_type,
                       CASE WHEN r.nulls & \(EventColumns.sessionKeyNull) = 0 THEN r.session_key END,
                       'epoch'::timestamptz + r.event_time * interval '1 microsecond',
                       'epoch'::timestamptz + r.received_at * interval '1 microsecond', now(), r.payload_fingerprint, r.outcome, r.http_status, r.server_receipt_id,
                       CASE WHEN r.nulls & \(EventColumns.sessionIdNull) = 0 THEN r.session_id END, r.reasons::jsonb, r.action,
                       CASE WHEN r.nulls & \(EventColumns.retryAfterNull) = 0 THEN r.retry_after_seconds END,
                       CASE WHEN r.nulls & \(EventColumns.policyVersionNull) = 0 THEN r.policy_version END,
                       CASE WHEN r.nulls & \(EventColumns.riskScoreNull) = 0 THEN r.risk_score END,
                       'epoch'::timestamptz + r.decided_at * interval '1 microsecond', r.envelope::json, r.gateway_instance,
                       CASE WHEN r.nulls & \(EventColumns.sourceNull) = 0 THEN r.source_topic END,
                       CASE WHEN r.nulls & \(EventColumns.sourceNull) = 0 THEN r.source_partition END,
                       CASE WHEN r.nulls & \(EventColumns.sourceNull) = 0 THEN r.source_offset END
                FROM UNNEST(
                    \(c.keys)::text[], \(c.requestIds)::text[], \(c.users)::text[], \(c.devices)::text[], \(c.sites)::text[],
                    \(c.kinds)::text[], \(c.eventTypes)::text[], \(c.sessionKeys)::text[], \(c.eventTimes)::int8[],
                    \(c.receivedAts)::int8[], \(c.fingerprints)::text[], \(c.outcomes)::text[], \(c.httpStatuses)::int4[],
                    \(c.receipts)::text[], \(c.sessionIds)::text[], \(c.reasons)::text[], \(c.actions)::text[],
                    \(c.retryAfters)::int4[], \(c.policyVersions)::int4[], \(c.riskScores)::float8[], \(c.decidedAts)::int8[],
                    \(c.envelopes)::text[], \(c.gateways)::text[], \(c.sourceTopics)::text[], \(c.sourcePartitions)::int4[],
                    \(c.sourceOffsets)::int8[], \(c.nulls)::int4[]
                ) AS r(
                    idempotency_key, request_id, user_id, device_id, site_id, kind, event_type, session_key, event_time,
                    received_at, payload_fingerprint, outcome, http_status, server_receipt_id, session_id, reasons, action,
                    retry_after_seconds, policy_version, risk_score, decided_at, envelope, gateway_instance, source_topic,
                    source_partition, source_offset, nulls)
                ORDER BY r.idempotency_key
                ON CONFLICT (idempotency_key) DO NOTHING
                RETURNING 1
            )
            SELECT count(*)::int8 FROM inserted
            """,
            logger: logger
        )
        var inserted: Int64 = 0
        for try await count in result.decode(Int64.self) { inserted = count }
        return Int(inserted)
    }

    /// Remembers the site of each (user, device session key) first seen with one. Returns the entries
    /// stored now (a key stored before keeps its first site and is not returned).
    static func insertSessionKeys(
        _ entries: [UserSessionKey: String], on connection: PostgresConnection, logger: Logger
    ) async throws -> [UserSessionKey: String] {
        guard !entries.isEmpty else { return [:] }
        let sorted = entries.sorted { ($0.key.userId, $0.key.sessionKey) < ($1.key.userId, $1.key.sessionKey) }
        let rows = try await connection.query(
            """
            INSERT INTO session_keys (user_id, session_key, site_id)
            SELECT * FROM UNNEST(\(sorted.map(\.key.userId))::text[], \(sorted.map(\.key.sessionKey))::text[], \(sorted.map(\.value))::text[])
            ON CONFLICT (user_id, session_key) DO NOTHING
            RETURNING user_id, session_key, site_id
            """,
            logger: logger
        )
        var stored: [UserSessionKey: String] = [:]
        for try await (user, key, site) in rows.decode((String, String, String).self) {
            stored[UserSessionKey(userId: user, sessionKey: key)] = site
        }
        return stored
    }

    /// Writes timelines back: updates rows at their loaded version, inserts new ones. Throws
    /// `MergerWriteConflict` when a row changed or appeared meanwhile.
    static func saveTimelines(_ timelines: [TimelineKey: LoadedTimeline], on connection: PostgresConnection, logger: Logger) async throws {
        guard !timelines.isEmpty else { return }
        var updates: (users: [String], sites: [String], states: [String], versions: [Int64], counts: [Int], hasNext: [Bool], next: [Date]) =
            ([], [], [], [], [], [], [])
        var inserts = updates
        for (key, loaded) in timelines.sorted(by: { $0.key < $1.key }) {
            let state = try StoredTimeline.encode(loaded.timeline.state.header)
            let next = loaded.timeline.nextTimeDrivenChange
            if loaded.version == 0 {
                inserts.users.append(key.userId)
                inserts.sites.append(key.siteId)
                inserts.states.append(state)
                inserts.versions.append(1)
                inserts.counts.append(loaded.timeline.eventCount)
                inserts.hasNext.append(next != nil)
                inserts.next.append(next ?? Date(timeIntervalSince1970: 0))
            } else {
                updates.users.append(key.userId)
                updates.sites.append(key.siteId)
                updates.states.append(state)
                updates.versions.append(loaded.version)
                updates.counts.append(loaded.timeline.eventCount)
                updates.hasNext.append(next != nil)
                updates.next.append(next ?? Date(timeIntervalSince1970: 0))
            }
        }
        if !updates.users.isEmpty {
            // Each row found through its primary key at its loaded version (a `LIMIT 1` lateral is not
            // flattened into a join), then updated by its row id: joined on the key columns, the planner
            // hashed the whole table (see `lockTimelines`). The rows are locked by this transaction, so
            // their ids hold; a row at another version is not found, and the count below tells.
            let rows = try await connection.query(
                """
                UPDATE timelines t
                SET state = u.state, version = t.version + 1, event_count = u.event_count,
                    next_check_at = CASE WHEN u.has_next THEN u.next_check_at END, updated_at = now()
                FROM UNNEST(\(updates.users)::text[], \(updates.sites)::text[], \(updates.states)::text[], \(updates.versions)::int8[],
                            \(updates.counts)::int4[], \(updates.hasNext)::bool[], \(updates.next)::timestamptz[])
                     AS u(user_id, site_id, state, version, event_count, has_next, next_check_at)
                CROSS JOIN LATERAL (
                    SELECT ctid AS row_id FROM timelines
                    WHERE user_id = u.user_id AND site_id = u.site_id AND version = u.version
                    LIMIT 1
                ) found
                WHERE t.ctid = found.row_id
                RETURNING 1
                """,
                logger: logger
            )
            var updated = 0
            for try await _ in rows.decode(Int.self) { updated += 1 }
            guard updated == updates.users.count else { throw MergerWriteConflict(what: "a timeline changed concurrently") }
        }
        if !inserts.users.isEmpty {
            let rows = try await connection.query(
                """
                INSERT INTO timelines (user_id, site_id, state, version, event_count, next_check_at, updated_at)
                SELECT u.user_id, u.site_id, u.state, u.version, u.event_count,
                       CASE WHEN u.has_next THEN u.next_check_at END, now()
                FROM UNNEST(\(inserts.users)::text[], \(inserts.sites)::text[], \(inserts.states)::text[], \(inserts.versions)::int8[],
                            \(inserts.counts)::int4[], \(inserts.hasNext)::bool[], \(inserts.next)::timestamptz[])
                     AS u(user_id, site_id, state, version, event_count, has_next, next_check_at)
                ON CONFLICT (user_id, site_id) DO NOTHING
                RETURNING 1
                """,
                logger: logger
            )
            var inserted = 0
            for try await _ in rows.decode(Int.self) { inserted += 1 }
            guard inserted == inserts.users.count else { throw MergerWriteConflict(what: "a timeline was created concurrently") }
        }
    }

    struct SessionRow: Encodable {
        var session_id: String
        var user_id: String
        var site_id: String
        var status: String
        var check_in_at: Date
        var last_seen_at: Date
        var check_out_at: Date?
        var close_reason: String?
        var session_keys: [String]
        var version: Int64
        var superseded_by: String?
        var event_count: Int
    }

    /// Records where events recorded earlier are now (`ApplyOutcome.movedKeys`): a late event split
    /// their session, bridged two, or gave orphans one (a nil session: an orphan now). Only rows
    /// whose session differs are written; nothing at all when no event moved.
    static func moveEvents(_ moves: [(key: String, sessionId: String?)], on connection: PostgresConnection, logger: Logger) async throws {
        guard !moves.isEmpty else { return }
        try await connection.query(
            """
            UPDATE events e SET session_id = NULLIF(m.session_id, '')
            FROM UNNEST(\(moves.map(\.key))::text[], \(moves.map { $0.sessionId ?? "" })::text[]) AS m(idempotency_key, session_id)
            WHERE e.idempotency_key = m.idempotency_key AND e.outcome = 'accepted'
              AND e.session_id IS DISTINCT FROM NULLIF(m.session_id, '')
            """,
            logger: logger
        )
    }

    /// Applies session changes: the latest version of each session id wins (versions only grow), the
    /// changes go to the outbox in order, and the events of superseded sessions point to the survivor.
    static func applySessionChanges(
        _ deltas: [SessionDelta], changedAt: Date, on connection: PostgresConnection, logger: Logger
    ) async throws {
        guard !deltas.isEmpty else { return }
        var latest: [String: SessionDelta] = [:]
        for delta in deltas where (latest[delta.session.id]?.version ?? Int64.min) < delta.version {
            latest[delta.session.id] = delta
        }
        let rows = latest.values.sorted { $0.session.id < $1.session.id }.map { delta in
            SessionRow(
                session_id: delta.session.id, user_id: delta.session.userId, site_id: delta.session.siteId,
                status: delta.session.status.rawValue, check_in_at: delta.session.checkInAt, last_seen_at: delta.session.lastSeenAt,
                check_out_at: delta.session.checkOutAt, close_reason: delta.session.closeReason?.rawValue,
                session_keys: delta.session.sessionKeys, version: delta.version, superseded_by: delta.supersededBy,
                event_count: delta.session.eventIds.count)
        }
        let json = try MergerJSON.string(rows)
        try await connection.query(
            """
            INSERT INTO sessions (
                session_id, user_id, site_id, status, check_in_at, last_seen_at, check_out_at, close_reason,
                session_keys, version, updated_at, superseded_by, event_count)
            SELECT r.session_id, r.user_id, r.site_id, r.status, r.check_in_at, r.last_seen_at, r.check_out_at,
                   r.close_reason, r.session_keys, r.version, now(), r.superseded_by, r.event_count
            FROM jsonb_to_recordset(\(json)::jsonb) AS r(
                session_id text, user_id text, site_id text, status text, check_in_at timestamptz,
                last_seen_at timestamptz, check_out_at timestamptz, close_reason text, session_keys jsonb,
                version int, superseded_by text, event_count int)
            ORDER BY r.session_id
            ON CONFLICT (session_id) DO UPDATE SET
                status = EXCLUDED.status, check_in_at = EXCLUDED.check_in_at, last_seen_at = EXCLUDED.last_seen_at,
                check_out_at = EXCLUDED.check_out_at, close_reason = EXCLUDED.close_reason,
                session_keys = EXCLUDED.session_keys, version = EXCLUDED.version, updated_at = EXCLUDED.updated_at,
                superseded_by = EXCLUDED.superseded_by, event_count = EXCLUDED.event_count
            WHERE sessions.version < EXCLUDED.version
            """,
            logger: logger
        )

        // Events of a superseded session now belong to the survivor: the last one of a chain (A
        // superseding B superseding C in one batch moves C's rows to A, not to B). A session superseded
        // and then back in the same batch (its latest change is not the superseding one) keeps its rows.
        var survivors: [String: String] = [:]
        for delta in latest.values where delta.session.closeReason == .superseded {
            if let survivor = delta.supersededBy { survivors[delta.session.id] = survivor }
        }
        let remaps = survivors.keys.sorted().map { old -> (String, String) in
            var survivor = survivors[old] ?? old
            var steps = 0
            while let next = survivors[survivor], steps < survivors.count {
                survivor = next
                steps += 1
            }
            return (old, survivor)
        }
        if !remaps.isEmpty {
            try await connection.query(
                """
                UPDATE events e SET session_id = m.survivor
                FROM UNNEST(\(remaps.map(\.0))::text[], \(remaps.map(\.1))::text[]) AS m(old_id, survivor)
                WHERE e.session_id = m.old_id
                """,
                logger: logger
            )
        }

        // A new session may adopt events recorded earlier without one (an orphan heartbeat or check-out
        // whose check-in arrived late): they now belong to it. Only `opened` changes can adopt, and
        // their event lists are short, so this stays cheap.
        var adoptedKeys: [String] = [], adoptedBy: [String] = []
        for delta in deltas where delta.change == .opened && delta.session.eventIds.count > 1 {
            for key in delta.session.eventIds {
                adoptedKeys.append(key)
                adoptedBy.append(delta.session.id)
            }
        }
        if !adoptedKeys.isEmpty {
            try await connection.query(
                """
                UPDATE events e SET session_id = a.session_id
                FROM UNNEST(\(adoptedKeys)::text[], \(adoptedBy)::text[]) AS a(idempotency_key, session_id)
                WHERE e.idempotency_key = a.idempotency_key AND e.session_id IS NULL AND e.outcome = 'accepted'
                """,
                logger: logger
            )
        }

        // The outbox, in change order.
        var sessionIds: [String] = [], userIds: [String] = [], versions: [Int64] = [], payloads: [String] = []
        for delta in deltas {
            let change = delta.sessionChange(changedAt: changedAt)
            sessionIds.append(change.sessionId)
            userIds.append(change.userId)
            versions.append(change.version)
            payloads.append(try ProtocolCodec.wire.encodeToString(change))
        }
        try await connection.query(
            """
            INSERT INTO session_change_outbox (session_id, user_id, version, payload)
            SELECT u.session_id, u.user_id, u.version, u.payload
            FROM UNNEST(\(sessionIds)::text[], \(userIds)::text[], \(versions)::int8[], \(payloads)::text[])
                 WITH ORDINALITY AS u(session_id, user_id, version, payload, n)
            ORDER BY u.n
            """,
            logger: logger
        )
    }
}
