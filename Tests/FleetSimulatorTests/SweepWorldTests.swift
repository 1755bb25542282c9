import Foundation
import PresenceKit
import Testing

@testable import FleetSimulatorCore

@Suite("Sweep worlds: radio and people drawn from wide ranges")
struct SweepWorldTests {
    @Test func shadowingIsConstantWhileStandingAndChangesWhenMoving() {
        var radio = RadioParameters()
        radio.fading = .gaussian(sigmaDb: 0)
        radio.packetLoss = 0
        radio.shadowingSigmaDb = 8
        radio.shadowingDecorrelationMeters = 1
        let world = World.standard(sites: 1, gatesPerSite: 1, busyDoorIntervalMs: 1_000, radio: radio)
        var random = SimulationRandom(seed: 11)
        var channel = RadioChannel(site: world.sites[0], radio: radio, phoneLossDb: 0, random: &random)
        let spot = Whereabouts(position: Point(x: 0, y: -6), heading: Point(x: 0, y: 0), walking: false)
        let still = (1...30).compactMap { channel.listen(at: Int64($0) * 1_000, here: spot, random: &random).first?.rssi }
        #expect(still.count == 30)
        #expect(Set(still).count == 1, "standing still, the shadow must not change: \(still)")
        var moving: [Int] = []
        for step in 1...30 {
            let here = Whereabouts(position: Point(x: Double(step % 2) * 5, y: -6), heading: Point(x: 1, y: 0), walking: true)
            if let r = channel.listen(at: Int64(30 + step) * 1_000, here: here, random: &random).first?.rssi { moving.append(r) }
        }
        #expect(Set(moving).count > 5, "moving 5 m at a time with 1 m decorrelation, the shadow must change: \(moving)")
    }

    /// Two gates 6 m apart whose beacons only shadow (no fading, no loss), heard by a phone walking to
    /// and fro halfway between them, as far from one as from the other (x = 3 m, y alternating between
    /// `y` and `y - stepMeters`): each step's reading of each beacon less its mean, when both were heard.
    static func readingsBetweenTwoGates(
        shared: Double, sigmaDb: Double, decorrelationMeters: Double, y: Double, stepMeters: Double, steps: Int, seed: UInt64
    ) -> [(Double, Double)] {
        var radio = RadioParameters()
        radio.fading = .gaussian(sigmaDb: 0)
        radio.packetLoss = 0
        radio.shadowingSigmaDb = sigmaDb
        radio.shadowingDecorrelationMeters = decorrelationMeters
        radio.beaconShadowCorrelation = shared
        let world = World.standard(sites: 1, gatesPerSite: 2, busyDoorIntervalMs: 1_000, gateSpacingMeters: 6, radio: radio)
        var random = SimulationRandom(seed: seed)
        var channel = RadioChannel(site: world.sites[0], radio: radio, phoneLossDb: 0, random: &random)
        return (1...steps).compactMap { step in
            let here = Whereabouts(position: Point(x: 3, y: y - Double(step % 2) * stepMeters), heading: Point(x: 0, y: 0), walking: true)
            let heard = channel.listen(at: Int64(step) * 1_000, here: here, random: &random)
            guard heard.count == 2, heard.allSatisfy({ $0.rssi != 0 }) else { return nil }
            let means = world.sites[0].beacons.map { channel.meanRssi(beacon: $0, at: here) }
            return (Double(heard[0].rssi) - means[0], Double(heard[1].rssi) - means[1])
        }
    }

    @Test func withTheShadowSharedNeighbouringGatesReadAlikeAndWithoutItTheyDiffer() {
        func readings(shared: Double) -> [(Double, Double)] {
            Self.readingsBetweenTwoGates(
                shared: shared, sigmaDb: 8, decorrelationMeters: 1, y: -4, stepMeters: 3, steps: 20, seed: 4)
        }
        let shared = readings(shared: 1)
        #expect(shared.count >= 15 && shared.allSatisfy { $0.0 == $0.1 }, "\(shared)")
        let own = readings(shared: 0)
        #expect(own.count >= 15 && own.filter { $0.0 != $0.1 }.count >= 10, "\(own)")
    }

    @Test func aRangesDocumentNarrowsTheWorldAndEveryBadKeyIsNamed() throws {
        let ranges = try SweepRanges.decode(Data(#"{"phoneLossDb": 0, "beaconShadowCorrelation": [0.25, 1], "gates": [2, 2]}"#.utf8))
        #expect(ranges.phoneLossDb == 0...0 && ranges.beaconShadowCorrelation == 0.25...1 && ranges.gates == 2...2)
        var expected = SweepRanges()
        (expected.phoneLossDb, expected.beaconShadowCorrelation, expected.gates) = (0...0, 0.25...1, 2...2)
        #expect(ranges == expected, "absent keys keep their defaults")
        // Every world draws its shared shadow from the range, and nothing else a world draws changes with
        // it: the whole world, but for that one figure, is the default ranges' world.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var sharedOnly = SweepRanges()
        sharedOnly.beaconShadowCorrelation = 0.25...1
        for i in 0..<10 {
            var w = SweepWorld(index: i, seed: 3, ranges: sharedOnly)
            #expect((0.25...1).contains(w.radio.beaconShadowCorrelation))
            w.radio.beaconShadowCorrelation = 0
            let plain = SweepWorld(index: i, seed: 3, ranges: SweepRanges())
            #expect(try encoder.encode(w) == encoder.encode(plain), "world \(i)")
        }
        // A range a class would narrow away entirely is the file's to keep, never a trap.
        let outside = try SweepRanges.decode(Data(#"{"pathLossExponent": 2, "pavementDistance": [5, 10]}"#.utf8))
        for i in 0..<WorldClass.allCases.count {
            let w = SweepWorld(index: i, seed: 3, ranges: outside)
            #expect(w.worldClass == .office || w.worldClass == .denseBuilding ? w.radio.pathLossExponent == 2 : true)
            _ = w.plan(people: 4, ranges: outside)
        }
        #expect(SweepWorld.narrow(1.6...3.5, to: 2.2...2.8) == 2.2...2.8 && SweepWorld.narrow(2...2, to: 2.8...3.5) == 2...2)
        var fixed = SweepRanges()
        fixed.beaconShadowCorrelation = 0.5...0.5
        #expect(SweepWorld(index: 1, seed: 3, ranges: fixed).radio.beaconShadowCorrelation == 0.5)
        #expect(SweepWorld(index: 1, seed: 3, ranges: SweepRanges()).radio.beaconShadowCorrelation == 0)

        let bad =
            #"{"phoneLosDb": 0, "packetLoss": [0.2, 0.1], "gates": [1.5, 2], "beaconShadowCorrelation": 2, "rayleighShare": [0, 1], "walkSpeed": "fast"}"#
        let error = try #require(throws: SweepRangesError.self) { try SweepRanges.decode(Data(bad.utf8)) }
        #expect(error.problems.count == 6, "\(error)")
        for key in [
            "phoneLosDb: not a sweep range", "packetLoss: low 0.2 is above high 0.1", "gates: must be whole numbers",
            "beaconShadowCorrelation: must lie within 0.0...1.0", "rayleighShare: must be one number", "walkSpeed: expected a number",
        ] {
            #expect(error.description.contains(key), "\(key) in \(error)")
        }
        #expect(throws: SweepRangesError.self) { try SweepRanges.decode(Data("[1, 2]".utf8)) }
        #expect(throws: SweepRangesError.self) { try SweepRanges.decode(Data("not json".utf8)) }
    }

    @Test func theRangesTableNamesEveryPropertyAndADocumentOfTheDefaultsReadsBackAsThem() throws {
        var ranges = SweepRanges()
        #expect(try SweepRanges.decode(JSONEncoder().encode(ranges)) == ranges)
        let keys = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(ranges)) as? [String: Any]).keys
        #expect(Set(keys) == Set(SweepRanges.fields.keys), "every property is a key of a ranges document, and only they")
        (ranges.tightGates, ranges.tightGateSpacingMeters, ranges.rayleighShare, ranges.advertisingIntervalMs) = (
            2...5, 3...3, 0, 200...200
        )
        #expect(try SweepRanges.decode(JSONEncoder().encode(ranges)) == ranges)
        // The tight-gates class draws its gates from its own keys.
        let w = SweepWorld(index: WorldClass.allCases.firstIndex(of: .tightGates)!, seed: 5, ranges: ranges)
        #expect(w.worldClass == .tightGates && (2...5).contains(w.gates) && w.gateSpacingMeters == 3)
        let error = try #require(throws: SweepRangesError.self) { try SweepRanges.decode(Data(#"{"rayleighShare": 2}"#.utf8)) }
        #expect(error.description.contains("rayleighShare: must be one number within 0.0...1.0, got 2.0"), "\(error)")
    }

    @Test func aHalfSharedShadowKeepsEachBeaconsSpreadAndCorrelatesTheTwoByHalf() throws {
        // A metre between steps is a hundred decorrelation distances: every step draws a new shadow.
        func residuals(shared: Double) -> [(Double, Double)] {
            Self.readingsBetweenTwoGates(
                shared: shared, sigmaDb: 6, decorrelationMeters: 0.01, y: -2, stepMeters: 1, steps: 3_000, seed: 8)
        }
        for (shared, low, high) in [(0.0, -0.08, 0.08), (0.5, 0.42, 0.58), (1.0, 0.97, 1.0)] {
            let r = residuals(shared: shared)
            try #require(r.count > 2_900, "heard both beacons \(r.count) times")
            func variance(_ x: [Double]) -> Double {
                let mean = x.reduce(0, +) / Double(x.count)
                return x.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(x.count)
            }
            let a = r.map(\.0)
            let b = r.map(\.1)
            let (meanA, meanB) = (a.reduce(0, +) / Double(a.count), b.reduce(0, +) / Double(b.count))
            let covariance = zip(a, b).map { ($0 - meanA) * ($1 - meanB) }.reduce(0, +) / Double(r.count)
            let correlation = covariance / (variance(a) * variance(b)).squareRoot()
            // Each beacon's shadow keeps its 6 dB spread (36 dB², plus a twelfth for the whole-dB reading).
            for v in [variance(a), variance(b)] { #expect(abs(v - 36) < 36 * 0.12, "shared \(shared): variance \(v)") }
            #expect((low...high).contains(correlation), "shared \(shared): correlation \(correlation)")
        }
    }

    @Test func rayleighFadingHasDeepFadesAndRicianIsCalmer() {
        var random = SimulationRandom(seed: 3)
        let rayleigh = (0..<20_000).map { _ in FastFading.rayleigh.draw(&random) }
        let rician = (0..<20_000).map { _ in FastFading.rician(kFactorDb: 10).draw(&random) }
        let deepRayleigh = Double(rayleigh.filter { $0 < -20 }.count) / Double(rayleigh.count)
        let deepRician = Double(rician.filter { $0 < -20 }.count) / Double(rician.count)
        // Rayleigh: P(power < 1 % of the mean) = 1 - exp(-0.01), about 1 %.
        #expect(deepRayleigh > 0.005 && deepRayleigh < 0.02, "\(deepRayleigh)")
        #expect(deepRician < deepRayleigh / 10)
        // Both keep the mean power: the average linear gain is 1.
        let meanGain = rayleigh.map { pow(10, $0 / 10) }.reduce(0, +) / Double(rayleigh.count)
        #expect(abs(meanGain - 1) < 0.05)
    }

    @Test func aBeaconsCalibrationErrorAndAHotPhoneShiftEveryReading() {
        var radio = WorldTests.quietRadio()
        radio.fading = .gaussian(sigmaDb: 0)
        var world = World.standard(sites: 1, gatesPerSite: 1, radio: radio)
        world.sites[0].beacons[0].txErrorDb = 3
        var random = SimulationRandom(seed: 1)
        let cold = RadioChannel(site: world.sites[0], radio: radio, phoneLossDb: 0, random: &random)
        let hot = RadioChannel(site: world.sites[0], radio: radio, phoneLossDb: -6, random: &random)
        let here = WorldTests.standing(Point(x: 0, y: -4))
        let base = -59 - 25 * log10(4.0)
        #expect(abs(cold.meanRssi(beacon: world.sites[0].beacons[0], at: here) - (base + 3)) < 1e-9)
        #expect(abs(hot.meanRssi(beacon: world.sites[0].beacons[0], at: here) - (base + 9)) < 1e-9)
    }

    @Test func sweepWorldsTakeTurnsByClassAndStayInTheirRanges() {
        let ranges = SweepRanges()
        let worlds = (0..<25).map { SweepWorld(index: $0, seed: 9, ranges: ranges) }
        #expect(worlds.map(\.worldClass) == (0..<25).map { WorldClass.allCases[$0 % WorldClass.allCases.count] })
        for w in worlds {
            #expect(ranges.pathLossExponent.contains(w.radio.pathLossExponent))
            #expect(w.advertisingIntervalsMs.allSatisfy { ranges.advertisingIntervalMs.contains($0) })
            #expect(w.beaconTxErrorsDb.allSatisfy { abs($0) <= ranges.beaconTxErrorDb })
            #expect(ranges.packetLoss.contains(w.radio.packetLoss))
            switch w.worldClass {
            case .openSpace: #expect(w.radio.pathLossExponent <= 2.2)
            case .denseBuilding: #expect(w.radio.pathLossExponent >= 2.8)
            case .tightGates: #expect(w.gates >= 3 && w.gateSpacingMeters <= 6)
            default: break
            }
        }
        // The same index and seed draw the same world.
        #expect(SweepWorld(index: 4, seed: 9, ranges: ranges).radio.pathLossExponent == worlds[4].radio.pathLossExponent)
    }

    @Test func peoplePassingByNeverArriveAndRunnersAndCyclistsSaySo() {
        let ranges = SweepRanges()
        let plan = SweepWorld(index: 4, seed: 2, ranges: ranges).plan(people: 200, ranges: ranges)
        let kinds = Set(plan.people.map(\.kind))
        #expect(kinds.isSuperset(of: [.employee, .walkPast, .runner, .cyclist, .pavementStopper, .doorwayLoiterer, .gateStander]))
        for person in plan.people where person.kind.passesBy {
            #expect(person.truth.isEmpty)
        }
        let runner = plan.people.first { $0.kind == .runner }!
        #expect(runner.itinerary.segments.contains { $0.activity == .running })
        let cyclist = plan.people.first { $0.kind == .cyclist }!
        #expect(cyclist.itinerary.segments.contains { $0.activity == .cycling })
        // A pavement stopper stands still within a few metres of a door, outside.
        let stopper = plan.people.first { $0.kind == .pavementStopper }!
        let doors = plan.world.sites[0].gates.map(\.position)
        #expect(
            stopper.itinerary.segments.contains { s in
                !s.isWalk && s.end - s.start >= 20_000 && s.from.y < 0 && doors.contains { $0.distance(to: s.from) < 6 }
            })
        // Doorway loiterers arrive and leave like employees: their breaks are not gate passes.
        for person in plan.people where person.kind == .doorwayLoiterer {
            #expect(person.truth.filter { $0.kind == .arrival }.count == person.truth.filter { $0.kind == .departure }.count)
        }
    }
}
