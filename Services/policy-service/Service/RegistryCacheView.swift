import AttendanceProtocol
import Foundation
import PolicyServiceCore
import RegistryFeed

/// The policy's `RegistryView` over the registry feed's cache: every lookup reads the live cache
/// that `RegistryCacheLoader` keeps equal to `registry.changes`, so a revoked device or a retired
/// beacon is refused as soon as its change is read, without a restart.
package struct RegistryCacheView: RegistryView {
    package let cache: RegistryCache
    /// The feed carries no ban list: the factory-default prefixes are the policy's own (the same
    /// list as the registry's).
    private let banList: RegistrySnapshot

    package init(cache: RegistryCache, bannedPrefixes: [String] = RegistrySnapshot.defaultBannedPrefixes) {
        self.cache = cache
        self.banList = RegistrySnapshot(bannedPrefixes: bannedPrefixes)
    }

    package func beacon(uuid: String, major: Int, minor: Int) -> RegisteredBeacon? {
        guard let parsed = UUIDText.parse(uuid), let resolution = cache.resolve(uuid: parsed, major: major, minor: minor) else {
            return nil
        }
        return RegisteredBeacon(
            beaconId: resolution.beaconId, status: Self.status(resolution.status), gateId: resolution.gateId, siteId: resolution.siteId,
            changedAt: resolution.beacon.updatedAt)
    }

    package func geofence(siteId: String) -> Geofence? { cache.site(id: siteId)?.geofence }

    package func device(id: String) -> DeviceBinding? {
        guard let device = cache.device(id: id) else { return nil }
        return DeviceBinding(deviceId: device.id, userId: device.userId, status: device.isActive ? .enrolled : .revoked)
    }

    package func assignedSiteIds(userId: String) -> [String]? { cache.user(id: userId)?.siteIds }

    package func userSitesChangedAt(userId: String) -> Date? { cache.user(id: userId)?.sitesChangedAt }

    package func bannedPrefix(of uuid: String) -> String? { banList.bannedPrefix(of: uuid) }

    /// A status this build does not know is treated as not active: a beacon in an unknown state
    /// must not vouch for attendance.
    static func status(_ status: CachedBeaconStatus) -> BeaconStatus {
        switch status {
        case .active: return .active
        case .retired: return .retired
        case .lost, .unrecognized: return .lost
        }
    }
}
