import AttendanceProtocol
import Foundation
import ServiceRuntime
import SessionMergerCore

/// The merger's own settings (the shared ones are `ServiceConfiguration`). Topic names default to the
/// protocol's `Topic` names; tests point them at topics of their own.
package struct SessionMergerConfiguration: SchemaSettings {
    /// The consumer group (also the key of `merger.consumer_offsets`); at most 2,000 messages per polled
    /// batch (stored in `writeLanes` transactions).
    package var consumer = ConsumerGroupConfiguration(groupId: "session-merger", maxBatchSize: 2_000)
    /// `MERGER_SCHEMA`: the PostgreSQL schema of the merger's tables (default `merger`). The merger's
    /// queries name no schema; its pool's search path starts with this one.
    package var schema = ServiceMigrations.merger.defaultSchema
    /// The platform's topic names (`TOPIC_<NAME>` overrides).
    package var topics = TopicNames()
    /// How often the idle sweep closes sessions with no presence past the cutoff.
    package var idleSweepInterval: Duration = .seconds(60)
    /// Timelines per idle-sweep transaction.
    package var idleSweepBatchSize = 200
    /// How long the outbox publisher waits after a round that found nothing when no notification
    /// comes: the outbox's trigger wakes it at each commit, so this is only a fallback.
    package var outboxPollInterval: Duration = .seconds(5)
    /// Session changes per outbox round (one transaction, one produce batch).
    package var outboxBatchSize = 500
    /// The session thresholds (validated at start).
    package var policy: SessionPolicy = .default
    /// Daily attendance leaves out sessions closed by their check-out sooner than this after their check-in, seconds
    /// (`AttendancePresence`; 0 counts every session).
    package var minimumPresence: TimeInterval = AttendancePresence.defaultMinimumSeconds
    /// A timeline holding more events than this is compacted (`compact(now:)`) when it is written.
    package var compactionThreshold = 512
    /// How many times a batch transaction that lost a race (a concurrent writer of the same key or
    /// timeline) is retried at once before the error goes to the pipeline (which retries with backoff).
    package var conflictRetries = 5
    /// Timelines kept in memory between batches (`TimelineCache`); 0 turns the cache off.
    package var timelineCacheCapacity = 100_000
    /// Concurrent transactions a large batch (at least 128 events) is stored in, each user always in the
    /// same one, each holding its own share's offsets. 2 by default: under a backlog one transaction at a
    /// time left a core idle while PostgreSQL committed; 1 stores every batch in one transaction.
    package var writeLanes = 2
    /// Also commit the offsets to the broker after the PostgreSQL commit (informational: the merger
    /// seeks to `merger.consumer_offsets` on assignment).
    package var commitOffsetsToBroker = true
    /// How long recorded events are kept (`EventRetention`); nil keeps them for ever. 400 days by
    /// default: a year of payroll questions and a month to spare.
    package var eventRetention: Duration? = .seconds(400 * 86_400)
    /// The accepted `MERGER_EVENT_RETENTION_DAYS` besides 0 (for ever): at least 30 days, well past the
    /// timeline horizon (8 days) and the gateway's default event-age limit (7 days), so an event a phone
    /// may still send again is not forgotten.
    package static let eventRetentionDays = 30...3_650

    /// Reads `MERGER_GROUP_ID`, `MERGER_MAX_BATCH`, `MERGER_IDLE_SWEEP_MS`, `MERGER_OUTBOX_POLL_MS`,
    /// `MERGER_COMMIT_TO_BROKER`, `MERGER_TIMELINE_CACHE`, `MERGER_WRITE_LANES`, the platform's `TOPIC_<NAME>` overrides
    /// (`TopicNames`); the session thresholds
    /// `MERGER_MERGE_WINDOW_SECONDS`, `MERGER_SOFT_EXIT_GRACE_SECONDS`, `MERGER_NOISE_SECONDS`, `MERGER_IDLE_CUTOFF_SECONDS`,
    /// `MERGER_HORIZON_SECONDS` (checked against `SessionPolicy`'s ranges); daily attendance's
    /// `MERGER_MINIMUM_PRESENCE_SECONDS` (0-3,600); `MERGER_EVENT_RETENTION_DAYS` (0 or 30-3,650).
    package static func load(from env: EnvironmentReader = EnvironmentReader()) throws(ConfigurationError) -> SessionMergerConfiguration {
        let defaults = SessionPolicy.default
        var policy = SessionPolicy(
            mergeWindow: try env.double("MERGER_MERGE_WINDOW_SECONDS", default: defaults.mergeWindow, in: 0...86_400),
            softExitGrace: try env.double("MERGER_SOFT_EXIT_GRACE_SECONDS", default: defaults.softExitGrace, in: 0...86_400),
            noiseThreshold: try env.double("MERGER_NOISE_SECONDS", default: defaults.noiseThreshold, in: 0...86_400),
            idleCutoff: try env.double("MERGER_IDLE_CUTOFF_SECONDS", default: defaults.idleCutoff, in: 0...864_000),
            horizon: try env.double("MERGER_HORIZON_SECONDS", default: defaults.horizon, in: 0...(40 * 86_400))
        )
        do {
            policy = try policy.validated()
        } catch {
            // The first problem, told in the operator's words: the variable, its value, and the rule with
            // every threshold named by its variable. (The reads above name each variable literally: the
            // configuration table's test finds them there.)
            let variables = [
                "mergeWindow": "MERGER_MERGE_WINDOW_SECONDS", "softExitGrace": "MERGER_SOFT_EXIT_GRACE_SECONDS",
                "noiseThreshold": "MERGER_NOISE_SECONDS", "idleCutoff": "MERGER_IDLE_CUTOFF_SECONDS", "horizon": "MERGER_HORIZON_SECONDS",
            ]
            let issue = error.issues.first
            let key = issue.flatMap { variables[$0.field] } ?? "MERGER_*_SECONDS"
            let rule = variables.reduce(issue?.reason ?? "\(error)") { $0.replacingOccurrences(of: $1.key, with: $1.value) }
            throw ConfigurationError(key: key, value: env.optionalString(key) ?? "(default)", expected: "a value that \(rule)")
        }
        // Unset variables keep the defaults declared above.
        var configuration = SessionMergerConfiguration()
        configuration.consumer = try configuration.consumer.overridden(prefix: "MERGER", from: env)
        configuration.commitOffsetsToBroker = try env.bool("MERGER_COMMIT_TO_BROKER", default: configuration.commitOffsetsToBroker)
        configuration.topics = TopicNames.load(from: env)
        configuration.idleSweepInterval = try env.milliseconds(
            "MERGER_IDLE_SWEEP_MS", default: configuration.idleSweepInterval, in: 100...86_400_000)
        configuration.outboxPollInterval = try env.milliseconds(
            "MERGER_OUTBOX_POLL_MS", default: configuration.outboxPollInterval, in: 10...60_000)
        configuration.policy = policy
        configuration.timelineCacheCapacity = try env.int(
            "MERGER_TIMELINE_CACHE", default: configuration.timelineCacheCapacity, in: 0...10_000_000)
        configuration.writeLanes = try env.int("MERGER_WRITE_LANES", default: configuration.writeLanes, in: 1...8)
        configuration.minimumPresence = try env.double(
            "MERGER_MINIMUM_PRESENCE_SECONDS", default: configuration.minimumPresence, in: 0...3_600)
        configuration.schema = try env.schemaName("MERGER_SCHEMA", default: configuration.schema)
        let retentionDays = try env.int("MERGER_EVENT_RETENTION_DAYS", default: 400, in: 0...eventRetentionDays.upperBound)
        if retentionDays != 0 && !eventRetentionDays.contains(retentionDays) {
            throw ConfigurationError(
                key: "MERGER_EVENT_RETENTION_DAYS", value: "\(retentionDays)",
                expected: "0 (keep events for ever) or \(eventRetentionDays.lowerBound)...\(eventRetentionDays.upperBound) days")
        }
        configuration.eventRetention = retentionDays == 0 ? nil : .seconds(retentionDays * 86_400)
        return configuration
    }
}
