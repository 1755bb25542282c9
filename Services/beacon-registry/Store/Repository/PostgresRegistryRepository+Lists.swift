import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository: RegistryListing {
    package func organization(id: String) async throws(RegistryError) -> Organization {
        try await read("read organization") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.organization) FROM organizations o WHERE o.id = \(id)", logger: logger
                )
            else { throw RegistryError.notFound(.organization, id: id) }
            return try Columns.organization(row)
        }
    }

    package func site(id: String) async throws(RegistryError) -> Site {
        try await read("read site") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.site) FROM sites s WHERE s.id = \(id)", logger: logger
                )
            else { throw RegistryError.notFound(.site, id: id) }
            return try Columns.site(row)
        }
    }

    package func gate(id: String) async throws(RegistryError) -> Gate {
        try await read("read gate") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.gate) FROM gates g WHERE g.id = \(id)", logger: logger
                )
            else { throw RegistryError.notFound(.gate, id: id) }
            return try Columns.gate(row)
        }
    }

    package func user(id: String) async throws(RegistryError) -> User {
        try await read("read user") { db in
            guard let row = try await db.firstRow("SELECT \(unescaped: Columns.user) FROM users u WHERE u.id = \(id)", logger: logger)
            else { throw RegistryError.notFound(.user, id: id) }
            return try Columns.user(row)
        }
    }

    package func listOrganizations(after: String?, limit: Int) async throws(RegistryError) -> [Organization] {
        let limit = Self.pageLimit(limit)
        return try await read("list organizations") { db in
            try await db.rows(
                """
                SELECT \(unescaped: Columns.organization) FROM organizations o
                WHERE (\(after)::text IS NULL OR o.id::text > \(after)::text)
                ORDER BY o.id::text LIMIT \(limit)
                """, logger: logger
            ).map(Columns.organization)
        }
    }

    package func listSites(organizationId: String, after: String?, limit: Int) async throws(RegistryError) -> [Site] {
        let limit = Self.pageLimit(limit)
        return try await read("list sites") { db in
            try await Self.requireExists(db, table: "organizations", id: organizationId, kind: .organization, logger: logger)
            return try await db.rows(
                """
                SELECT \(unescaped: Columns.site) FROM sites s
                WHERE s.organization_id = \(organizationId) AND (\(after)::text IS NULL OR s.id::text > \(after)::text)
                ORDER BY s.id::text LIMIT \(limit)
                """, logger: logger
            ).map(Columns.site)
        }
    }

    package func listGates(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Gate] {
        let limit = Self.pageLimit(limit)
        return try await read("list gates") { db in
            try await Self.requireExists(db, table: "sites", id: siteId, kind: .site, logger: logger)
            return try await db.rows(
                """
                SELECT \(unescaped: Columns.gate) FROM gates g
                WHERE g.site_id = \(siteId) AND (\(after)::text IS NULL OR g.id::text > \(after)::text)
                ORDER BY g.id::text LIMIT \(limit)
                """, logger: logger
            ).map(Columns.gate)
        }
    }

    package func listBeacons(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Beacon] {
        let limit = Self.pageLimit(limit)
        return try await read("list beacons") { db in
            try await Self.requireExists(db, table: "sites", id: siteId, kind: .site, logger: logger)
            return try await db.rows(
                """
                SELECT \(unescaped: Columns.beacon) FROM beacons b JOIN gates g ON g.id = b.gate_id
                WHERE g.site_id = \(siteId) AND (\(after)::text IS NULL OR b.id::text > \(after)::text)
                ORDER BY b.id::text LIMIT \(limit)
                """, logger: logger
            ).map(Columns.beacon)
        }
    }

    /// Pages hold 1...1000 rows whatever the caller asks.
    static func pageLimit(_ limit: Int) -> Int { min(max(limit, 1), 1_000) }

    /// `table` is a constant of this file, never input.
    static func requireExists(
        _ db: PostgresConnection, table: String, id: String, kind: RegistryEntityKind, logger: Logger
    ) async throws {
        guard try await db.firstRow("SELECT 1 FROM \(unescaped: table) WHERE id = \(id)", logger: logger) != nil else {
            throw RegistryError.notFound(kind, id: id)
        }
    }
}
