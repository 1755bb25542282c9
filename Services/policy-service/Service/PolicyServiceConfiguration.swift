import ServiceRuntime

/// The policy service's own settings, besides the shared `ServiceConfiguration`:
/// - `POLICY_GROUP_ID`, `POLICY_MAX_BATCH`: the consumer group (default `policy-service`) and records
///   per poll (default 500);
/// - `POLICY_REFRESH_MS`: how often the stored policies are re-read (default 2000);
/// - `POLICY_SCHEMA`: the PostgreSQL schema of the stored policies and spent GATT nonces (default `policy`).
/// The base rule configuration (`POLICY_BOOK_FILE`, `PolicyBookLoader`) and the GATT keys
/// (`GATT_NONCE_KEY`, `BEACON_KEY_SEAL_KEY`, `GattConfiguration`) are read with the engine they configure.
package struct PolicyServiceConfiguration: Sendable {
    package var consumer: ConsumerGroupConfiguration
    package var refreshInterval: Duration
    package var schema: String

    package static func load(from env: EnvironmentReader) throws(ConfigurationError) -> PolicyServiceConfiguration {
        PolicyServiceConfiguration(
            consumer: try ConsumerGroupConfiguration.policy.overridden(prefix: "POLICY", from: env),
            refreshInterval: try env.milliseconds("POLICY_REFRESH_MS", default: .seconds(2), in: 100...600_000),
            schema: try env.schemaName("POLICY_SCHEMA", default: ServiceMigrations.policy.defaultSchema)
        )
    }
}

extension ConsumerGroupConfiguration {
    /// The policy pipeline's group, 500 records per poll.
    package static let policy = ConsumerGroupConfiguration(groupId: "policy-service", maxBatchSize: 500)
}
