import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime
import TelemetryAggregatorCore

/// The SQL of one batch transaction, in the schema first on the pool's search path (every statement is bulk: one per table per batch,
/// rows passed as arrays through `unnest`, never one statement per message).
struct TelemetryStore: Sendable {
    let logger: Logger

    struct DeviceEventID: Hashable, Sendable {
        var deviceId: String
        var eventId: String
    }

    struct SessionVersionID: Hashable, Sendable {
        var sessionId: String
        var version: Int64
    }

    /// Where the verdict of a key is attributed: the raw event's trigger and dimensions when the raw
    /// event was seen, else what the verdict itself carries.
    struct VerdictAttribution: Sendable {
        var triggerAt: Date?
        var dimensions: Dimensions
        /// Its raw event was read: the dimensions are the device's. A verdict read first is counted
        /// when its raw event is (`recordRawEvents`), not under unknown dimensions now: with two
        /// aggregators the two often reach different instances.
        var received: Bool
    }

    /// A verdict recorded before its raw event: what counting it needs.
    struct EarlierVerdict: Sendable {
        var decidedAt: Date
        var outcome: String
    }

    // MARK: Identities

    /// Records device event ids; returns those not recorded before.
    func recordTelemetryEvents(_ ids: [DeviceEventID], on connection: PostgresConnection) async throws -> Set<DeviceEventID> {
        guard !ids.isEmpty else { return [] }
        let sorted = ids.sorted { ($0.deviceId, $0.eventId) < ($1.deviceId, $1.eventId) }
        let devices = sorted.map(\.deviceId), events = sorted.map(\.eventId)
        let rows = try await connection.query(
            """
            INSERT INTO seen_telemetry (device_id, event_id)
            SELECT * FROM unnest(\(devices)::text[], \(events)::text[])
            ON CONFLICT DO NOTHING RETURNING device_id, event_id
            """, logger: logger)
        var fresh = Set<DeviceEventID>()
        for try await (device, event) in rows.decode((String, String).self) {
            fresh.insert(DeviceEventID(deviceId: device, eventId: event))
        }
        return fresh
    }

    /// Records first receipts; returns the keys received for the first time, each with the verdict
    /// recorded before it, if one was. A row a verdict created earlier (no receipt yet) takes the
    /// receipt and its dimensions.
    func recordRawEvents(_ facts: [RawEventFacts], on connection: PostgresConnection) async throws -> [String: EarlierVerdict?] {
        guard !facts.isEmpty else { return [:] }
        let sorted = facts.sorted { $0.idempotencyKey < $1.idempotencyKey }
        let rows = try await connection.query(
            """
            INSERT INTO attendance_events AS e (idempotency_key, trigger_at, received_at, site, app_version, device_model)
            SELECT * FROM unnest(\(sorted.map(\.idempotencyKey))::text[], \(sorted.map(\.triggerAt))::timestamptz[],
                                 \(sorted.map(\.receivedAt))::timestamptz[], \(sorted.map(\.dimensions.site))::text[],
                                 \(sorted.map(\.dimensions.appVersion))::text[], \(sorted.map(\.dimensions.deviceModel))::text[])
            ON CONFLICT (idempotency_key) DO UPDATE SET trigger_at = excluded.trigger_at, received_at = excluded.received_at,
                site = excluded.site, app_version = excluded.app_version, device_model = excluded.device_model
            WHERE e.received_at IS NULL
            RETURNING idempotency_key, CASE WHEN verdict_deferred THEN verdict_at END, CASE WHEN verdict_deferred THEN verdict_outcome END
            """, logger: logger)
        var fresh: [String: EarlierVerdict?] = [:]
        for try await (key, decidedAt, outcome) in rows.decode((String, Date?, String?).self) {
            if let decidedAt, let outcome {
                fresh[key] = EarlierVerdict(decidedAt: decidedAt, outcome: outcome)
            } else {
                fresh[key] = .some(nil)
            }
        }
        return fresh
    }

    /// Records first verdicts; returns the attribution of each key whose first verdict this is.
    func recordVerdicts(_ verdicts: [AttendanceVerdict], on connection: PostgresConnection) async throws -> [String: VerdictAttribution] {
        guard !verdicts.isEmpty else { return [:] }
        let sorted = verdicts.sorted { $0.idempotencyKey < $1.idempotencyKey }
        let unknown = Dimensions.unknown
        let rows = try await connection.query(
            """
            INSERT INTO attendance_events AS e (idempotency_key, site, app_version, device_model, verdict_at, verdict_outcome, verdict_deferred)
            SELECT k, s, \(unknown), \(unknown), d, o, true
            FROM unnest(\(sorted.map(\.idempotencyKey))::text[], \(sorted.map { Dimensions.normalize($0.siteId) })::text[],
                        \(sorted.map(\.decidedAt))::timestamptz[], \(sorted.map(\.outcome.rawValue))::text[]) AS x(k, s, d, o)
            ON CONFLICT (idempotency_key) DO UPDATE SET verdict_at = excluded.verdict_at, verdict_outcome = excluded.verdict_outcome
            WHERE e.verdict_at IS NULL
            RETURNING idempotency_key, trigger_at, site, app_version, device_model, received_at IS NOT NULL
            """, logger: logger)
        var result: [String: VerdictAttribution] = [:]
        for try await (key, trigger, site, app, model, received) in rows.decode((String, Date?, String, String, String, Bool).self) {
            result[key] = VerdictAttribution(
                triggerAt: trigger, dimensions: Dimensions(site: site, appVersion: app, deviceModel: model), received: received)
        }
        return result
    }

    func recordSessionChanges(_ ids: [SessionVersionID], on connection: PostgresConnection) async throws -> Set<SessionVersionID> {
        guard !ids.isEmpty else { return [] }
        let sorted = ids.sorted { ($0.sessionId, $0.version) < ($1.sessionId, $1.version) }
        let rows = try await connection.query(
            """
            INSERT INTO seen_session_changes (session_id, version)
            SELECT * FROM unnest(\(sorted.map(\.sessionId))::text[], \(sorted.map(\.version))::int8[])
            ON CONFLICT DO NOTHING RETURNING session_id, version
            """, logger: logger)
        var fresh = Set<SessionVersionID>()
        for try await (session, version) in rows.decode((String, Int64).self) {
            fresh.insert(SessionVersionID(sessionId: session, version: version))
        }
        return fresh
    }

    // MARK: Rollups

    /// `expression` (numeric) held within `int8`: a sum past its bounds stays at them, as
    /// `CounterCell.add` does, rather than failing the batch for ever.
    static func int8Bounded(_ expression: String) -> String {
        "LEAST(GREATEST(\(expression), \(Int64.min)), \(Int64.max))::int8"
    }

    /// Adds a delta to the minute rollups. Rows go in key order so two replicas adding to the same
    /// rows lock them in the same order (no deadlock between them).
    func add(_ delta: RollupDelta, on connection: PostgresConnection) async throws {
        if !delta.counters.isEmpty {
            let rows = delta.counters.sorted { Self.less($0.key, $1.key) }
            try await connection.query(
                """
                INSERT INTO rollup_minute AS r (metric, minute, site, app_version, device_model, count, sum_micros)
                SELECT * FROM unnest(\(rows.map(\.key.metric))::text[], \(rows.map { EpochMinute.date($0.key.minute) })::timestamptz[],
                                     \(rows.map(\.key.dimensions.site))::text[], \(rows.map(\.key.dimensions.appVersion))::text[],
                                     \(rows.map(\.key.dimensions.deviceModel))::text[], \(rows.map(\.value.count))::int8[],
                                     \(rows.map(\.value.sumMicros))::int8[])
                ON CONFLICT (metric, minute, site, app_version, device_model)
                DO UPDATE SET count = r.count + excluded.count,
                              sum_micros = \(unescaped: Self.int8Bounded("r.sum_micros::numeric + excluded.sum_micros"))
                """, logger: logger)
        }
        if !delta.histograms.isEmpty {
            var metrics: [String] = [], minutes: [Date] = [], sites: [String] = [], apps: [String] = [], models: [String] = []
            var buckets: [Int32] = [], counts: [Int64] = []
            for (key, histogram) in delta.histograms.sorted(by: { Self.less($0.key, $1.key) }) {
                for (bucket, count) in histogram.counts.sorted(by: { $0.key < $1.key }) {
                    metrics.append(key.metric)
                    minutes.append(EpochMinute.date(key.minute))
                    sites.append(key.dimensions.site)
                    apps.append(key.dimensions.appVersion)
                    models.append(key.dimensions.deviceModel)
                    buckets.append(Int32(bucket))
                    counts.append(count)
                }
            }
            try await connection.query(
                """
                INSERT INTO latency_minute AS l (metric, minute, site, app_version, device_model, bucket, count)
                SELECT * FROM unnest(\(metrics)::text[], \(minutes)::timestamptz[], \(sites)::text[], \(apps)::text[],
                                     \(models)::text[], \(buckets)::int4[], \(counts)::int8[])
                ON CONFLICT (metric, minute, site, app_version, device_model, bucket) DO UPDATE SET count = l.count + excluded.count
                """, logger: logger)
        }
    }

    static func less(_ a: RollupKey, _ b: RollupKey) -> Bool {
        (a.metric, a.minute, a.dimensions.site, a.dimensions.appVersion, a.dimensions.deviceModel)
            < (b.metric, b.minute, b.dimensions.site, b.dimensions.appVersion, b.dimensions.deviceModel)
    }

    // MARK: Retention

    /// Deletes rollups and identities older than the cutoff. Identities older than the topics'
    /// retention cannot be redelivered by the broker any more.
    func prune(before cutoff: Date, on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM rollup_minute WHERE minute < \(cutoff)", logger: logger)
        try await connection.query("DELETE FROM latency_minute WHERE minute < \(cutoff)", logger: logger)
        try await connection.query("DELETE FROM seen_telemetry WHERE seen_at < \(cutoff)", logger: logger)
        try await connection.query("DELETE FROM attendance_events WHERE seen_at < \(cutoff)", logger: logger)
        try await connection.query("DELETE FROM seen_session_changes WHERE seen_at < \(cutoff)", logger: logger)
    }
}
