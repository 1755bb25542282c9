import Foundation
import PresenceKit

/// Seeded randomness for the simulator: PresenceKit's SplitMix64 plus the few distributions the
/// world needs. Every device gets its own stream (seed mixed with its index), so a run is the same
/// whatever order the devices are simulated in.
package struct SimulationRandom: Sendable {
    package var generator: SplitMix64

    package init(seed: UInt64, stream: UInt64 = 0) {
        var mixer = SplitMix64(seed: seed ^ (stream &* 0x9E37_79B9_7F4A_7C15))
        generator = SplitMix64(seed: mixer.next())
    }

    /// Uniform in [0, 1).
    package mutating func unit() -> Double {
        Double(generator.next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }

    package mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + unit() * (range.upperBound - range.lowerBound)
    }

    package mutating func chance(_ probability: Double) -> Bool { unit() < probability }

    /// Standard normal (Box-Muller).
    package mutating func gaussian() -> Double {
        let u1 = max(unit(), 1e-12), u2 = unit()
        return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }

    package mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(generator.next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
}

/// One ranging callback entry: what iOS reports for one beacon after a second of listening.
package struct RangedBeacon: Sendable, Hashable {
    package var beaconIndex: Int
    /// Mean of the packets heard in that second, rounded; 0 when none was heard (iOS keeps a beacon
    /// it heard recently in the list with RSSI 0).
    package var rssi: Int
    package var packetsHeard: Int
}

/// The radio channel between one phone and the beacons of one site: the shadowing state per beacon
/// (spatially correlated: it changes as the phone moves, not while it stands still) and the last time
/// each beacon was heard.
package struct RadioChannel: Sendable {
    package let site: SiteLayout
    package let radio: RadioParameters
    /// Extra loss of this phone (in a bag, a pocket, a case), dB; negative for a phone that reads hot.
    package let phoneLossDb: Double
    var shadow: [Double]
    var lastHeardAt: [Int64]
    /// Fractional advertising phase per beacon, so 1.43 packets a second come out as 1, 1, 2, 1, 2...
    var phase: [Double]
    /// Where the shadow was last drawn.
    var shadowAt: Point?
    /// The part of the shadow every beacon shares (`RadioParameters.beaconShadowCorrelation`); drawn
    /// only when that is above 0, so a world without it draws the same numbers as before it existed.
    var sharedShadow = 0.0

    /// iOS lists a beacon with RSSI 0 for a few seconds after it was last heard.
    package static let zeroListingMs: Int64 = 5_000

    /// `radio` is the world's; a site with its own (`SiteLayout.radio`) uses that instead.
    package init(site: SiteLayout, radio: RadioParameters, phoneLossDb: Double, random: inout SimulationRandom) {
        self.site = site
        let radio = site.radio ?? radio
        self.radio = radio
        self.phoneLossDb = phoneLossDb
        shadow = site.beacons.map { _ in random.gaussian() * radio.shadowingSigmaDb }
        lastHeardAt = site.beacons.map { _ in Int64.min / 4 }
        phase = site.beacons.map { _ in random.unit() }
    }

    /// Mean RSSI of `beacon` for a person at `here` (position, facing, the spot's own extra loss),
    /// without shadowing or fading: path loss, the beacon's calibration error, body, wall and phone losses.
    package func meanRssi(beacon: BeaconPlacement, at here: Whereabouts) -> Double {
        let position = here.position
        let flat = position.distance(to: beacon.position)
        let h = radio.beaconHeightAbovePhoneMeters
        var rssi = radio.meanRssi(atDistance: (flat * flat + h * h).squareRoot()) + beacon.txErrorDb - phoneLossDb - here.extraLossDb
        let facing = here.facing
        if flat > 0.5 && (facing.x != 0 || facing.y != 0) {
            // Facing away from the beacon puts the body between it and a phone carried in front.
            let toBeacon = Point(x: (beacon.position.x - position.x) / flat, y: (beacon.position.y - position.y) / flat)
            let cosine = facing.x * toBeacon.x + facing.y * toBeacon.y
            if cosine < 0 { rssi += radio.bodyAttenuationDb * cosine }
        }
        let phoneInside = position.y > radio.wallFreeDepthMeters
        let beaconInside = beacon.position.y > radio.wallFreeDepthMeters
        if phoneInside != beaconInside
            && abs(position.x - beacon.position.x) + abs(position.y - beacon.position.y) > radio.wallFreeDepthMeters
        {
            rssi -= radio.wallAttenuationDb
        }
        return rssi
    }

    /// The loudest a beacon can be at `position` (facing it, no extra loss): lets the simulation skip
    /// the radio work (and jump ahead in time) far from every beacon.
    func loudestMean(beacon: BeaconPlacement, at position: Point) -> Double {
        meanRssi(beacon: beacon, at: Whereabouts(position: position, heading: Point(x: 0, y: 0), walking: false))
    }

    /// Is any beacon of the site possibly audible from `position`?
    package func anyBeaconAudible(from position: Point) -> Bool {
        let spread = radio.upperSpreadDb
        return site.beacons.contains {
            position.distance(to: $0.position) <= radio.maxRangeMeters
                && loudestMean(beacon: $0, at: position) + spread >= radio.sensitivityDbm
        }
    }

    /// One second of listening ending at `now`: the packets each beacon sent, each lost or received
    /// with shadowing and fading; the ranging callback averages what was heard.
    package mutating func listen(at now: Int64, here: Whereabouts, random: inout SimulationRandom) -> [RangedBeacon] {
        var out: [RangedBeacon] = []
        let moved = shadowAt.map { here.position.distance(to: $0) } ?? .infinity
        let rho = moved.isInfinite ? 0 : exp(-moved / max(radio.shadowingDecorrelationMeters, 0.01))
        let innovation = (1 - rho * rho).squareRoot() * radio.shadowingSigmaDb
        shadowAt = here.position
        let spread = radio.upperSpreadDb
        let shared = min(max(radio.beaconShadowCorrelation, 0), 1)
        if shared > 0 && moved > 0 { sharedShadow = rho * sharedShadow + innovation * random.gaussian() }
        for (i, beacon) in site.beacons.enumerated() {
            if here.position.distance(to: beacon.position) > radio.maxRangeMeters
                || loudestMean(beacon: beacon, at: here.position) + spread < radio.sensitivityDbm
            {
                if now - lastHeardAt[i] < Self.zeroListingMs { out.append(RangedBeacon(beaconIndex: i, rssi: 0, packetsHeard: 0)) }
                continue
            }
            if moved > 0 { shadow[i] = rho * shadow[i] + innovation * random.gaussian() }
            let shadowHere = shared > 0 ? shared.squareRoot() * sharedShadow + (1 - shared).squareRoot() * shadow[i] : shadow[i]
            let mean = meanRssi(beacon: beacon, at: here) + shadowHere
            let expected = 1000.0 / Double(beacon.advertisingIntervalMs) + phase[i]
            let packets = Int(expected)
            phase[i] = expected - Double(packets)
            var sum = 0.0
            var heard = 0
            for _ in 0..<packets {
                if random.chance(radio.packetLoss) { continue }
                let rssi = mean + radio.fading.draw(&random)
                if rssi >= radio.sensitivityDbm {
                    sum += rssi
                    heard += 1
                }
            }
            if heard > 0 {
                lastHeardAt[i] = now
                out.append(RangedBeacon(beaconIndex: i, rssi: min(-1, Int((sum / Double(heard)).rounded())), packetsHeard: heard))
            } else if now - lastHeardAt[i] < Self.zeroListingMs {
                out.append(RangedBeacon(beaconIndex: i, rssi: 0, packetsHeard: 0))
            }
        }
        return out
    }

    /// When any beacon of the site was last heard (region monitoring's witness).
    package var lastHeardAnyAt: Int64 { lastHeardAt.max() ?? Int64.min / 4 }
}
