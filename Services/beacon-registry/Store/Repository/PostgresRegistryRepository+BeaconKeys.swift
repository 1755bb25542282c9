import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Logging
import PostgresNIO

// Beacon GATT keys (for the GATT challenge-response): the registry owns them. A random 32-byte
// key is created with the beacon, stored sealed in `beacon_keys`, shown in plain text
// only in the installer's provisioning plan, and published sealed in the beacon's record on
// `registry.changes`, where only the policy service (which holds the same `BEACON_KEY_SEAL_KEY`)
// can open it. A rotation is one transaction: new key, new version, new feed record.

extension PostgresRegistryRepository {
    package func rotateBeaconKey(beaconId: String) async throws(RegistryError) -> BeaconKeyRotation {
        var v = InputValidator()
        _ = v.id(beaconId, "beaconId")
        try v.finish()
        let sealer = beaconKeySealer
        let now = now()
        return try await write("rotate beacon key") { db in
            // The beacon row lock serializes rotations (and a concurrent status change) of one beacon.
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.beacon) FROM beacons b WHERE b.id = \(beaconId) FOR UPDATE", logger: logger
                )
            else { throw RegistryError.notFound(.beacon, id: beaconId) }
            // After the lookup: an unknown beacon is a 404 whatever the configuration.
            guard let sealer else { throw RegistryError.beaconKeysNotConfigured }
            let beacon = try Columns.beacon(row)
            let current = try await Self.sealedBeaconKey(beaconId: beaconId, on: db, logger: logger)
            let version = (current?.version ?? 0) + 1
            let sealed = try sealer.seal(BeaconKeySealer.generateBeaconKey(), beaconId: beaconId, version: version)
            try await db.query(
                """
                INSERT INTO beacon_keys (beacon_id, version, sealed_key, created_at, rotated_at)
                VALUES (\(beaconId), \(version), \(sealed.sealed), \(now), \(now))
                ON CONFLICT (beacon_id) DO UPDATE SET version = EXCLUDED.version, sealed_key = EXCLUDED.sealed_key,
                    rotated_at = EXCLUDED.rotated_at
                """, logger: logger
            )
            try await ChangeOutbox.upsertBeacon(beacon, gattKey: sealed, on: db, logger: logger)
            return BeaconKeyRotation(beaconId: beaconId, version: version, rotatedAt: now)
        }
    }

    package func beaconGattKey(beaconId: String) async throws(RegistryError) -> BeaconGattKey? {
        guard let sealer = beaconKeySealer else { throw .beaconKeysNotConfigured }
        let sealed = try await read("read beacon key") { db in
            try await Self.sealedBeaconKey(beaconId: beaconId, on: db, logger: logger)
        }
        guard let sealed else { return nil }
        guard let key = sealer.open(sealed, beaconId: beaconId) else {
            // Stored under another sealing key (BEACON_KEY_SEAL_KEY changed): rotating issues a new one.
            throw .storage("the stored GATT key of beacon \(beaconId) does not open with BEACON_KEY_SEAL_KEY; rotate it")
        }
        return BeaconGattKey(version: sealed.version, key: key)
    }

    /// Gives every beacon without a GATT key one, and publishes it: for beacons registered before
    /// the registry had keys (or while it ran without `BEACON_KEY_SEAL_KEY`). Run at start-up;
    /// several replicas may run it at once (rows are claimed with SKIP LOCKED, inserts are
    /// idempotent). `beaconIds` limits it to those beacons (tests on the shared database).
    /// - Returns: how many keys it created.
    @discardableResult
    package func backfillBeaconKeys(beaconIds: [String]? = nil, batchSize: Int = 200) async throws(RegistryError) -> Int {
        guard beaconKeySealer != nil else { throw .beaconKeysNotConfigured }
        var created = 0
        while true {
            let round = try await write("backfill beacon keys") { db -> Int in
                let rows = try await db.rows(
                    """
                    SELECT \(unescaped: Columns.beacon) FROM beacons b
                    WHERE NOT EXISTS (SELECT 1 FROM beacon_keys k WHERE k.beacon_id = b.id)
                      AND (\(beaconIds)::text[] IS NULL OR b.id = ANY(\(beaconIds)::text[]))
                    ORDER BY b.id LIMIT \(batchSize)
                    FOR UPDATE OF b SKIP LOCKED
                    """, logger: logger
                )
                for row in rows {
                    let beacon = try Columns.beacon(row)
                    let gattKey = try await createBeaconKey(beaconId: beacon.id, on: db)
                    try await ChangeOutbox.upsertBeacon(beacon, gattKey: gattKey, on: db, logger: logger)
                }
                return rows.count
            }
            created += round
            if round < batchSize { return created }
        }
    }

    /// Creates version 1 of a beacon's key on the write's connection; `nil` without a sealer.
    func createBeaconKey(beaconId: String, on db: PostgresConnection) async throws -> SealedBeaconKey? {
        guard let sealer = beaconKeySealer else { return nil }
        let sealed = try sealer.seal(BeaconKeySealer.generateBeaconKey(), beaconId: beaconId, version: 1)
        let now = now()
        try await db.query(
            """
            INSERT INTO beacon_keys (beacon_id, version, sealed_key, created_at, rotated_at)
            VALUES (\(beaconId), 1, \(sealed.sealed), \(now), \(now))
            """, logger: logger
        )
        return sealed
    }

    static func sealedBeaconKey(beaconId: String, on db: PostgresConnection, logger: Logger) async throws -> SealedBeaconKey? {
        guard
            let row = try await db.firstRow(
                "SELECT version, sealed_key FROM beacon_keys WHERE beacon_id = \(beaconId)", logger: logger
            )
        else { return nil }
        let (version, sealed) = try row.decode((Int, String).self)
        return SealedBeaconKey(version: version, sealed: sealed)
    }
}
