import AttendanceProtocol
import BeaconRegistryCore
import Crypto
import Foundation
import PostgresNIO

/// Where an organization's namespace search starts in the shard pool.
///
/// Spreading organizations over the 64 shards by a hash of their id means concurrent allocations
/// for different organizations mostly lock different shard rows, so they run in parallel instead of
/// queueing on one.
enum ShardAssignment {
    static let poolSize = 64

    static func preferredPosition(organizationId: String) -> Int {
        let digest = Array(SHA256.hash(data: Array(organizationId.utf8)))
        return (Int(digest[0]) << 8 | Int(digest[1])) % poolSize
    }
}

extension PostgresRegistryRepository {
    package func allocateNamespace(organizationId: String) async throws(RegistryError) -> BusinessNamespace {
        var v = InputValidator()
        _ = v.id(organizationId, "organizationId")
        try v.finish()
        let now = now()
        let start = ShardAssignment.preferredPosition(organizationId: organizationId)
        return try await write(
            "allocate namespace",
            retryingOn: ["namespaces_uuid_major_key", "namespaces_pkey"]
        ) { db in
            // Allocations for one organization queue here, so the second finds the first's namespace.
            let organization = try await db.firstRow(
                "SELECT id FROM organizations WHERE id = \(organizationId) FOR NO KEY UPDATE", logger: logger
            )
            guard organization != nil else { throw RegistryError.notFound(.organization, id: organizationId) }
            if let row = try await db.firstRow(
                "SELECT \(unescaped: Columns.namespace) FROM namespaces n WHERE n.organization_id = \(organizationId)",
                logger: logger
            ) {
                return try Columns.namespace(row)
            }
            for offset in 0..<ShardAssignment.poolSize {
                let position = (start + offset) % ShardAssignment.poolSize
                // Allocations in one shard queue on its row, so each sees the majors the previous took.
                let shardRow = try await db.singleRow(
                    "SELECT uuid FROM shard_pool WHERE position = \(position) FOR NO KEY UPDATE", logger: logger
                )
                let shard = try shardRow.decode(UUID.self)
                guard let major = try await lowestFreeMajor(in: shard, on: db) else { continue }
                let row = try await db.singleRow(
                    """
                    INSERT INTO namespaces AS n (organization_id, uuid, major, allocated_at)
                    VALUES (\(organizationId), \(shard), \(major), \(now))
                    RETURNING \(unescaped: Columns.namespace)
                    """, logger: logger
                )
                let namespace = try Columns.namespace(row)
                try await ChangeOutbox.upsert(.namespace, id: namespace.key, entity: namespace, on: db, logger: logger)
                return namespace
            }
            throw RegistryError.shardPoolExhausted
        }
    }

    package func allocateMinor(gateId: String) async throws(RegistryError) -> MinorAllocation {
        var v = InputValidator()
        _ = v.id(gateId, "gateId")
        try v.finish()
        let organizationId = try await read("find gate organization") { db in
            let row = try await db.firstRow(
                """
                SELECT s.organization_id FROM gates g JOIN sites s ON s.id = g.site_id
                WHERE g.id = \(gateId)
                """, logger: logger
            )
            guard let row else { throw RegistryError.notFound(.gate, id: gateId) }
            return try row.decode(String.self)
        }
        let namespace = try await allocateNamespace(organizationId: organizationId)
        let now = now()
        return try await write("allocate minor", retryingOn: ["minor_allocations_pkey"]) { db in
            // Allocations in one namespace queue on its row, so each sees the minors the previous took.
            _ = try await db.rows(
                "SELECT 1 FROM namespaces WHERE uuid = \(namespace.uuid) AND major = \(namespace.major) FOR NO KEY UPDATE",
                logger: logger
            )
            guard let minor = try await lowestFreeMinor(in: namespace, on: db) else {
                throw RegistryError.minorsExhausted(uuid: namespace.uuid, major: namespace.major)
            }
            let row = try await db.singleRow(
                """
                INSERT INTO minor_allocations AS m (uuid, major, minor, gate_id, allocated_at)
                VALUES (\(namespace.uuid), \(namespace.major), \(minor), \(gateId), \(now))
                RETURNING \(unescaped: Columns.minor)
                """, logger: logger
            )
            let allocation = try Columns.minor(row)
            try await ChangeOutbox.upsert(.minor, id: allocation.identity.canonicalId, entity: allocation, on: db, logger: logger)
            return allocation
        }
    }

    /// The lowest major in 1...65535 no namespace of the shard uses, or `nil` when all are used.
    /// Gap search: 1 when free, else the smallest used major whose successor is free.
    private func lowestFreeMajor(in shard: UUID, on db: PostgresConnection) async throws -> Int? {
        try await db.singleRow(
            """
            SELECT CASE
                WHEN NOT EXISTS (SELECT 1 FROM namespaces WHERE uuid = \(shard) AND major = 1) THEN 1
                ELSE (SELECT min(a.major) + 1 FROM namespaces a
                      WHERE a.uuid = \(shard) AND a.major < 65535
                        AND NOT EXISTS (SELECT 1 FROM namespaces b WHERE b.uuid = \(shard) AND b.major = a.major + 1))
            END
            """, logger: logger
        ).decode(Int?.self)
    }

    /// The lowest minor in 1...65535 neither allocated in the namespace nor broadcast by a beacon
    /// registered there without an allocation, or `nil` when all are taken.
    private func lowestFreeMinor(in namespace: BusinessNamespace, on db: PostgresConnection) async throws -> Int? {
        let (uuid, major) = (namespace.uuid, namespace.major)
        return try await db.singleRow(
            """
            WITH used AS (
                SELECT minor FROM minor_allocations WHERE uuid = \(uuid) AND major = \(major)
                UNION SELECT minor FROM beacons WHERE uuid = \(uuid) AND major = \(major)
            )
            SELECT CASE
                WHEN NOT EXISTS (SELECT 1 FROM used WHERE minor = 1) THEN 1
                ELSE (SELECT min(a.minor) + 1 FROM used a
                      WHERE a.minor < 65535 AND NOT EXISTS (SELECT 1 FROM used b WHERE b.minor = a.minor + 1))
            END
            """, logger: logger
        ).decode(Int?.self)
    }
}
