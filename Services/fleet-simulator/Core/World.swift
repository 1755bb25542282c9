import Foundation
import PresenceKit

/// A position on a site's floor plan, metres east (`x`) and north (`y`) of the site's centre.
/// The building's front wall runs along y = 0 with the gates in it; the building is north of it.
public struct Point: Sendable, Hashable, Codable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public func distance(to other: Point) -> Double {
        let dx = x - other.x, dy = y - other.y
        return (dx * dx + dy * dy).squareRoot()
    }

    /// The point a fraction `f` of the way from `self` to `other`.
    public func interpolated(to other: Point, fraction f: Double) -> Point {
        Point(x: x + (other.x - x) * f, y: y + (other.y - y) * f)
    }
}

/// How beacon signals travel on a site. Defaults are the middle of the ranges the issue gives
/// (seed 000 sec. 10 for the beacons).
public struct RadioParameters: Sendable, Hashable, Codable {
    /// Calibrated RSSI at 1 m, dBm.
    public var txPowerAt1m: Double = -59
    /// Log-distance path-loss exponent (2 free space, 2-3.5 indoors).
    public var pathLossExponent: Double = 2.5
    /// Log-normal shadowing, dB (4-8 indoors). Slow: it changes as the person moves, so it is an
    /// AR(1) process per beacon with `shadowingCorrelation` from one second to the next.
    public var shadowingSigmaDb: Double = 5
    public var shadowingCorrelation: Double = 0.7
    /// Fast fading per packet, dB.
    public var fastFadingSigmaDb: Double = 2
    /// The body between the phone and the beacon when the person walks away from it, dB.
    public var bodyAttenuationDb: Double = 6
    /// The building's front wall for a phone inside and a beacon at the door, or the other way round,
    /// beyond `wallFreeDepthMeters` from the door (the doorway itself is open).
    public var wallAttenuationDb: Double = 15
    public var wallFreeDepthMeters: Double = 3
    /// Packets lost to collisions and the phone's scan duty cycle.
    public var packetLoss: Double = 0.1
    /// Weakest packet a phone receives, dBm.
    public var sensitivityDbm: Double = -100
    /// Height difference between a beacon over a door (2-2.5 m) and a phone in a hand or pocket.
    public var beaconHeightAbovePhoneMeters: Double = 1.1

    public init() {}

    /// Mean received power at `distance` metres (no shadowing), dBm: the log-distance model.
    public func meanRssi(atDistance distance: Double) -> Double {
        let d = max(distance, 0.1)
        return txPowerAt1m - 10 * pathLossExponent * log10(d)
    }

    /// Distance beyond which a packet is essentially never heard (mean 3 sigma below sensitivity).
    public var audibleRangeMeters: Double {
        let margin = sensitivityDbm - 3 * (shadowingSigmaDb + fastFadingSigmaDb) - txPowerAt1m
        return pow(10, -margin / (10 * pathLossExponent))
    }
}

/// One beacon on a site.
public struct BeaconPlacement: Sendable, Hashable {
    public var identity: BeaconIdentity
    public var position: Point
    /// Advertising interval, ms: 650-800 normally, 200-300 at busy doors (seed 000 sec. 10).
    public var advertisingIntervalMs: Int
    public var gateIndex: Int

    public init(identity: BeaconIdentity, position: Point, advertisingIntervalMs: Int, gateIndex: Int) {
        self.identity = identity
        self.position = position
        self.advertisingIntervalMs = advertisingIntervalMs
        self.gateIndex = gateIndex
    }
}

/// A door in the building's front wall (y = 0): people pass it going north (in) or south (out).
public struct Gate: Sendable, Hashable {
    public var name: String
    public var position: Point
    public var busy: Bool
}

/// One site: a geofence around its centre, a building with gates in its front wall, a beacon per gate.
public struct SiteLayout: Sendable, Hashable {
    public var id: String
    public var center: GeoPoint
    public var geofenceRadiusMeters: Double
    public var gates: [Gate]
    public var beacons: [BeaconPlacement]
    /// Beacons' shared proximity UUID and this site's major (seed 000: UUID per company, major = site).
    public var major: UInt16

    public init(id: String, center: GeoPoint, geofenceRadiusMeters: Double, gates: [Gate], beacons: [BeaconPlacement], major: UInt16) {
        self.id = id
        self.center = center
        self.geofenceRadiusMeters = geofenceRadiusMeters
        self.gates = gates
        self.beacons = beacons
        self.major = major
    }

    /// Is `point` inside the building (past the front wall, beyond the open doorway)?
    public func isInsideBuilding(_ point: Point) -> Bool { point.y > 0 }
}

/// Everything the radio and the people live in.
public struct World: Sendable {
    public var sites: [SiteLayout]
    public var radio: RadioParameters
    public let directory: SiteDirectory

    public init(sites: [SiteLayout], radio: RadioParameters) {
        self.sites = sites
        self.radio = radio
        directory = SiteDirectory(sites: sites.map { site in
            Site(
                id: site.id, center: site.center, radiusMeters: site.geofenceRadiusMeters,
                beacons: site.beacons.map { BeaconMatcher(uuid: $0.identity.uuid, major: $0.identity.major, minor: $0.identity.minor) }
            )
        })
    }

    /// The proximity UUID every beacon of the simulated company shares.
    public static let companyUUID = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    /// `count` sites far apart (a geofence never overlaps another site's), each with `gatesPerSite`
    /// gates 12 m apart in the front wall, so neighbouring gates' beacons overlap. The first gate of a
    /// site is the busy main door. Beacons hang over the doors.
    public static func standard(
        sites count: Int, gatesPerSite: Int = 2, busyDoorIntervalMs: Int = 250, gateIntervalMs: Int = 700, radio: RadioParameters = RadioParameters()
    ) -> World {
        var sites: [SiteLayout] = []
        for s in 0..<count {
            let major = UInt16(10 + s)
            let center = GeoPoint(latitude: 10.7769 + Double(s) * 0.05, longitude: 106.7009)
            var gates: [Gate] = []
            var beacons: [BeaconPlacement] = []
            for g in 0..<max(1, gatesPerSite) {
                let position = Point(x: Double(g) * 12, y: 0)
                gates.append(Gate(name: g == 0 ? "Main entrance" : "Gate \(g + 1)", position: position, busy: g == 0))
                beacons.append(BeaconPlacement(
                    identity: BeaconIdentity(companyUUID, major: major, minor: UInt16(g + 1)),
                    position: position, advertisingIntervalMs: g == 0 ? busyDoorIntervalMs : gateIntervalMs, gateIndex: g
                ))
            }
            sites.append(SiteLayout(id: "S_\(s + 1)", center: center, geofenceRadiusMeters: 200, gates: gates, beacons: beacons, major: major))
        }
        return World(sites: sites, radio: radio)
    }
}
