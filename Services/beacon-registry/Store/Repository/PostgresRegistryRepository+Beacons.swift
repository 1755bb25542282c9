import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository {
    package func registerBeacon(_ input: NewBeacon) async throws(RegistryError) -> Beacon {
        let (input, uuid) = try input.validated()
        let id = input.id ?? EntityIdGenerator.make("bcn")
        let identity = BeaconIdentity(uuid: uuid, major: input.major, minor: input.minor)
        let now = now()
        var constraintErrors: [String: RegistryError] = [
            "beacons_pkey": .alreadyExists(.beacon, id: id),
            "beacons_identity_key": .duplicateBeaconIdentity(identity),
            "beacons_gate_fkey": .notFound(.gate, id: input.gateId),
        ]
        if let mac = input.mac { constraintErrors["beacons_mac_key"] = .duplicateMAC(mac) }
        return try await write("register beacon", constraintErrors: constraintErrors) { db in
            // In one of our namespaces, the beacon queues on the namespace's row as minor allocations do
            // (each then sees what the other took), and the namespace must be the gate's organization's.
            if let owner = try await db.firstRow(
                """
                SELECT n.organization_id::text, s.organization_id::text FROM namespaces n
                LEFT JOIN gates g ON g.id = \(input.gateId) LEFT JOIN sites s ON s.id = g.site_id
                WHERE n.uuid = \(uuid) AND n.major = \(input.major)
                FOR NO KEY UPDATE OF n
                """, logger: logger
            ) {
                let (namespaceOrganization, gateOrganization) = try owner.decode((String, String?).self)
                if let gateOrganization, gateOrganization != namespaceOrganization {
                    throw RegistryError.namespaceOfAnotherOrganization(identity, organizationId: namespaceOrganization)
                }
            } else if try await db.firstRow("SELECT 1 FROM shard_pool WHERE uuid = \(uuid)", logger: logger) != nil {
                // One of our shard UUIDs with a major nobody holds: the next allocation could hand that
                // namespace, this beacon in it, to another organization. (A customer's own UUID is fine.)
                throw RegistryError.namespaceNotAllocated(identity)
            }
            // A minor allocated in one of our namespaces belongs to its gate: a beacon elsewhere with
            // the same identity would make that gate's check-ins land at the wrong place.
            if let row = try await db.firstRow(
                """
                SELECT gate_id::text FROM minor_allocations
                WHERE uuid = \(uuid) AND major = \(input.major) AND minor = \(input.minor)
                """, logger: logger
            ) {
                let allocatedGate = try row.decode(String.self)
                if allocatedGate != input.gateId {
                    throw RegistryError.minorAllocatedToAnotherGate(identity, gateId: allocatedGate)
                }
            }
            let battery = input.batteryReplacedOn?.description
            let row = try await db.singleRow(
                """
                INSERT INTO beacons AS b (
                    id, uuid, major, minor, serial, mac, tx_power, adv_interval_ms, battery_replaced_on, status, gate_id,
                    created_at, updated_at
                ) VALUES (
                    \(id), \(uuid), \(input.major), \(input.minor), \(input.serial), \(input.mac), \(input.txPower),
                    \(input.advIntervalMs), \(battery)::date, 'active', \(input.gateId), \(now), \(now)
                )
                RETURNING \(unescaped: Columns.beacon)
                """, logger: logger
            )
            let beacon = try Columns.beacon(row)
            // The beacon's GATT key is born with it, in the same transaction: no beacon is ever
            // published without the key the installer will write into it.
            let keys = try await createBeaconKey(beaconId: id, on: db)
            try await ChangeOutbox.upsertBeacon(beacon, keys: keys, on: db, logger: logger)
            return beacon
        }
    }

    package func updateBeaconStatus(beaconId: String, status: BeaconStatus) async throws(RegistryError) -> Beacon {
        var v = InputValidator()
        _ = v.id(beaconId, "beaconId")
        try v.finish()
        let now = now()
        return try await write("update beacon status") { db in
            let row = try await db.firstRow(
                """
                UPDATE beacons AS b SET status = \(status.rawValue),
                    updated_at = CASE WHEN b.status = \(status.rawValue) THEN b.updated_at
                        ELSE GREATEST(\(now), b.created_at, b.updated_at) END
                WHERE b.id = \(beaconId)
                RETURNING \(unescaped: Columns.beacon)
                """, logger: logger
            )
            guard let row else { throw RegistryError.notFound(.beacon, id: beaconId) }
            let beacon = try Columns.beacon(row)
            // The feed is compacted to the latest record per beacon: it must carry the key again.
            let keys = try await Self.storedBeaconKeys(beaconId: beaconId, on: db, logger: logger)
            try await ChangeOutbox.upsertBeacon(beacon, keys: keys, on: db, logger: logger)
            return beacon
        }
    }

    package func beacon(id: String) async throws(RegistryError) -> Beacon {
        try await read("read beacon") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.beacon) FROM beacons b WHERE b.id = \(id)", logger: logger
                )
            else { throw RegistryError.notFound(.beacon, id: id) }
            return try Columns.beacon(row)
        }
    }

    // MARK: Broadcast verification

    package func recordSighting(_ sighting: BeaconSighting) async throws(RegistryError) {
        var v = InputValidator()
        let uuid = BeaconUUID.parse(sighting.beacon.uuid)
        if uuid == nil { v.fail("beacon.uuid", "must be a UUID") }
        if !(0...65_535).contains(sighting.beacon.major) { v.fail("beacon.major", "must be within 0...65535") }
        if !(0...65_535).contains(sighting.beacon.minor) { v.fail("beacon.minor", "must be within 0...65535") }
        if !(1...128).contains(sighting.deviceId.unicodeScalars.count) { v.fail("deviceId", "must be 1-128 characters") }
        let window = Self.sightingTimes(now: now())
        if sighting.seenAt < window.lowerBound {
            v.fail("seenAt", "is more than \(Self.sightingLimits.maxEventAge.humanReadable) in the past")
        } else if sighting.seenAt > window.upperBound {
            v.fail("seenAt", "is more than \(Self.sightingLimits.maxClockSkewAhead.humanReadable) in the future")
        }
        try v.finish()
        let (beacon, deviceId, seenAt) = (sighting.beacon, sighting.deviceId, sighting.seenAt)
        // Telemetry, not a registry entity: nothing goes to the change outbox.
        try await write("record sighting") { db in
            _ = try await db.rows(
                """
                INSERT INTO beacon_sightings (uuid, major, minor, device_id, seen_at)
                VALUES (\(uuid!), \(beacon.major), \(beacon.minor), \(deviceId), \(seenAt))
                """, logger: logger
            )
        }
    }

    package func recordSightings(_ sightings: [BeaconSighting]) async throws(RegistryError) -> Int {
        var uuids: [UUID] = [], majors: [Int] = [], minors: [Int] = [], devices: [String] = [], times: [Date] = []
        let window = Self.sightingTimes(now: now())
        for sighting in sightings {
            guard let uuid = BeaconUUID.parse(sighting.beacon.uuid), (0...65_535).contains(sighting.beacon.major),
                (0...65_535).contains(sighting.beacon.minor), (1...128).contains(sighting.deviceId.unicodeScalars.count),
                window.contains(sighting.seenAt)
            else { continue }
            uuids.append(uuid)
            majors.append(sighting.beacon.major)
            minors.append(sighting.beacon.minor)
            devices.append(sighting.deviceId)
            times.append(sighting.seenAt)
        }
        guard !uuids.isEmpty else { return 0 }
        let count = uuids.count
        try await write("record sightings") { db in
            _ = try await db.rows(
                """
                INSERT INTO beacon_sightings (uuid, major, minor, device_id, seen_at)
                SELECT * FROM unnest(\(uuids)::uuid[], \(majors)::int[], \(minors)::int[], \(devices)::text[], \(times)::timestamptz[])
                """, logger: logger
            )
        }
        return count
    }

    /// A sighting's time obeys the rule of device event times: at most a week old, at most 5 minutes
    /// ahead of this clock. (A time years ahead would keep a beacon "verified" and never be pruned.)
    static let sightingLimits = ValidationLimits()

    static func sightingTimes(now: Date) -> ClosedRange<Date> { sightingLimits.eventTimes(around: now) }

    package func pruneSightings(before cutoff: Date) async throws(RegistryError) -> Int {
        try await write("prune sightings") { db in
            let rows = try await db.rows("DELETE FROM beacon_sightings WHERE seen_at < \(cutoff) RETURNING 1", logger: logger)
            return rows.count
        }
    }

    package func verifyBroadcast(_ beacon: BeaconIdentity, withinMinutes minutes: Int) async throws(RegistryError) -> BroadcastVerification
    {
        var v = InputValidator()
        let uuid = BeaconUUID.parse(beacon.uuid)
        if uuid == nil { v.fail("uuid", "must be a UUID") }
        if !(1...1_440).contains(minutes) { v.fail("withinMinutes", "must be within 1...1440") }
        try v.finish()
        let since = now().addingTimeInterval(-Double(minutes) * 60)
        let latest = Self.sightingTimes(now: now()).upperBound
        let (major, minor) = (beacon.major, beacon.minor)
        return try await read("verify broadcast") { db in
            // Two index range reads on (uuid, major, minor, seen_at): the newest sighting, and the
            // devices inside the window. An enrolled device counts only when its user has a site of the
            // beacon's organization: a phone of another organization cannot make a dead beacon look alive.
            // A device id the registry does not know (an installer's tool, `POST /v1/admin/sightings`) counts.
            let row = try await db.singleRow(
                """
                WITH owner AS (
                    SELECT COALESCE(
                        (SELECT st.organization_id FROM beacons b JOIN gates g ON g.id = b.gate_id JOIN sites st ON st.id = g.site_id
                         WHERE b.uuid = \(uuid!) AND b.major = \(major) AND b.minor = \(minor)),
                        (SELECT organization_id FROM namespaces WHERE uuid = \(uuid!) AND major = \(major))) AS organization_id
                ),
                counted AS (
                    SELECT s.device_id, s.seen_at FROM beacon_sightings s, owner
                    WHERE s.uuid = \(uuid!) AND s.major = \(major) AND s.minor = \(minor) AND s.seen_at <= \(latest)
                      AND (owner.organization_id IS NULL
                           OR NOT EXISTS (SELECT 1 FROM devices d WHERE d.id = s.device_id)
                           OR EXISTS (
                               SELECT 1 FROM devices d JOIN user_sites us ON us.user_id = d.user_id JOIN sites st ON st.id = us.site_id
                               WHERE d.id = s.device_id AND st.organization_id = owner.organization_id))
                )
                SELECT (SELECT max(seen_at) FROM counted), (SELECT count(DISTINCT device_id) FROM counted WHERE seen_at >= \(since))
                """, logger: logger
            )
            let (lastSeen, devices) = try row.decode((Date?, Int).self)
            return BroadcastVerification(verified: devices > 0, lastSeen: lastSeen, deviceCount: devices, windowMinutes: minutes)
        }
    }
}
