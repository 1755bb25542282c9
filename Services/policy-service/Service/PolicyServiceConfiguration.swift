import ServiceRuntime

/// The policy service's own settings, besides the shared `ServiceConfiguration`:
/// - `POLICY_GROUP_ID`, `POLICY_MAX_BATCH`: the pipeline's consumer group (default `policy-service`)
///   and records per poll (default 500), with the platform's `TOPIC_<NAME>` overrides read into
///   `pipeline`;
/// - `POLICY_REFRESH_MS`: how often the stored policies are re-read (default 2000);
/// - `POLICY_SCHEMA`: the PostgreSQL schema of the stored policies and spent GATT nonces (default `policy`).
/// The base rule configuration (`POLICY_BOOK_FILE`, `PolicyBookLoader`) and the GATT keys
/// (`GATT_NONCE_KEY`, `BEACON_KEY_SEAL_KEY`, `GattConfiguration`) are read with the engine they configure.
package struct PolicyServiceConfiguration: SchemaSettings {
    package var pipeline: PolicyPipelineConfiguration
    package var refreshInterval: Duration
    package var schema: String

    package static func load(from env: EnvironmentReader) throws(ConfigurationError) -> PolicyServiceConfiguration {
        var pipeline = PolicyPipelineConfiguration(topics: TopicNames.load(from: env))
        pipeline.consumer = try pipeline.consumer.overridden(prefix: "POLICY", from: env)
        return PolicyServiceConfiguration(
            pipeline: pipeline,
            refreshInterval: try env.milliseconds("POLICY_REFRESH_MS", default: .seconds(2), in: 100...600_000),
            schema: try env.schemaName("POLICY_SCHEMA", default: ServiceMigrations.policy.defaultSchema)
        )
    }
}

extension ConsumerGroupConfiguration {
    /// The policy pipeline's group, 500 records per poll.
    package static let policy = ConsumerGroupConfiguration(groupId: "policy-service", maxBatchSize: 500)
}
