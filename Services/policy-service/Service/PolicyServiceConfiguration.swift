import ServiceRuntime

/// The policy service's own settings, besides the shared `ServiceConfiguration`:
/// - `POLICY_MAX_BATCH`: records per poll (default 500);
/// - `POLICY_REFRESH_MS`: how often the stored policies are re-read (default 2000);
/// - `POLICY_SCHEMA`: the PostgreSQL schema of the stored policies and spent GATT nonces (default `policy`).
/// The base rule configuration (`POLICY_BOOK_FILE`, `PolicyBookLoader`) and the GATT keys
/// (`GATT_NONCE_KEY`, `BEACON_KEY_SEAL_KEY`, `GattConfiguration`) are read with the engine they configure.
package struct PolicyServiceConfiguration: Sendable {
    package var maxBatch: Int
    package var refreshInterval: Duration
    package var schema: String

    package static func load(from env: EnvironmentReader) throws(ConfigurationError) -> PolicyServiceConfiguration {
        PolicyServiceConfiguration(
            maxBatch: try env.int("POLICY_MAX_BATCH", default: 500, in: 1...10_000),
            refreshInterval: try env.milliseconds("POLICY_REFRESH_MS", default: .seconds(2), in: 100...600_000),
            schema: try env.schemaName("POLICY_SCHEMA", default: ServiceMigrations.policy.defaultSchema)
        )
    }
}
