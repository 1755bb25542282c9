#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A WGS-84 position in degrees.
public struct GeoPoint: Sendable, Hashable, Codable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The point `meters` away along `bearingDegrees` (0 = north, 90 = east), on the sphere.
    /// Handy for building test paths and simulated walks.
    public func moved(meters: Double, bearingDegrees: Double) -> GeoPoint {
        let r = Haversine.earthRadiusMeters
        let delta = meters / r
        let theta = bearingDegrees * .pi / 180
        let phi1 = latitude * .pi / 180
        let lambda1 = longitude * .pi / 180
        let phi2 = asin(sin(phi1) * cos(delta) + cos(phi1) * sin(delta) * cos(theta))
        let lambda2 = lambda1 + atan2(sin(theta) * sin(delta) * cos(phi1), cos(delta) - sin(phi1) * sin(phi2))
        return GeoPoint(latitude: phi2 * 180 / .pi, longitude: lambda2 * 180 / .pi)
    }
}

public enum Haversine {
    /// Mean Earth radius (IUGG), meters.
    public static let earthRadiusMeters = 6_371_008.8

    /// Great-circle distance in meters. The haversine form stays accurate at the short distances that
    /// matter here (a few meters to a few kilometers), where the spherical law of cosines loses digits.
    public static func distance(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        let phi1 = a.latitude * .pi / 180
        let phi2 = b.latitude * .pi / 180
        let dPhi = (b.latitude - a.latitude) * .pi / 180
        let dLambda = (b.longitude - a.longitude) * .pi / 180
        let s1 = sin(dPhi / 2)
        let s2 = sin(dLambda / 2)
        let h = s1 * s1 + cos(phi1) * cos(phi2) * s2 * s2
        return 2 * earthRadiusMeters * asin(min(1, h.squareRoot()))
    }
}

/// A circular geofence around a site (150-300 m around the entrance; used for arming and for
/// the co-location rule "beacon seen AND inside the geofence").
public struct Geofence: Sendable, Hashable, Codable {
    public var center: GeoPoint
    public var radiusMeters: Double

    public init(center: GeoPoint, radiusMeters: Double) {
        self.center = center
        self.radiusMeters = radiusMeters
    }

    public func distance(to point: GeoPoint) -> Double { Haversine.distance(center, point) }

    /// Inside-radius test (boundary counts as inside).
    public func contains(_ point: GeoPoint) -> Bool { distance(to: point) <= radiusMeters }
}

/// Matches beacons to a site: a UUID, optionally narrowed by major, optionally by minor
/// (major = site; or, in the registry's model, UUID + major = business namespace, minor = service point).
public struct BeaconMatcher: Sendable, Hashable {
    public var uuid: UUIDBits
    public var major: UInt16?
    public var minor: UInt16?

    public init(uuid: UUIDBits, major: UInt16? = nil, minor: UInt16? = nil) {
        precondition(minor == nil || major != nil, "a minor needs a major")
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    public init(_ uuid: String, major: UInt16? = nil, minor: UInt16? = nil) {
        guard let bits = UUIDBits(uuidString: uuid) else { preconditionFailure("malformed UUID \(uuid)") }
        self.init(uuid: bits, major: major, minor: minor)
    }
}

/// A place where attendance is taken.
public struct Site: Sendable, Hashable {
    public var id: String
    public var center: GeoPoint
    /// Arming radius of this site; nil uses `PresenceConfig.geofenceRadiusMeters` (remote config
    /// `geofence_radius`).
    public var radiusMeters: Double?
    public var beacons: [BeaconMatcher]
    /// This site's detection settings (its remote-config document read on top of the defaults), in
    /// force while the device is at the site (`PresenceStateMachine.settingsSiteId`); nil: the
    /// device's own configuration applies here.
    public var settings: PresenceConfig?

    public init(
        id: String, center: GeoPoint, radiusMeters: Double? = nil, beacons: [BeaconMatcher], settings: PresenceConfig? = nil
    ) {
        self.id = id
        self.center = center
        self.radiusMeters = radiusMeters
        self.beacons = beacons
        self.settings = settings
    }
}

/// The sites a device knows about, with beacon → site lookup.
///
/// A `final class` holding only constants, so it is `Sendable` and shared by reference: ten thousand
/// simulated devices point at one directory instead of copying it (it is not part of the per-device
/// state budget).
public final class SiteDirectory: Sendable {
    public let sites: [Site]
    private let exact: [BeaconIdentity: Int32]
    private let byMajor: [UUIDMajor: Int32]
    private let byUUID: [UUIDBits: Int32]
    private let byId: [String: Int32]
    /// True when some site has settings of its own (else the machine never looks for them).
    public let hasSiteSettings: Bool
    /// The sites whose `settings` failed validation, by id: they are dropped (the device's own
    /// configuration applies there), so the host should report them.
    public let refusedSettings: [String: ConfigValidationError]
    private let settingsOf: [PresenceConfig?]
    private let withSettings: [Bool]

    struct UUIDMajor: Hashable {
        var uuid: UUIDBits
        var major: UInt16
    }

    /// When two sites claim the same beacon, the first one listed wins.
    public init(sites: [Site]) {
        var refused: [String: ConfigValidationError] = [:]
        var sites = sites
        for i in sites.indices {
            do {
                sites[i].settings = try sites[i].settings?.validated()
            } catch {
                refused[sites[i].id] = error
                sites[i].settings = nil
            }
        }
        self.sites = sites
        refusedSettings = refused
        settingsOf = sites.map(\.settings)
        withSettings = sites.map { $0.settings != nil }
        var exact: [BeaconIdentity: Int32] = [:]
        var byMajor: [UUIDMajor: Int32] = [:]
        var byUUID: [UUIDBits: Int32] = [:]
        var byId: [String: Int32] = [:]
        for (i, site) in sites.enumerated() {
            let index = Int32(i)
            if byId[site.id] == nil { byId[site.id] = index }
            for m in site.beacons {
                switch (m.major, m.minor) {
                case let (major?, minor?):
                    let key = BeaconIdentity(uuid: m.uuid, major: major, minor: minor)
                    if exact[key] == nil { exact[key] = index }
                case let (major?, nil):
                    let key = UUIDMajor(uuid: m.uuid, major: major)
                    if byMajor[key] == nil { byMajor[key] = index }
                default:
                    if byUUID[m.uuid] == nil { byUUID[m.uuid] = index }
                }
            }
        }
        self.exact = exact
        self.byMajor = byMajor
        self.byUUID = byUUID
        self.byId = byId
        hasSiteSettings = withSettings.contains(true)
    }

    /// Index of the site `beacon` belongs to (most specific matcher wins), or nil for a foreign beacon.
    public func siteIndex(for beacon: BeaconIdentity) -> Int32? {
        if let i = exact[beacon] { return i }
        if let i = byMajor[UUIDMajor(uuid: beacon.uuid, major: beacon.major)] { return i }
        return byUUID[beacon.uuid]
    }

    public func siteIndex(id: String) -> Int32? { byId[id] }

    public subscript(index: Int32) -> Site { sites[Int(index)] }

    /// The validated settings of a site (`Site.settings`), nil where it has none.
    public func settings(ofSite index: Int32) -> PresenceConfig? { settingsOf[Int(index)] }

    func hasSettings(_ index: Int32) -> Bool { index >= 0 && withSettings[Int(index)] }

    public func geofence(ofSite index: Int32, defaultRadius: Double) -> Geofence {
        let site = sites[Int(index)]
        return Geofence(center: site.center, radiusMeters: site.radiusMeters ?? defaultRadius)
    }
}
