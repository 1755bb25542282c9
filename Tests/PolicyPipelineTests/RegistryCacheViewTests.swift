import AttendanceProtocol
import Foundation
import PolicyService
import PolicyServiceCore
import RegistryFeed
import Testing

/// The rules' registry view as the service runs it: `RegistryCacheView` over the registry feed's
/// cache, fed with records shaped as the registry publishes them on `registry.changes`.
@Suite("Registry view over the registry feed's cache")
struct RegistryCacheViewTests {
    static let uuid = "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34"
    static let at = Date(timeIntervalSince1970: 1_758_177_312)

    static func upsert(_ type: RegistryEntityType, _ id: String, version: Int64 = 1, _ payload: [String: JSONValue]) -> RegistryRecord {
        var members = payload
        members["id"] = .string(id)
        return .upsert(RegistryChange(entityType: type, entityId: id, version: version, changedAt: at, payload: .object(members)))
    }

    static func beacon(_ id: String, version: Int64 = 1, minor: Int, status: String = "active", uuid: String = uuid) -> RegistryRecord {
        upsert(
            .beacon, id, version: version,
            ["uuid": .string(uuid), "major": 10, "minor": .integer(Int64(minor)), "status": .string(status), "gateId": "G_MAIN"])
    }

    /// A site, its gate, two beacons and a revoked device, as the feed carries them.
    static func cache() -> RegistryCache {
        let cache = RegistryCache()
        let outcomes = cache.apply([
            upsert(
                .site, "S_HQ",
                [
                    "organizationId": "O_1", "name": "HQ", "timezone": "Asia/Ho_Chi_Minh",
                    "geofence": ["latitude": 10.7769, "longitude": 106.7009, "radiusMeters": 200],
                ]),
            upsert(.gate, "G_MAIN", ["siteId": "S_HQ", "name": "Main"]),
            beacon("B_0003", minor: 3),
            beacon("B_0004", minor: 4, status: "lost"),
            upsert(.device, "d_1", ["userId": "u_1", "status": "revoked", "tokenKeyId": "k1"]),
            upsert(.user, "u_1", ["name": "One", "siteIds": ["S_HQ"]]),
        ])
        #expect(outcomes == Array(repeating: .applied, count: 6))
        return cache
    }

    @Test func answersFromTheChangeFeed() throws {
        let view = RegistryCacheView(cache: Self.cache())
        #expect(view.geofence(siteId: "S_HQ") == Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200))
        // The beacon record names no site: the view finds it through the gate.
        #expect(
            view.beacon(uuid: Self.uuid, major: 10, minor: 3)
                == RegisteredBeacon(beaconId: "B_0003", status: .active, gateId: "G_MAIN", siteId: "S_HQ"))
        #expect(view.beacon(uuid: Self.uuid.lowercased(), major: 10, minor: 4)?.status == .lost)
        #expect(view.beacon(uuid: Self.uuid, major: 10, minor: 9) == nil)
        #expect(view.device(id: "d_1") == DeviceBinding(deviceId: "d_1", userId: "u_1", status: .revoked))
        #expect(view.device(id: "d_unknown") == nil)
        #expect(view.assignedSiteIds(userId: "u_1") == ["S_HQ"])
        #expect(view.assignedSiteIds(userId: "u_unknown") == nil)
    }

    @Test func changesApplyAtOnceAndTombstonesRemove() {
        let cache = Self.cache()
        let view = RegistryCacheView(cache: cache)
        _ = cache.apply(Self.beacon("B_0003", version: 2, minor: 7))
        #expect(view.beacon(uuid: Self.uuid, major: 10, minor: 3) == nil)
        #expect(view.beacon(uuid: Self.uuid, major: 10, minor: 7)?.beaconId == "B_0003")
        _ = cache.apply(.delete(RegistryKey(entityType: .beacon, entityId: "B_0003")))
        #expect(view.beacon(uuid: Self.uuid, major: 10, minor: 7) == nil)
        _ = cache.apply(.delete(RegistryKey(entityType: .device, entityId: "d_1")))
        #expect(view.device(id: "d_1") == nil)
        _ = cache.apply(
            Self.upsert(
                .user, "u_1", version: 2,
                ["name": "One", "siteIds": ["S_HQ", "S_BRANCH"], "sitesChangedAt": .string("2025-09-18T06:35:12.000Z")]))
        #expect(view.assignedSiteIds(userId: "u_1") == ["S_HQ", "S_BRANCH"])
        // When the sites changed: the rules judge events made before it against sites it may have removed.
        #expect(view.userSitesChangedAt(userId: "u_1") == Self.at)
    }

    /// A status this build does not know must not vouch for attendance.
    @Test func aBeaconInAStatusThisBuildDoesNotKnowCountsAsLost() {
        let cache = Self.cache()
        _ = cache.apply(Self.beacon("B_0005", minor: 5, status: "melted"))
        #expect(RegistryCacheView(cache: cache).beacon(uuid: Self.uuid, major: 10, minor: 5)?.status == .lost)
    }
}
