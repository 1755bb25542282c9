import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Logging
import PostgresNIO

// Beacon GATT keys (for the GATT challenge-response): the registry owns them. A random 32-byte
// key is created with the beacon, stored sealed in `beacon_keys`, shown in plain text
// only in the installer's provisioning plan, and published sealed in the beacon's record on
// `registry.changes`, where only the policy service (which holds the same `BEACON_KEY_SEAL_KEY`)
// can open it. A rotation is one transaction: new key, new version, new feed record; the key it
// replaces is kept and published as the previous key until its grace ends, because the physical
// beacon signs with it until an installer writes the new one.

/// A beacon's keys as stored: the current one and, during a rotation's grace, the one it replaced
/// (with `validUntil` set).
struct StoredBeaconKeys {
    var current: SealedBeaconKey
    var previous: SealedBeaconKey?
}

extension PostgresRegistryRepository {
    package func rotateBeaconKey(beaconId: String, graceHours: Int, force: Bool) async throws(RegistryError) -> BeaconKeyRotation {
        var v = InputValidator()
        _ = v.id(beaconId, "beaconId")
        let range = BeaconKeyRotation.graceHoursRange
        if !range.contains(graceHours) { v.fail("graceHours", "must be \(range.lowerBound)-\(range.upperBound) hours") }
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
            let stored = try await Self.storedBeaconKeys(beaconId: beaconId, on: db, logger: logger)
            // The beacon holds the key replaced before or the current one, whichever the installer
            // got to: replacing the current one now would leave the first unverifiable.
            if graceHours > 0, !force, let until = stored?.previous?.validUntil, until > now {
                throw RegistryError.beaconKeyInGrace(beaconId: beaconId, until: until)
            }
            let version = (stored?.current.version ?? 0) + 1
            let sealed = try sealer.seal(BeaconKeySealer.generateBeaconKey(), beaconId: beaconId, version: version)
            // The key being replaced is the one the beacon holds (a rotation within a grace needs
            // `force`, the installer's word that it wrote the current key): only it is kept.
            var previous = graceHours > 0 ? stored?.current : nil
            previous?.validUntil = now.addingTimeInterval(TimeInterval(graceHours) * 3_600)
            try await db.query(
                """
                INSERT INTO beacon_keys (
                    beacon_id, version, sealed_key, created_at, rotated_at, previous_version, previous_sealed_key, previous_valid_until
                ) VALUES (
                    \(beaconId), \(version), \(sealed.sealed), \(now), \(now), \(previous?.version), \(previous?.sealed),
                    \(previous?.validUntil)
                )
                ON CONFLICT (beacon_id) DO UPDATE SET version = EXCLUDED.version, sealed_key = EXCLUDED.sealed_key,
                    rotated_at = EXCLUDED.rotated_at, previous_version = EXCLUDED.previous_version,
                    previous_sealed_key = EXCLUDED.previous_sealed_key, previous_valid_until = EXCLUDED.previous_valid_until
                """, logger: logger
            )
            let keys = StoredBeaconKeys(current: sealed, previous: previous)
            try await ChangeOutbox.upsertBeacon(beacon, keys: keys, on: db, logger: logger)
            return BeaconKeyRotation(beaconId: beaconId, version: version, rotatedAt: now, previousKeyValidUntil: previous?.validUntil)
        }
    }

    package func beaconGattKey(beaconId: String) async throws(RegistryError) -> BeaconGattKey? {
        guard let sealer = beaconKeySealer else { throw .beaconKeysNotConfigured }
        let stored = try await read("read beacon key") { db in
            try await Self.storedBeaconKeys(beaconId: beaconId, on: db, logger: logger)
        }
        guard let sealed = stored?.current else { return nil }
        guard let key = sealer.open(sealed, beaconId: beaconId) else { throw .beaconKeySealedUnderAnotherKey(beaconId: beaconId) }
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
            let round = try await write("backfill beacon keys") { db -> (selected: Int, created: Int) in
                let rows = try await db.rows(
                    """
                    SELECT \(unescaped: Columns.beacon) FROM beacons b
                    WHERE NOT EXISTS (SELECT 1 FROM beacon_keys k WHERE k.beacon_id = b.id)
                      AND (\(beaconIds)::text[] IS NULL OR b.id = ANY(\(beaconIds)::text[]))
                    ORDER BY b.id LIMIT \(batchSize)
                    FOR UPDATE OF b SKIP LOCKED
                    """, logger: logger
                )
                var createdHere = 0
                for row in rows {
                    let beacon = try Columns.beacon(row)
                    // Another replica may have created it and released the row after this statement's
                    // snapshot: a new statement sees its commit.
                    let exists = try await db.firstRow(
                        "SELECT 1 FROM beacon_keys WHERE beacon_id = \(beacon.id)", logger: logger)
                    if exists != nil { continue }
                    createdHere += 1
                    let keys = try await createBeaconKey(beaconId: beacon.id, on: db)
                    try await ChangeOutbox.upsertBeacon(beacon, keys: keys, on: db, logger: logger)
                }
                return (selected: rows.count, created: createdHere)
            }
            created += round.created
            if round.selected < batchSize { return created }
        }
    }

    /// Creates version 1 of a beacon's key on the write's connection; `nil` without a sealer.
    func createBeaconKey(beaconId: String, on db: PostgresConnection) async throws -> StoredBeaconKeys? {
        guard let sealer = beaconKeySealer else { return nil }
        let sealed = try sealer.seal(BeaconKeySealer.generateBeaconKey(), beaconId: beaconId, version: 1)
        let now = now()
        try await db.query(
            """
            INSERT INTO beacon_keys (beacon_id, version, sealed_key, created_at, rotated_at)
            VALUES (\(beaconId), 1, \(sealed.sealed), \(now), \(now))
            """, logger: logger
        )
        return StoredBeaconKeys(current: sealed)
    }

    static func storedBeaconKeys(beaconId: String, on db: PostgresConnection, logger: Logger) async throws -> StoredBeaconKeys? {
        guard
            let row = try await db.firstRow(
                """
                SELECT version, sealed_key, previous_version, previous_sealed_key, previous_valid_until
                FROM beacon_keys WHERE beacon_id = \(beaconId)
                """, logger: logger
            )
        else { return nil }
        let (version, sealed, previousVersion, previousSealed, previousValidUntil) = try row.decode(
            (Int, String, Int?, String?, Date?).self)
        var keys = StoredBeaconKeys(current: SealedBeaconKey(version: version, sealed: sealed))
        if let previousVersion, let previousSealed, let previousValidUntil {
            keys.previous = SealedBeaconKey(version: previousVersion, sealed: previousSealed, validUntil: previousValidUntil)
        }
        return keys
    }
}
