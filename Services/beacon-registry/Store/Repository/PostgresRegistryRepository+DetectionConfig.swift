import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository {
    package func setDetectionConfig(
        siteId: String, _ document: DetectionConfigDocument, by apiKeyId: String
    ) async throws(RegistryError) -> SiteDetectionConfig {
        try Self.requireSiteId(siteId)
        let text: String
        do {
            text = String(decoding: try AdminJSON.encoder().encode(document.value), as: UTF8.self)
        } catch {
            throw .storage("encode detection settings: \(error)")
        }
        let now = now()
        return try await write(
            "set detection settings",
            constraintErrors: ["site_detection_configs_site_fkey": .notFound(.site, id: siteId)]
        ) { db in
            try Columns.detectionConfig(
                try await db.singleRow(
                    """
                    INSERT INTO site_detection_configs AS c (site_id, document, version, updated_at, updated_by)
                    VALUES (\(siteId), \(text)::json, 1, \(now), \(apiKeyId))
                    ON CONFLICT (site_id) DO UPDATE
                        SET document = EXCLUDED.document, version = c.version + 1, updated_at = EXCLUDED.updated_at,
                            updated_by = EXCLUDED.updated_by
                    RETURNING \(unescaped: Columns.detectionConfig)
                    """, logger: logger))
        }
    }

    package func detectionConfig(siteId: String) async throws(RegistryError) -> SiteDetectionConfig {
        try Self.requireSiteId(siteId)
        return try await read("read detection settings") { db in
            try await Self.requireExists(db, table: "sites", id: siteId, kind: .site, logger: logger)
            let row = try await db.firstRow(
                "SELECT \(unescaped: Columns.detectionConfig) FROM site_detection_configs c WHERE c.site_id = \(siteId)", logger: logger)
            return try row.map(Columns.detectionConfig) ?? .unset(siteId: siteId)
        }
    }

    package func deviceConfiguration(deviceId: String, userId: String) async throws(RegistryError) -> DeviceConfiguration {
        // One snapshot: a change of the user's sites or of a site's settings meanwhile is all in or all out.
        try await read("read device configuration", snapshot: true) { db in
            _ = try Self.activeDevice(
                try await db.firstRow("SELECT \(unescaped: Columns.device) FROM devices d WHERE d.id = \(deviceId)", logger: logger),
                deviceId: deviceId, userId: userId)
            let sites = try await db.rows(
                """
                SELECT \(unescaped: Columns.site) FROM user_sites us JOIN sites s ON s.id = us.site_id
                WHERE us.user_id = \(userId) ORDER BY s.id::text
                """, logger: logger
            ).map(Columns.site)
            let namespaces = try await db.rows(
                """
                SELECT \(unescaped: Columns.namespace) FROM namespaces n
                WHERE n.organization_id IN (SELECT s.organization_id FROM user_sites us JOIN sites s ON s.id = us.site_id WHERE us.user_id = \(userId))
                """, logger: logger
            ).map(Columns.namespace)
            let configs = try await db.rows(
                """
                SELECT \(unescaped: Columns.detectionConfig) FROM site_detection_configs c
                JOIN user_sites us ON us.site_id = c.site_id WHERE us.user_id = \(userId)
                """, logger: logger
            ).map(Columns.detectionConfig)
            var beaconsOf: [String: [DeviceBeacon]] = [:]
            for row in try await db.rows(
                """
                SELECT g.site_id, b.uuid, b.major, b.minor, b.gate_id FROM beacons b JOIN gates g ON g.id = b.gate_id
                JOIN user_sites us ON us.site_id = g.site_id
                WHERE us.user_id = \(userId) AND b.status = 'active' ORDER BY b.major, b.minor, b.uuid
                """, logger: logger)
            {
                let (siteId, uuid, major, minor, gateId) = try row.decode((String, UUID, Int, Int, String).self)
                beaconsOf[siteId, default: []].append(DeviceBeacon(uuid: uuid, major: major, minor: minor, gateId: gateId))
            }
            let namespaceOf = Dictionary(namespaces.map { ($0.organizationId, $0) }, uniquingKeysWith: { a, _ in a })
            let configOf = Dictionary(configs.map { ($0.siteId, $0) }, uniquingKeysWith: { a, _ in a })
            return DeviceConfiguration(
                deviceId: deviceId, userId: userId,
                sites: sites.map {
                    DeviceSite(
                        site: $0, namespace: namespaceOf[$0.organizationId], beacons: beaconsOf[$0.id] ?? [],
                        detectionConfig: configOf[$0.id] ?? .unset(siteId: $0.id))
                })
        }
    }
}

extension PostgresRegistryRepository {
    /// A malformed site id is a 400 naming `id`, before the database sees it.
    static func requireSiteId(_ siteId: String) throws(RegistryError) {
        var v = InputValidator()
        _ = v.id(siteId, "id")
        try v.finish()
    }
}

extension SiteDetectionConfig {
    /// A site whose settings were never set: the app's defaults.
    static func unset(siteId: String) -> SiteDetectionConfig {
        SiteDetectionConfig(siteId: siteId, version: 0, updatedAt: nil, document: .object([:]))
    }
}
