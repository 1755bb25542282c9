import AttendanceProtocol
import Foundation

/// What the policy knows about a registered beacon.
package struct RegisteredBeacon: Hashable, Sendable {
    /// The registry's beacon id, when known.
    package var beaconId: String?
    package var status: BeaconStatus
    package var gateId: String?
    /// The beacon's site: from the beacon record, else through its gate.
    package var siteId: String?
    /// When the registry last changed the beacon; its status and gate held no later than this.
    package var changedAt: Date?

    package init(beaconId: String? = nil, status: BeaconStatus, gateId: String?, siteId: String?, changedAt: Date? = nil) {
        self.beaconId = beaconId
        self.status = status
        self.gateId = gateId
        self.siteId = siteId
        self.changedAt = changedAt
    }
}

/// Which user a device is bound to.
package struct DeviceBinding: Hashable, Sendable {
    package var deviceId: String
    package var userId: String
    package var status: DeviceStatus

    package init(deviceId: String, userId: String, status: DeviceStatus) {
        self.deviceId = deviceId
        self.userId = userId
        self.status = status
    }
}

/// The registry as the rules see it: a read-only snapshot, filled from `registry.changes`.
package protocol RegistryView: Sendable {
    /// The beacon broadcasting this identity; the UUID is matched case-insensitively.
    func beacon(uuid: String, major: Int, minor: Int) -> RegisteredBeacon?
    func geofence(siteId: String) -> Geofence?
    func device(id: String) -> DeviceBinding?
    /// The sites the user is assigned to (nil: a user the registry has not published).
    func assignedSiteIds(userId: String) -> [String]?
    /// When the user's sites last changed (nil: unknown): they held no later than this.
    func userSitesChangedAt(userId: String) -> Date?
    /// The banned prefix `uuid` starts with (dashes and case ignored), or `nil`.
    func bannedPrefix(of uuid: String) -> String?
}

/// An in-memory `RegistryView` filled by hand (`upsert...`): the rules' registry in tests and
/// benchmarks, and the holder of the banned UUID prefixes. The service reads the registry feed
/// through `RegistryCacheView` (the feed is parsed in one place, `RegistryCache`).
///
/// A value type: a copy handed to a decision is a consistent snapshot, whatever is changed after.
package struct RegistrySnapshot: RegistryView, Hashable {
    /// The factory-default iBeacon UUID prefixes (`BanList`); the feed carries no ban list.
    package static let defaultBannedPrefixes = BanList.entries.map(\.prefix)

    /// As upserted: `siteId` is the beacon record's own; a lookup falls back to its gate's site.
    private var beacons: [RegistryBeaconKey: RegisteredBeacon] = [:]
    private var beaconKeyById: [String: RegistryBeaconKey] = [:]
    private var gateSites: [String: String] = [:]
    private var geofences: [String: Geofence] = [:]
    private var devices: [String: DeviceBinding] = [:]
    private var userSites: [String: [String]] = [:]
    private var sitesChangedAt: [String: Date] = [:]
    /// Upper-case hex digits, no dashes.
    package private(set) var bannedPrefixes: [String]

    package init(bannedPrefixes: [String] = RegistrySnapshot.defaultBannedPrefixes) {
        self.bannedPrefixes = bannedPrefixes.map(Self.normalizedHex)
    }

    // MARK: RegistryView

    package func beacon(uuid: String, major: Int, minor: Int) -> RegisteredBeacon? {
        guard let parsed = UUIDText.parse(uuid), let key = RegistryBeaconKey(uuid: parsed, major: major, minor: minor),
            var beacon = beacons[key]
        else { return nil }
        beacon.siteId = beacon.siteId ?? beacon.gateId.flatMap { gateSites[$0] }
        return beacon
    }

    package func geofence(siteId: String) -> Geofence? { geofences[siteId] }

    package func device(id: String) -> DeviceBinding? { devices[id] }

    package func assignedSiteIds(userId: String) -> [String]? { userSites[userId] }
    package func userSitesChangedAt(userId: String) -> Date? { sitesChangedAt[userId] }

    package func bannedPrefix(of uuid: String) -> String? {
        bannedPrefixes.first { !$0.isEmpty && Self.hex(uuid, startsWith: $0) }
    }

    /// Whether `text`, dashes skipped and ASCII letters upper-cased, starts with `prefix` (already
    /// normalized). Allocation-free: it runs on every event.
    static func hex(_ text: String, startsWith prefix: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        for expected in prefix.utf8 {
            var byte: UInt8
            repeat {
                guard let next = bytes.next() else { return false }
                byte = next
            } while byte == UInt8(ascii: "-")
            if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 32 }
            if byte != expected { return false }
        }
        return true
    }

    // MARK: Changes by hand

    /// Adds or replaces a beacon. With an `id`, a later upsert of the same id under a new identity
    /// moves it (the old identity stops resolving).
    package mutating func upsertBeacon(
        id: String? = nil, uuid: UUID, major: Int, minor: Int, status: BeaconStatus, gateId: String?, siteId: String? = nil,
        changedAt: Date? = nil
    ) {
        // An identity outside 0...65535 cannot be broadcast, so it cannot be looked up either.
        guard let key = RegistryBeaconKey(uuid: uuid, major: major, minor: minor) else { return }
        if let id {
            if let old = beaconKeyById[id], old != key { beacons[old] = nil }
            beaconKeyById[id] = key
        }
        beacons[key] = RegisteredBeacon(beaconId: id, status: status, gateId: gateId, siteId: siteId, changedAt: changedAt)
    }

    package mutating func removeBeacon(id: String) {
        guard let key = beaconKeyById.removeValue(forKey: id) else { return }
        beacons[key] = nil
    }

    package mutating func removeBeacon(uuid: UUID, major: Int, minor: Int) {
        guard let key = RegistryBeaconKey(uuid: uuid, major: major, minor: minor) else { return }
        if let id = beacons.removeValue(forKey: key)?.beaconId { beaconKeyById[id] = nil }
    }

    package mutating func upsertGate(id: String, siteId: String) { gateSites[id] = siteId }
    package mutating func removeGate(id: String) { gateSites[id] = nil }

    package mutating func upsertSite(id: String, geofence: Geofence?) { geofences[id] = geofence }
    package mutating func removeSite(id: String) { geofences[id] = nil }

    package mutating func upsertDevice(_ binding: DeviceBinding) { devices[binding.deviceId] = binding }
    package mutating func removeDevice(id: String) { devices[id] = nil }

    package mutating func upsertUser(id: String, siteIds: [String], sitesChangedAt: Date? = nil) {
        userSites[id] = siteIds
        self.sitesChangedAt[id] = sitesChangedAt
    }
    package mutating func removeUser(id: String) {
        userSites[id] = nil
        sitesChangedAt[id] = nil
    }

    package mutating func setBannedPrefixes(_ prefixes: [String]) {
        bannedPrefixes = prefixes.map(Self.normalizedHex)
    }

    static func normalizedHex(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.lazy.filter { $0 != "-" })).uppercased()
    }
}

extension RegistryView {
    /// Whether the view may be older than what `event` relies on: it lacks the event's device or
    /// user, a well-formed beacon the event names as active at a known site, or the assignment of
    /// the user to a site the event names (or to the beacon's site). Each of these may be a registry change published a moment
    /// ago (a phone enrolled at the door, a beacon just registered or found again, a user just created), and
    /// `device_binding`, `beacon_validity` and `site_assignment` would refuse the event for good, so
    /// the pipeline first makes sure the view is current as of the event's receipt. A made-up beacon
    /// or site costs its batch that wait once (the registry publishes a change within milliseconds of
    /// its commit) and is then refused.
    package func mayBeBehind(_ event: RawEventEnvelope) -> Bool {
        guard device(id: event.deviceId) != nil, let assigned = assignedSiteIds(userId: event.userId) else { return true }
        var sites = event.claimedSiteIds
        if let named = event.attendanceEvent?.beacon, bannedPrefix(of: named.uuid) == nil, UUIDText.parse(named.uuid) != nil {
            guard let registered = beacon(uuid: named.uuid, major: named.major, minor: named.minor), registered.status == .active
            else { return true }
            guard let site = registered.siteId else { return true }
            sites.append(site)
        }
        return sites.contains { !assigned.contains($0) }
    }
}
