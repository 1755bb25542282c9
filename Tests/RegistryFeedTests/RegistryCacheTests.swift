import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import RegistryFeed
import Testing

/// Records shaped exactly as the registry publishes them: its own model types, encoded the way
/// `ChangeOutbox` encodes them.
enum Records {
    static let uuid = UUID(uuidString: "FF8488AE-921E-49F4-99D4-949B0F9F6171")!
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func upsert<E: Encodable>(_ type: String, _ id: String, version: Int64, _ entity: E) -> RegistryRecord {
        .upsert(try! RegistryChange.upsert(RegistryEntityType(rawValue: type), id: id, version: version, changedAt: now, entity: entity))
    }

    static func tombstone(_ type: String, _ id: String) -> RegistryRecord {
        .delete(RegistryKey(entityType: RegistryEntityType(rawValue: type), entityId: id))
    }

    static func organization(_ id: String = "org_1", name: String = "Acme") -> Organization {
        Organization(id: id, name: name, createdAt: now)
    }

    static func site(_ id: String = "site_1", org: String = "org_1") -> Site {
        Site(
            id: id, organizationId: org, name: "HQ", timezone: "Asia/Ho_Chi_Minh",
            geofence: Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200),
            shift: ShiftSettings(
                start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!,
                checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5
            ),
            createdAt: now
        )
    }

    static func gate(_ id: String = "gate_1", site: String = "site_1") -> Gate {
        Gate(id: id, siteId: site, name: "Main entrance", createdAt: now)
    }

    static func beacon(
        _ id: String = "bcn_1", uuid: UUID = uuid, major: Int = 9, minor: Int = 1, mac: String? = "AA:BB:CC:DD:EE:01",
        status: BeaconStatus = .active, gate: String = "gate_1"
    ) -> Beacon {
        Beacon(
            id: id, uuid: uuid, major: major, minor: minor, serial: nil, mac: mac, txPower: -59, advIntervalMs: 350,
            batteryReplacedOn: nil, status: status, gateId: gate, createdAt: now, updatedAt: now
        )
    }

    static func namespace(org: String = "org_1", uuid: UUID = uuid, major: Int = 9) -> BusinessNamespace {
        BusinessNamespace(organizationId: org, uuid: uuid, major: major, allocatedAt: now)
    }

    static func device(_ id: String = "dev_1", status: DeviceStatus = .enrolled) -> Device {
        Device(
            id: id, userId: "usr_1", status: status, appVersion: nil, model: nil, enrolledAt: now,
            revokedAt: status == .revoked ? now : nil, tokenKeyId: "k1", tokenExpiresAt: now.addingTimeInterval(86_400)
        )
    }

    /// A whole small registry: organization, namespace, site, gate, one beacon, one device.
    static func place(_ cache: RegistryCache) {
        let ns = namespace()
        cache.apply([
            upsert("organization", "org_1", version: 1, organization()),
            upsert("namespace", ns.key, version: 2, ns),
            upsert("site", "site_1", version: 3, site()),
            upsert("gate", "gate_1", version: 4, gate()),
            upsert("beacon", "bcn_1", version: 5, beacon()),
            upsert("device", "dev_1", version: 6, device()),
        ])
    }
}

@Suite("RegistryCache")
struct RegistryCacheTests {
    /// A site whose shift changed carries its earlier shifts; a site without them (a registry before
    /// they existed) reads as having none.
    @Test("a site's earlier shifts are read with it")
    func aSitesEarlierShifts() throws {
        let cache = RegistryCache()
        var site = Records.site()
        #expect(!String(decoding: try ProtocolCodec.wire.encode(site), as: UTF8.self).contains("shiftHistory"))
        cache.apply(Records.upsert("site", site.id, version: 1, site))
        #expect(cache.site(id: site.id)?.shiftHistory == [])
        let until = try #require(CalendarDate("2025-10-01"))
        site.shiftHistory = [ShiftPeriod(until: until, shift: site.shift)]
        site.shift.start = try #require(TimeOfDay(hour: 9, minute: 0))
        cache.apply(Records.upsert("site", site.id, version: 2, site))
        #expect(cache.site(id: site.id)?.shiftHistory == site.shiftHistory)
        #expect(cache.site(id: site.id)?.shift?.start == TimeOfDay(hour: 9, minute: 0))
    }

    @Test("an upsert of every kind answers every lookup")
    func lookups() throws {
        let cache = RegistryCache()
        Records.place(cache)

        let resolved = try #require(cache.resolve(uuid: Records.uuid, major: 9, minor: 1))
        #expect(resolved.beaconId == "bcn_1")
        #expect(resolved.gateId == "gate_1")
        #expect(resolved.siteId == "site_1")
        #expect(resolved.organizationId == "org_1")
        #expect(resolved.status == .active)
        #expect(resolved.beacon.txPower == -59)
        #expect(resolved.site?.geofence == CachedGeofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200))
        #expect(resolved.site?.timezone == "Asia/Ho_Chi_Minh")
        #expect(cache.resolve(BeaconIdentity(uuid: Records.uuid.uuidString.lowercased(), major: 9, minor: 1))?.beaconId == "bcn_1")
        #expect(cache.resolve(uuid: Records.uuid, major: 9, minor: 2) == nil)
        #expect(cache.resolve(uuid: Records.uuid, major: 9, minor: 70_000) == nil)

        let business = try #require(cache.business(uuid: Records.uuid, major: 9))
        #expect(business.organizationId == "org_1")
        #expect(business.organization?.name == "Acme")
        #expect(cache.business(uuid: Records.uuid, major: 10) == nil)

        #expect(cache.beacons(uuid: Records.uuid).map(\.id) == ["bcn_1"])
        #expect(cache.beacon(mac: "aa-bb-cc-dd-ee-01")?.id == "bcn_1")
        #expect(cache.beacon(mac: "AABBCCDDEE01")?.id == "bcn_1")
        #expect(cache.beacon(mac: "not a mac") == nil)

        let device = try #require(cache.device(id: "dev_1"))
        #expect(device.userId == "usr_1")
        #expect(device.isActive)
        #expect(cache.counts.beacons == 1)
        #expect(cache.counts.applied == 6)
    }

    @Test("a tombstone removes the entity and its index entries")
    func tombstones() {
        let cache = RegistryCache()
        Records.place(cache)
        #expect(cache.apply(Records.tombstone("beacon", "bcn_1")) == .applied)
        #expect(cache.resolve(uuid: Records.uuid, major: 9, minor: 1) == nil)
        #expect(cache.beacon(mac: "AA:BB:CC:DD:EE:01") == nil)
        #expect(cache.beacons(uuid: Records.uuid).isEmpty)
        #expect(cache.beacon(id: "bcn_1") == nil)

        cache.apply(Records.tombstone("device", "dev_1"))
        #expect(cache.device(id: "dev_1") == nil)
        cache.apply(Records.tombstone("namespace", Records.namespace().key))
        #expect(cache.business(uuid: Records.uuid, major: 9) == nil)
        // A tombstone for something never seen is harmless.
        #expect(cache.apply(Records.tombstone("gate", "gate_unknown")) == .applied)
    }

    @Test("an older version never overwrites a newer one; replays are skipped")
    func versionOrdering() {
        let cache = RegistryCache()
        Records.place(cache)
        #expect(cache.apply(Records.upsert("device", "dev_1", version: 20, Records.device(status: .revoked))) == .applied)
        #expect(cache.apply(Records.upsert("device", "dev_1", version: 6, Records.device(status: .enrolled))) == .stale)
        #expect(cache.apply(Records.upsert("device", "dev_1", version: 20, Records.device(status: .enrolled))) == .stale)
        #expect(cache.device(id: "dev_1")?.status == .revoked)
        #expect(cache.version(of: RegistryKey(entityType: .device, entityId: "dev_1")) == 20)

        // Versions are per key: another device's low version still applies.
        #expect(cache.apply(Records.upsert("device", "dev_2", version: 1, Records.device("dev_2"))) == .applied)
    }

    @Test("a beacon that moves to another identity, MAC or gate leaves no stale index entries")
    func beaconMoves() throws {
        let cache = RegistryCache()
        Records.place(cache)
        cache.apply([
            Records.upsert("gate", "gate_2", version: 7, Records.gate("gate_2")),
            Records.upsert(
                "beacon", "bcn_1", version: 8, Records.beacon(minor: 2, mac: "AA:BB:CC:DD:EE:02", status: .lost, gate: "gate_2")),
        ])
        #expect(cache.resolve(uuid: Records.uuid, major: 9, minor: 1) == nil)
        #expect(cache.beacon(mac: "AA:BB:CC:DD:EE:01") == nil)
        let moved = try #require(cache.resolve(uuid: Records.uuid, major: 9, minor: 2))
        #expect(moved.gateId == "gate_2")
        #expect(moved.status == .lost)
        #expect(cache.beacon(mac: "AA:BB:CC:DD:EE:02")?.id == "bcn_1")
        #expect(cache.beacons(uuid: Records.uuid).count == 1)
    }

    @Test("entity types the cache does not keep are ignored", arguments: ["api_key", "enrollment_code", "policy", "hologram"])
    func unknownTypes(type: String) {
        let cache = RegistryCache()
        #expect(cache.apply(Records.upsert(type, "x1", version: 1, ["id": "x1"])) == .ignored)
        #expect(cache.apply(Records.tombstone(type, "x1")) == .ignored)
        #expect(cache.counts == RegistryCache.Counts())
    }

    @Test("a payload missing a needed field is reported and does not consume the version")
    func malformed() {
        let cache = RegistryCache()
        let outcome = cache.apply(Records.upsert("beacon", "bcn_9", version: 3, ["id": "bcn_9", "status": "active"]))
        #expect(outcome == .malformed("uuid"))
        #expect(cache.version(of: RegistryKey(entityType: .beacon, entityId: "bcn_9")) == nil)
        #expect(cache.apply(Records.upsert("beacon", "bcn_9", version: 3, Records.beacon("bcn_9", minor: 5))) == .applied)
    }

    /// The registry never writes such a site; a record that does (written to the topic by something
    /// else) must not reach the rules' arithmetic, where a radius of -1e300 trapped the policy service
    /// on every restart.
    @Test(
        "a site whose geofence is outside what the registry accepts is malformed",
        arguments: [
            ("radiusMeters", -1e300), ("radiusMeters", 1e300), ("radiusMeters", 5), ("latitude", 91), ("longitude", -180.5),
        ])
    func geofenceOutsideTheRegistrysRanges(field: String, value: Double) {
        let cache = RegistryCache()
        var site = Records.site("site_9")
        switch field {
        case "radiusMeters": site.geofence.radiusMeters = value
        case "latitude": site.geofence.latitude = value
        default: site.geofence.longitude = value
        }
        #expect(cache.apply(Records.upsert("site", "site_9", version: 1, site)) == .malformed("geofence.\(field)"))
        #expect(cache.apply(Records.upsert("site", "site_9", version: 1, Records.site("site_9"))) == .applied)
    }

    @Test("records survive the wire: encode as the publisher does, decode as the loader does")
    func wireRoundTrip() throws {
        let cache = RegistryCache()
        let change = try RegistryChange.upsert(.beacon, id: "bcn_1", version: 5, changedAt: Records.now, entity: Records.beacon())
        let bytes = try ProtocolCodec.wire.encode(change)
        cache.apply(try RegistryRecord.decode(key: "beacon:bcn_1", value: bytes))
        #expect(cache.beacon(id: "bcn_1")?.key == RegistryBeaconKey(uuid: Records.uuid, major: 9, minor: 1))
        // When the registry last changed it (the policy judges an older event by what it could know).
        #expect(cache.beacon(id: "bcn_1")?.updatedAt == WireTimestamp.truncatedToWirePrecision(Records.now))
        cache.apply(try RegistryRecord.decode(key: "beacon:bcn_1", value: nil))
        #expect(cache.beacon(id: "bcn_1") == nil)
    }

    @Test("a beacon's sealed GATT key is kept as published; a malformed one is no key, the beacon still applies")
    func sealedGattKey() throws {
        let cache = RegistryCache()
        func record(version: Int64, gattKey: JSONValue?) throws -> RegistryRecord {
            guard case .object(var members) = try JSONValue(encoding: Records.beacon()) else { throw PayloadShape() }
            members["gattKey"] = gattKey
            return Records.upsert("beacon", "bcn_1", version: version, JSONValue.object(members))
        }
        let sealed = SealedBeaconKey(version: 2, sealed: "bm90LWEtcmVhbC1ib3gtYnV0LW9wYXF1ZS1oZXJl")
        #expect(cache.apply(try record(version: 1, gattKey: try JSONValue(encoding: sealed))) == .applied)
        #expect(cache.beacon(id: "bcn_1")?.gattKey == sealed)
        #expect(cache.apply(try record(version: 2, gattKey: .object(["version": .string("two")]))) == .applied)
        #expect(cache.beacon(id: "bcn_1") != nil)
        #expect(cache.beacon(id: "bcn_1")?.gattKey == nil)
        // A registry without keys publishes none.
        #expect(cache.apply(Records.upsert("beacon", "bcn_1", version: 3, Records.beacon())) == .applied)
        #expect(cache.beacon(id: "bcn_1")?.gattKey == nil)
    }

    struct PayloadShape: Error {}
}
