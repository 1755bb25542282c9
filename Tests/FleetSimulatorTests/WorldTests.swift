import Foundation
import PresenceKit
import Testing

@testable import FleetSimulatorCore

@Suite("World model physics")
struct WorldTests {
    /// A radio without randomness, losses or height: what is left is the log-distance model.
    static func quietRadio(exponent: Double = 2.5) -> RadioParameters {
        var r = RadioParameters()
        r.pathLossExponent = exponent
        r.shadowingSigmaDb = 0
        r.fading = .gaussian(sigmaDb: 0)
        r.packetLoss = 0
        r.bodyAttenuationDb = 0
        r.beaconHeightAbovePhoneMeters = 0
        return r
    }

    static func standing(_ p: Point) -> Whereabouts { Whereabouts(position: p, heading: Point(x: 0, y: 0), walking: false) }

    @Test func logDistancePathLossMatchesHandComputedValues() {
        let r = Self.quietRadio()
        #expect(abs(r.meanRssi(atDistance: 1) - (-59)) < 1e-9)
        // -59 - 25 * log10(10) = -84
        #expect(abs(r.meanRssi(atDistance: 10) - (-84)) < 1e-9)
        // -59 - 20 * log10(2) = -65.0206
        #expect(abs(Self.quietRadio(exponent: 2).meanRssi(atDistance: 2) - (-65.0206)) < 1e-3)
        // -59 - 35 * log10(4) = -80.0721
        #expect(abs(Self.quietRadio(exponent: 3.5).meanRssi(atDistance: 4) - (-80.0721)) < 1e-3)
    }

    @Test func rangingCallbackAveragesThePacketsOfOneSecond() {
        let world = World.standard(sites: 1, gatesPerSite: 1, busyDoorIntervalMs: 700, radio: Self.quietRadio())
        var random = SimulationRandom(seed: 7)
        var channel = RadioChannel(site: world.sites[0], radio: world.radio, phoneLossDb: 0, random: &random)
        var packets = 0
        for second in 1...700 {
            let ranged = channel.listen(at: Int64(second) * 1000, here: Self.standing(Point(x: 0, y: -4)), random: &random)
            #expect(ranged.count == 1)
            // No noise: every callback is the mean at 4 m: -59 - 25 * log10(4) = -74.05 -> -74.
            if let r = ranged.first, r.packetsHeard > 0 { #expect(r.rssi == -74) }
            packets += ranged.first?.packetsHeard ?? 0
        }
        // 700 s at one packet per 700 ms.
        #expect(packets == 1000)
    }

    @Test func aBeaconNotHeardThisSecondIsListedWithZeroForAFewSeconds() {
        let world = World.standard(sites: 1, gatesPerSite: 1, radio: Self.quietRadio())
        var random = SimulationRandom(seed: 1)
        var channel = RadioChannel(site: world.sites[0], radio: world.radio, phoneLossDb: 0, random: &random)
        let heard = channel.listen(at: 1_000, here: Self.standing(Point(x: 0, y: -2)), random: &random)
        #expect((heard.first?.packetsHeard ?? 0) > 0)
        let far = Point(x: 0, y: -2_000)
        #expect(
            channel.listen(at: 2_000, here: Self.standing(far), random: &random) == [RangedBeacon(beaconIndex: 0, rssi: 0, packetsHeard: 0)]
        )
        #expect(channel.listen(at: 10_000, here: Self.standing(far), random: &random).isEmpty)
    }

    @Test func bodyAndWallAttenuation() {
        var radio = Self.quietRadio()
        radio.bodyAttenuationDb = 6
        radio.wallAttenuationDb = 20
        let world = World.standard(sites: 1, gatesPerSite: 1, radio: radio)
        var random = SimulationRandom(seed: 1)
        let channel = RadioChannel(site: world.sites[0], radio: radio, phoneLossDb: 0, random: &random)
        let beacon = world.sites[0].beacons[0]
        let facing = channel.meanRssi(
            beacon: beacon, at: Whereabouts(position: Point(x: 0, y: -5), heading: Point(x: 0, y: 1), walking: true))
        let away = channel.meanRssi(
            beacon: beacon, at: Whereabouts(position: Point(x: 0, y: -5), heading: Point(x: 0, y: -1), walking: true))
        #expect(abs(facing - (-59 - 25 * log10(5.0))) < 1e-9)
        #expect(abs((facing - away) - 6) < 1e-9)
        // 10 m inside the building, the beacon at the door: the wall costs 20 dB.
        let inside = channel.meanRssi(
            beacon: beacon, at: Whereabouts(position: Point(x: 0, y: 10), heading: Point(x: 0, y: 0), walking: true))
        #expect(abs(inside - (-59 - 25 - 20)) < 1e-9)
    }

    @Test func overlappingGatesHearEachOther() {
        let world = World.standard(sites: 1, gatesPerSite: 3)
        let site = world.sites[0]
        #expect(site.beacons.count == 3)
        #expect(site.beacons[0].advertisingIntervalMs == 250)
        #expect(site.beacons[1].advertisingIntervalMs == 700)
        var random = SimulationRandom(seed: 3)
        let channel = RadioChannel(site: site, radio: world.radio, phoneLossDb: 0, random: &random)
        // At gate 2 the neighbouring gate's beacon (12 m away) is still audible.
        #expect(channel.anyBeaconAudible(from: Point(x: 12, y: -1)))
        #expect(
            channel.meanRssi(
                beacon: site.beacons[0], at: Whereabouts(position: Point(x: 12, y: -1), heading: Point(x: 0, y: 0), walking: true)) < -80)
        #expect(!channel.anyBeaconAudible(from: Point(x: 0, y: -400)))
        #expect(world.directory.siteIndex(for: site.beacons[2].identity) == 0)
    }
}
