import AttendanceProtocol
import Foundation
import Logging
import PolicyServiceCore
import PostgresNIO
import ServiceRuntime

/// One stored version of a policy.
package struct StoredPolicyVersion: Codable, Hashable, Sendable {
    package var policy: SitePolicy
    package var createdAt: Date
    /// The admin API key id that wrote it.
    package var createdBy: String
}

/// What the store holds for the service's book: the active (latest) version of every scope and
/// the global kill switch, `nil` when never set.
package struct StoredPolicies: Hashable, Sendable {
    package var policies: [SitePolicy] = []
    /// The active versions this build cannot read (a newer instance stored them during an upgrade,
    /// say): their scopes fail closed, and the rest of the store still applies.
    package var unreadable: [UnreadablePolicy] = []
    package var globalKillSwitch: Bool?
}

/// A stored policy version this build cannot decode, and why.
package struct UnreadablePolicy: Hashable, Sendable {
    package var siteId: String?
    package var version: Int
    package var reason: String
}

/// Versioned policy storage. Versions are per scope (a site, or the default policy) and only grow.
package protocol PolicyRepository: Sendable {
    /// The latest version of every scope, and the global kill switch.
    func activePolicies() async throws -> StoredPolicies
    /// Versions of a scope (`siteId` nil: the default policy), newest first.
    func versions(siteId: String?, limit: Int) async throws -> [StoredPolicyVersion]
    func version(siteId: String?, version: Int) async throws -> StoredPolicyVersion?
    /// Stores the draft as the scope's next version: one more than the larger of the highest stored
    /// version and `atLeast` (the version the service runs now, e.g. from the policy-book file), so
    /// the new version always supersedes what is active.
    func save(_ draft: SitePolicyDraft, siteId: String?, atLeast: Int, by: String) async throws -> StoredPolicyVersion
    func setGlobalKillSwitch(_ on: Bool, by: String) async throws
}

/// `PolicyRepository` on PostgreSQL (`ServiceMigrations.policy`): its queries name no schema, the
/// pool's search path starts with the policy's (`POLICY_SCHEMA`).
package struct PostgresPolicyRepository: PolicyRepository {
    package static let defaultScope = "*"

    let client: PostgresClient
    let logger: Logger

    static func scope(_ siteId: String?) -> String { siteId ?? defaultScope }

    package func activePolicies() async throws -> StoredPolicies {
        var result = StoredPolicies()
        // Each scope's highest version is found on (scope, version) alone, then only those rows'
        // documents are read, so the refresh does not sort every version's document (the history
        // only grows; docs/PERFORMANCE.md has the plans before and after).
        let rows = try await client.query(
            """
            SELECT p.scope, p.version, p.document::text FROM site_policies p
            JOIN (SELECT scope, max(version) AS version FROM site_policies GROUP BY scope) active
                ON p.scope = active.scope AND p.version = active.version
            """,
            logger: logger
        )
        // Each document on its own: one this build cannot read closes its scope, not the whole store
        // (the global switch included) and not the service's start.
        for try await (scope, version, document) in rows.decode((String, Int, String).self) {
            do {
                result.policies.append(try Self.decode(document))
            } catch {
                result.unreadable.append(
                    UnreadablePolicy(siteId: scope == Self.defaultScope ? nil : scope, version: version, reason: "\(error)"))
            }
        }
        let switches = try await client.query("SELECT global_kill_switch FROM global_switch", logger: logger)
        for try await on in switches.decode(Bool.self) { result.globalKillSwitch = on }
        return result
    }

    package func versions(siteId: String?, limit: Int) async throws -> [StoredPolicyVersion] {
        let scope = Self.scope(siteId)
        let rows = try await client.query(
            """
            SELECT document::text, created_at, created_by FROM site_policies
            WHERE scope = \(scope) ORDER BY version DESC LIMIT \(limit)
            """,
            logger: logger
        )
        var versions: [StoredPolicyVersion] = []
        for try await (document, createdAt, createdBy) in rows.decode((String, Date, String).self) {
            versions.append(StoredPolicyVersion(policy: try Self.decodeStored(document), createdAt: createdAt, createdBy: createdBy))
        }
        return versions
    }

    package func version(siteId: String?, version: Int) async throws -> StoredPolicyVersion? {
        let scope = Self.scope(siteId)
        let rows = try await client.query(
            """
            SELECT document::text, created_at, created_by FROM site_policies
            WHERE scope = \(scope) AND version = \(version)
            """,
            logger: logger
        )
        for try await (document, createdAt, createdBy) in rows.decode((String, Date, String).self) {
            return StoredPolicyVersion(policy: try Self.decodeStored(document), createdAt: createdAt, createdBy: createdBy)
        }
        return nil
    }

    package func save(_ draft: SitePolicyDraft, siteId: String?, atLeast: Int, by: String) async throws -> StoredPolicyVersion {
        let scope = Self.scope(siteId)
        let logger = self.logger
        return try await client.withTransaction(logger: logger) { connection in
            // Two admins saving the same site at once get consecutive versions, not a key conflict.
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtext('policy-version:' || current_schema() || ':' || \(scope)))", logger: logger)
            var highest = 0
            let rows = try await connection.query(
                "SELECT coalesce(max(version), 0) FROM site_policies WHERE scope = \(scope)", logger: logger
            )
            for try await value in rows.decode(Int.self) { highest = value }
            let policy = draft.policy(siteId: siteId, version: max(highest, atLeast) + 1)
            let document = try Self.encode(policy)
            let version = policy.version
            let inserted = try await connection.query(
                """
                INSERT INTO site_policies (scope, version, document, created_by)
                VALUES (\(scope), \(version), \(document)::jsonb, \(by)) RETURNING created_at
                """,
                logger: logger
            )
            var createdAt = Date()
            for try await at in inserted.decode(Date.self) { createdAt = at }
            return StoredPolicyVersion(policy: policy, createdAt: createdAt, createdBy: by)
        }
    }

    package func setGlobalKillSwitch(_ on: Bool, by: String) async throws {
        try await client.query(
            """
            INSERT INTO global_switch (id, global_kill_switch, updated_at, updated_by) VALUES (true, \(on), now(), \(by))
            ON CONFLICT (id) DO UPDATE SET global_kill_switch = EXCLUDED.global_kill_switch, updated_at = now(), updated_by = EXCLUDED.updated_by
            """,
            logger: logger
        )
    }

    static func encode(_ policy: SitePolicy) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(policy), as: UTF8.self)
    }

    static func decode(_ document: String) throws -> SitePolicy {
        try JSONDecoder().decode(SitePolicy.self, from: Data(document.utf8))
    }

    /// A stored version for an admin read: one this build cannot read is a 503 saying so (an upgraded
    /// instance reads it), not a 500.
    static func decodeStored(_ document: String) throws -> SitePolicy {
        do {
            return try decode(document)
        } catch {
            throw ProblemDetails.unavailable(
                "a stored version of this policy cannot be read by this instance (a newer version of the policy service stored it?): \(error)"
            )
        }
    }
}
