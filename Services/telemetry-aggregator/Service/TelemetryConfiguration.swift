import AttendanceProtocol
import Foundation
import ServiceRuntime

/// The aggregator's own settings (the shared ones are `ServiceConfiguration`). Topic names default to
/// the protocol's `Topic` names; tests point them, the schema and the group at their own.
package struct TelemetryConfiguration: SchemaSettings {
    /// The consumer group (also the key of `<schema>.consumer_offsets`); at most 1,000 messages per
    /// polled batch (one PostgreSQL transaction each).
    package var consumer = ConsumerGroupConfiguration(groupId: "telemetry-aggregator", maxBatchSize: 1_000)
    /// Also commit offsets to the broker after the PostgreSQL commit (informational).
    package var commitOffsetsToBroker = true
    /// The PostgreSQL schema of the rollups (`telemetry`); a plain lower-case identifier.
    package var schema = ServiceMigrations.telemetry.defaultSchema
    /// The platform's topic names (`TOPIC_<NAME>` overrides).
    package var topics = TopicNames()
    /// How often the SLO gauges on `/metrics` are recomputed.
    package var sloRefreshInterval: Duration = .seconds(15)
    /// Rollups and seen identities older than this many days are pruned (beyond the 30-day budget window).
    package var retentionDays = 35
    /// How often the pruning runs.
    package var pruneInterval: Duration = .seconds(600)
    package var objective = TelemetrySLOConfiguration()

    /// The four topics the aggregator consumes.
    package var consumedTopics: [String] { [topics[.deviceTelemetry], topics[.rawEvents], topics[.verdicts], topics[.sessions]] }

    /// Reads `TELEMETRY_GROUP_ID`, `TELEMETRY_SCHEMA`, `TELEMETRY_MAX_BATCH`, `TELEMETRY_SLO_REFRESH_MS`,
    /// `TELEMETRY_RETENTION_DAYS`, `TELEMETRY_COMMIT_TO_BROKER`, the platform's `TOPIC_<NAME>`
    /// overrides (`TopicNames`), and the SLO `TELEMETRY_SLO_TARGET_PERMYRIAD`
    /// (9900 = 99 %), `TELEMETRY_SLO_THRESHOLD_SECONDS` (300).
    package static func load(from env: EnvironmentReader = EnvironmentReader()) throws(ConfigurationError) -> TelemetryConfiguration {
        // Unset variables keep the defaults declared above.
        var configuration = TelemetryConfiguration()
        configuration.consumer = try configuration.consumer.overridden(prefix: "TELEMETRY", from: env)
        configuration.commitOffsetsToBroker = try env.bool("TELEMETRY_COMMIT_TO_BROKER", default: configuration.commitOffsetsToBroker)
        configuration.schema = try env.schemaName("TELEMETRY_SCHEMA", default: configuration.schema)
        configuration.topics = TopicNames.load(from: env)
        configuration.sloRefreshInterval = try env.milliseconds(
            "TELEMETRY_SLO_REFRESH_MS", default: configuration.sloRefreshInterval, in: 100...60_000)
        configuration.retentionDays = try env.int("TELEMETRY_RETENTION_DAYS", default: configuration.retentionDays, in: 31...3_650)
        configuration.objective.targetPermyriad = try env.int(
            "TELEMETRY_SLO_TARGET_PERMYRIAD", default: configuration.objective.targetPermyriad, in: 1...9_999)
        configuration.objective.thresholdSeconds = try env.int(
            "TELEMETRY_SLO_THRESHOLD_SECONDS", default: configuration.objective.thresholdSeconds, in: 1...86_400)
        return configuration
    }
}

/// The SLO's two knobs as configuration (the rest of `SLOObjective` is fixed by the
/// specification: docs/SPECIFICATION.md, "8. Telemetry and the SLO").
package struct TelemetrySLOConfiguration: Sendable, Hashable {
    package var targetPermyriad = 9_900
    package var thresholdSeconds = 300
}
