import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository {
    package func createAPIKey(name: String, role: APIRole) async throws(RegistryError) -> IssuedAPIKey {
        var v = InputValidator()
        let name = v.name(name, "name")
        try v.finish()
        let now = now()
        return try await write("create API key", retryingOn: ["api_keys_pkey"]) { db in
            try await Self.insertAPIKey(name: name, role: role, now: now, on: db, logger: logger)
        }
    }

    package func createFirstAdminKey(name: String) async throws(RegistryError) -> IssuedAPIKey? {
        var v = InputValidator()
        let name = v.name(name, "name")
        try v.finish()
        let now = now()
        return try await write("create the first admin key", retryingOn: ["api_keys_pkey"]) { db in
            // One at a time across registries: the second finds the first's key.
            try await db.query("SELECT pg_advisory_xact_lock(\(Self.firstAdminKeyLock))", logger: logger)
            let active = try await db.singleRow(
                "SELECT count(*)::int FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL", logger: logger
            ).decode(Int.self)
            guard active == 0 else { return nil }
            return try await Self.insertAPIKey(name: name, role: .admin, now: now, on: db, logger: logger)
        }
    }

    /// `pg_advisory_xact_lock` key of the first admin key: "regadmn1" as ASCII.
    static let firstAdminKeyLock: Int64 = 0x7265_6761_646D_6E31

    static func insertAPIKey(name: String, role: APIRole, now: Date, on db: PostgresConnection, logger: Logger) async throws -> IssuedAPIKey
    {
        let (id, secret, presented) = APIKeyFormat.generate()
        let hash = APIKeyFormat.hash(secret: secret)
        let row = try await db.singleRow(
            """
            INSERT INTO api_keys AS k (id, name, role, secret_sha256, created_at)
            VALUES (\(id), \(name), \(role.rawValue), \(hash), \(now))
            RETURNING \(unescaped: Columns.apiKey)
            """, logger: logger
        )
        let key = try Columns.apiKey(row)
        // The payload is the key without its hash: consumers learn that it exists, not how to use it.
        try await ChangeOutbox.upsert(.apiKey, id: id, entity: key, on: db, logger: logger)
        return IssuedAPIKey(secret: presented, key: key)
    }

    package func verifyAPIKey(_ presented: String) async throws(RegistryError) -> APIKey? {
        guard let (id, secret) = APIKeyFormat.parse(presented) else { return nil }
        let presentedHash = APIKeyFormat.hash(secret: secret)
        return try await read("verify API key") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.apiKey), k.secret_sha256 FROM api_keys k WHERE k.id = \(id)", logger: logger
                )
            else { return nil }
            let key = try Columns.apiKey(row)
            let storedHash = try row.decode((String, String, String, Date, Date?, String).self).5
            guard Secrets.constantTimeEquals(presentedHash.utf8, storedHash.utf8), key.revokedAt == nil else { return nil }
            return key
        }
    }

    package func revokeAPIKey(id: String) async throws(RegistryError) -> APIKey {
        let now = now()
        return try await write("revoke API key") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.apiKey) FROM api_keys k WHERE k.id = \(id) FOR UPDATE", logger: logger
                )
            else { throw RegistryError.notFound(.apiKey, id: id) }
            let current = try Columns.apiKey(row)
            if current.revokedAt != nil { return current }
            let revoked = try Columns.apiKey(
                try await db.singleRow(
                    """
                    UPDATE api_keys AS k SET revoked_at = GREATEST(\(now), k.created_at) WHERE k.id = \(id)
                    RETURNING \(unescaped: Columns.apiKey)
                    """, logger: logger
                ))
            try await ChangeOutbox.upsert(.apiKey, id: id, entity: revoked, on: db, logger: logger)
            return revoked
        }
    }
}
