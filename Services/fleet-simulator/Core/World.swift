import Foundation
import PresenceKit

/// A position on a site's floor plan, metres east (`x`) and north (`y`) of the site's centre.
/// The building's front wall runs along y = 0 with the gates in it; the building is north of it.
package struct Point: Sendable, Hashable, Codable {
    package var x: Double
    package var y: Double

    package func distance(to other: Point) -> Double {
        let dx = x - other.x, dy = y - other.y
        return (dx * dx + dy * dy).squareRoot()
    }

    /// The point a fraction `f` of the way from `self` to `other`.
    package func interpolated(to other: Point, fraction f: Double) -> Point {
        Point(x: x + (other.x - x) * f, y: y + (other.y - y) * f)
    }
}

/// Fast fading of each advertisement: what multipath does to one packet on top of the slow shadowing.
package enum FastFading: Sendable, Hashable, Codable {
    /// Log-normal spread of `sigmaDb` around the mean (a calm, line-of-sight room).
    case gaussian(sigmaDb: Double)
    /// A line-of-sight path plus scattered ones: `kFactorDb` is the direct path's power over the
    /// scattered power (0 dB is much like Rayleigh, 10 dB is calm).
    case rician(kFactorDb: Double)
    /// No direct path: the deepest fades (1 % of packets more than 20 dB down).
    case rayleigh

    /// A packet's power relative to the mean, dB.
    package func draw(_ random: inout SimulationRandom) -> Double {
        switch self {
        case .gaussian(let sigma):
            return random.gaussian() * sigma
        case .rician(let kDb):
            let k = pow(10, kDb / 10)
            let direct = (k / (k + 1)).squareRoot()
            let scatter = (1 / (2 * (k + 1))).squareRoot()
            let i = direct + scatter * random.gaussian(), q = scatter * random.gaussian()
            return 10 * log10(max(i * i + q * q, 1e-6))
        case .rayleigh:
            let scatter = 0.5.squareRoot()
            let i = scatter * random.gaussian(), q = scatter * random.gaussian()
            return 10 * log10(max(i * i + q * q, 1e-6))
        }
    }

    /// In words, for reports: "Rayleigh", "Rician K=4.2 dB", "log-normal 2.0 dB".
    package var description: String {
        switch self {
        case .gaussian(let sigma): String(format: "log-normal %.1f dB", sigma)
        case .rician(let k): String(format: "Rician K=%.1f dB", k)
        case .rayleigh: "Rayleigh"
        }
    }

    /// How far above the mean a packet can plausibly read (about the 99.9th percentile), dB.
    package var upperSpreadDb: Double {
        switch self {
        case .gaussian(let sigma): return 3 * sigma
        case .rician, .rayleigh: return 8.5
        }
    }
}

/// How beacon signals travel on a site. Defaults are the middle of the usual indoor ranges; a sweep
/// (`SweepWorld`) draws each of them per site from wide ranges instead.
package struct RadioParameters: Sendable, Hashable, Codable {
    /// Calibrated RSSI at 1 m, dBm.
    package var txPowerAt1m: Double = -59
    /// Log-distance path-loss exponent (2 free space, 1.6-2 in corridors, 2-3.5 indoors).
    package var pathLossExponent: Double = 2.5
    /// Log-normal shadowing, dB (4-8 indoors). Spatially correlated: as the phone moves `d` metres the
    /// shadow keeps `exp(-d / shadowingDecorrelationMeters)` of itself; standing still it is constant.
    package var shadowingSigmaDb: Double = 5
    package var shadowingDecorrelationMeters: Double = 3.5
    /// Share of the shadowing's variance that all beacons of a site share as one phone hears them (the
    /// clutter around the phone rather than around each beacon), 0...1. 0: each beacon's shadow is its
    /// own, the harsher case for telling neighbouring gates apart.
    package var beaconShadowCorrelation: Double = 0
    /// Fast fading per packet.
    package var fading = FastFading.gaussian(sigmaDb: 2)
    /// The body between the phone and the beacon when the person faces away from it, dB (6-12).
    package var bodyAttenuationDb: Double = 6
    /// The building's front wall for a phone inside and a beacon at the door, or the other way round,
    /// beyond `wallFreeDepthMeters` from the door (the doorway itself is open).
    package var wallAttenuationDb: Double = 15
    package var wallFreeDepthMeters: Double = 3
    /// Packets lost to collisions and the phone's scan duty cycle.
    package var packetLoss: Double = 0.1
    /// Weakest packet a phone receives, dBm.
    package var sensitivityDbm: Double = -100
    /// Beyond this distance no packet is heard whatever the shadowing and fading (a 0 dBm beacon
    /// through a building's clutter); also what keeps the simulation from listening all day.
    package var maxRangeMeters: Double = 120
    /// Height difference between a beacon over a door (2-2.5 m) and a phone in a hand or pocket.
    package var beaconHeightAbovePhoneMeters: Double = 1.1

    package init() {}

    /// Mean received power at `distance` metres (no shadowing), dBm: the log-distance model.
    package func meanRssi(atDistance distance: Double) -> Double {
        let d = max(distance, 0.1)
        return txPowerAt1m - 10 * pathLossExponent * log10(d)
    }

    /// How far above its mean a packet can plausibly read (shadowing and fading), dB.
    package var upperSpreadDb: Double {
        (9 * shadowingSigmaDb * shadowingSigmaDb + fading.upperSpreadDb * fading.upperSpreadDb).squareRoot()
    }

    /// Distance beyond which a packet is essentially never heard.
    package var audibleRangeMeters: Double {
        let margin = sensitivityDbm - upperSpreadDb - txPowerAt1m
        return min(maxRangeMeters, pow(10, -margin / (10 * pathLossExponent)))
    }
}

/// One beacon on a site.
package struct BeaconPlacement: Sendable, Hashable {
    package var identity: BeaconIdentity
    package var position: Point
    /// Advertising interval, ms: 650-800 normally, 200-300 at busy doors, 100-1,000 in a sweep.
    package var advertisingIntervalMs: Int
    package var gateIndex: Int
    /// What this beacon really transmits minus its calibrated 1 m power, dB (installers' error, a weak
    /// battery, a beacon behind a sign): the phone sees every reading shifted by it.
    package var txErrorDb: Double = 0
}

/// A door in the building's front wall (y = 0): people pass it going north (in) or south (out).
package struct Gate: Sendable, Hashable {
    package var name: String
    package var position: Point
    package var busy: Bool
}

/// One site: a geofence around its centre, a building with gates in its front wall, a beacon per gate.
package struct SiteLayout: Sendable, Hashable {
    package var id: String
    package var center: GeoPoint
    package var geofenceRadiusMeters: Double
    package var gates: [Gate]
    package var beacons: [BeaconPlacement]
    /// Beacons' shared proximity UUID and this site's major (one UUID per company, major = site).
    package var major: UInt16
    /// This site's own radio, when it differs from the world's (a sweep draws one per site).
    package var radio: RadioParameters?

    /// Is `point` inside the building (past the front wall, beyond the open doorway)?
    package func isInsideBuilding(_ point: Point) -> Bool { point.y > 0 }
}

/// Everything the radio and the people live in.
package struct World: Sendable {
    package var sites: [SiteLayout]
    package var radio: RadioParameters
    package let directory: SiteDirectory

    package init(sites: [SiteLayout], radio: RadioParameters) {
        self.sites = sites
        self.radio = radio
        directory = SiteDirectory(
            sites: sites.map { site in
                Site(
                    id: site.id, center: site.center, radiusMeters: site.geofenceRadiusMeters,
                    beacons: site.beacons.map { BeaconMatcher(uuid: $0.identity.uuid, major: $0.identity.major, minor: $0.identity.minor) }
                )
            })
    }

    /// The proximity UUID every beacon of the simulated company shares.
    package static let companyUUID = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"

    /// `count` sites far apart (a geofence never overlaps another site's), each with `gatesPerSite`
    /// gates `gateSpacingMeters` apart in the front wall, so neighbouring gates' beacons overlap. The
    /// first gate of a site is the busy main door. Beacons hang over the doors.
    package static func standard(
        sites count: Int, gatesPerSite: Int = 2, busyDoorIntervalMs: Int = 250, gateIntervalMs: Int = 700,
        gateSpacingMeters: Double = 12, radio: RadioParameters = RadioParameters()
    ) -> World {
        var sites: [SiteLayout] = []
        for s in 0..<count {
            let major = UInt16(10 + s)
            let center = GeoPoint(latitude: 10.7769 + Double(s) * 0.05, longitude: 106.7009)
            var gates: [Gate] = []
            var beacons: [BeaconPlacement] = []
            for g in 0..<max(1, gatesPerSite) {
                let position = Point(x: Double(g) * gateSpacingMeters, y: 0)
                gates.append(Gate(name: g == 0 ? "Main entrance" : "Gate \(g + 1)", position: position, busy: g == 0))
                beacons.append(
                    BeaconPlacement(
                        identity: BeaconIdentity(companyUUID, major: major, minor: UInt16(g + 1)),
                        position: position, advertisingIntervalMs: g == 0 ? busyDoorIntervalMs : gateIntervalMs, gateIndex: g
                    ))
            }
            sites.append(
                SiteLayout(id: "S_\(s + 1)", center: center, geofenceRadiusMeters: 200, gates: gates, beacons: beacons, major: major))
        }
        return World(sites: sites, radio: radio)
    }
}
