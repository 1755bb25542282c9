import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// The policy service's tables: every version of every site's policy, and the global kill switch.
///
/// The SQL lives here rather than in a bundled folder because the schema name is a parameter:
/// production uses `policy`, and each test run its own schema, so parallel runs on the shared
/// database never see each other's policies or kill switch.
public enum PolicyMigrations {
    /// The production schema.
    public static let defaultSchema = "policy"
    /// The name the migrations are recorded under in `schema_migrations` for the default schema.
    public static let service = "policy-service"

    /// `schema_migrations` service name: one series per schema.
    public static func service(schema: String) -> String {
        schema == defaultSchema ? service : "\(service):\(schema)"
    }

    /// Lower-case letters, digits and underscores, starting with a letter: safe to splice into SQL.
    public static func isValidSchemaName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), name.utf8.count <= 63 else { return false }
        return name.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }
    }

    public static func migrations(schema: String = defaultSchema) -> [Migration] {
        precondition(isValidSchemaName(schema), "invalid schema name \(schema)")
        return [
            Migration(version: 1, name: "policy", sql: """
                CREATE SCHEMA IF NOT EXISTS \(schema);

                -- Every version of every policy; the highest version of a scope is the active one. Rows
                -- are never updated or deleted: restoring an old version writes it again as a new one,
                -- so the version on a verdict always names exactly the rules that decided it.
                CREATE TABLE IF NOT EXISTS \(schema).site_policies (
                    -- The site id, or '*' for the default policy of sites without their own.
                    scope      text NOT NULL CHECK (length(scope) BETWEEN 1 AND 128),
                    version    integer NOT NULL CHECK (version > 0),
                    -- SitePolicy JSON (siteId, version, automaticAttendance, rules, settings).
                    document   jsonb NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    -- The admin API key that wrote it.
                    created_by text NOT NULL,
                    PRIMARY KEY (scope, version)
                );

                -- One row: turns automatic attendance off everywhere (seed 000 sec. 16).
                CREATE TABLE IF NOT EXISTS \(schema).global_switch (
                    id                 boolean PRIMARY KEY DEFAULT true CHECK (id),
                    global_kill_switch boolean NOT NULL,
                    updated_at         timestamptz NOT NULL DEFAULT now(),
                    updated_by         text NOT NULL
                );
                """),
            Migration(version: 2, name: "spent_gatt_nonces", sql: """
                -- GATT challenge nonces already presented (issue 6): a nonce is single-use across restarts
                -- and across every instance. Claimed per polled batch with INSERT ... ON CONFLICT DO
                -- NOTHING (SpentNonceStore); rows are pruned a day after their nonce's expiry
                -- (PolicyPipelineConfiguration.spentNonceRetention: expiry is judged at gateway
                -- receipt, so a late-decided replay must still find its nonce spent).
                CREATE TABLE IF NOT EXISTS \(schema).spent_gatt_nonces (
                    nonce           text PRIMARY KEY CHECK (length(nonce) BETWEEN 1 AND 256),
                    -- The event that presented it: a redelivery of that event is not a reuse.
                    idempotency_key text NOT NULL,
                    user_id         text NOT NULL,
                    expires_at      timestamptz NOT NULL,
                    spent_at        timestamptz NOT NULL DEFAULT now()
                );
                CREATE INDEX IF NOT EXISTS spent_gatt_nonces_expires_idx ON \(schema).spent_gatt_nonces (expires_at);
                """),
        ]
    }

    /// Applies what is missing (safe from every replica at start-up: the runner serializes them).
    @discardableResult
    public static func apply(client: PostgresClient, schema: String = defaultSchema, logger: Logger) async throws -> [Migration] {
        try await MigrationRunner(service: service(schema: schema), migrations: migrations(schema: schema), client: client, logger: logger).run()
    }
}
