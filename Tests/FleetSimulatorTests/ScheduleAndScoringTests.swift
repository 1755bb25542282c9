import FleetSimulatorCore
import Foundation
import PresenceKit
import Testing

@Suite("People, schedules, ground truth and scoring")
struct ScheduleAndScoringTests {
    static let midnight: Int64 = 1_767_571_200_000
    static let day = ScheduleGenerator.dayMs

    @Test func anEmployeeArrivesAroundEightAndLeavesAroundHalfPastFive() {
        let site = World.standard(sites: 1).sites[0]
        for index in 0..<50 {
            var random = SimulationRandom(seed: 11, stream: UInt64(index))
            let p = ScheduleGenerator.person(
                index: index, kind: .employee, siteIndex: 0, site: site, start: Self.midnight, durationMs: Self.day,
                settings: ScheduleSettings(), random: &random)
            let kinds = p.truth.map(\.kind)
            // In, (out, in for lunch,) out: alternating, starting with an arrival.
            #expect(kinds.count == 2 || kinds.count == 4, "\(kinds)")
            for (i, k) in kinds.enumerated() { #expect(k == (i % 2 == 0 ? .arrival : .departure)) }
            let arrival = p.truth[0].at - Self.midnight
            #expect(arrival > 6 * 3_600_000 && arrival < 10 * 3_600_000)
            let leave = p.truth.last!.at - Self.midnight
            #expect(leave > 15 * 3_600_000 && leave < 20 * 3_600_000)
            // At the moment of the true arrival the person is at the doorway.
            let here = p.itinerary.whereabouts(at: p.truth[0].at)
            #expect(here.position.distance(to: site.gates[p.truth[0].gate].position) < 1.5)
            // Segments are back to back.
            for (a, b) in zip(p.itinerary.segments, p.itinerary.segments.dropFirst()) { #expect(a.end == b.start && a.to == b.from) }
        }
    }

    @Test func walkingIsInterpolatedAlongTheSegment() {
        var b = ItineraryBuilder(start: 0, at: Point(x: 0, y: -10))
        b.stay(until: 1_000)
        let arrival = b.walk(to: Point(x: 0, y: 0), speed: 2)
        #expect(arrival == 6_000)
        let itinerary = b.build(until: 10_000)
        let half = itinerary.whereabouts(at: 3_500)
        #expect(abs(half.position.y - (-5)) < 1e-9 && half.walking && half.heading == Point(x: 0, y: 1))
        #expect(!itinerary.whereabouts(at: 500).walking)
        #expect(itinerary.whereabouts(at: 8_000).position == Point(x: 0, y: 0))
    }

    @Test func walkPastsHaveNoTruthAndGateStandersStandAtTheGate() {
        let site = World.standard(sites: 1).sites[0]
        var random = SimulationRandom(seed: 5)
        let walker = ScheduleGenerator.person(index: 0, kind: .walkPast, siteIndex: 0, site: site, start: Self.midnight, durationMs: Self.day, settings: ScheduleSettings(), random: &random)
        #expect(walker.truth.isEmpty)
        // Their closest approach to a gate is the pavement, 8-12 m away.
        let closest = walker.itinerary.segments.filter(\.isWalk).map { s in
            stride(from: 0.0, through: 1.0, by: 0.001).map { s.from.interpolated(to: s.to, fraction: $0).distance(to: site.gates[0].position) }.min()!
        }.min()!
        #expect(closest >= 7.9 && closest <= 12.1)
        let stander = ScheduleGenerator.person(index: 1, kind: .gateStander, siteIndex: 0, site: site, start: Self.midnight, durationMs: Self.day, settings: ScheduleSettings(), random: &random)
        let arrival = stander.truth[0]
        // A minute after the arrival they still stand within 3 m of the gate.
        let later = stander.itinerary.whereabouts(at: arrival.at + 60_000)
        #expect(later.position.distance(to: site.gates[arrival.gate].position) < 3 && !later.walking)
    }

    static func posted(_ kind: String, at: Int64, timestamp: Int64? = nil, session: String = "s") -> PostedEvent {
        PostedEvent(key: "\(kind)-\(at)", kind: kind, siteId: "S_1", sessionKey: session, reason: "r", timestamp: timestamp ?? at, decidedAt: at)
    }

    @Test func scoringAgainstHandMadeTruth() {
        let truth = [
            TruthEvent(person: 0, siteId: "S_1", kind: .arrival, at: 1_000_000, gate: 0),
            TruthEvent(person: 0, siteId: "S_1", kind: .departure, at: 5_000_000, gate: 0),
            TruthEvent(person: 0, siteId: "S_1", kind: .arrival, at: 9_000_000, gate: 0),
        ]
        let person = Person(index: 0, kind: .employee, siteIndex: 0, itinerary: Itinerary(segments: []), truth: truth, speed: 1.2)
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        device.posted = [
            Self.posted("checkin", at: 1_004_000),                       // 4 s after the first arrival
            Self.posted("checkout", at: 3_000_000),                      // while inside: a false check-out
            Self.posted("checkout", at: 5_200_000, timestamp: 5_010_000), // the real departure, stamped 10 s late
            Self.posted("checkin", at: 7_000_000, session: "walk-past"), // nobody arrived: a false check-in
            Self.posted("checkout", at: 7_200_000, session: "walk-past"), // closes that false session
        ]                                                                // the second arrival is missed
        device.deliveries = [DeliveryRecord(key: "checkin-1004000", kind: "checkin", status: 201, attempts: 1, verdictAt: 1_006_000)]
        let score = Score(people: [person], devices: [device])
        #expect(score.arrivals == 2 && score.matchedArrivals == 1)
        #expect(score.checkInRecall == 0.5)
        #expect(score.falseCheckIns == 1 && score.checkInPrecision == 0.5)
        #expect(score.departures == 1 && score.matchedDepartures == 1 && score.accurateCheckOuts == 1)
        #expect(score.falseCheckOuts == 1, "only the check-out that cut the real session short")
        #expect(score.checkOutsOfFalseSessions == 1)
        #expect(score.detectionLatencySeconds.p50 == 4)
        #expect(score.triggerToVerdictSeconds.p50 == 6)
        #expect(score.checkOutTimeErrorSeconds.p50 == 10)
    }

    @Test func percentilesAreNearestRank() {
        let p = Percentiles((1...100).map(Double.init))
        #expect(p.p50 == 50 && p.p90 == 90 && p.p99 == 99 && p.max == 100 && p.count == 100)
        #expect(Percentiles([]).p50 == nil)
    }

    @Test func aFleetPlanIsDeterministicForItsSeed() {
        var o = FleetOptions()
        o.devices = 40
        let a = FleetPlan(options: o), b = FleetPlan(options: o)
        #expect(a.people.map(\.truth) == b.people.map(\.truth))
        #expect(a.people.map(\.kind) == b.people.map(\.kind))
        o.seed = 2
        #expect(FleetPlan(options: o).people.map(\.truth) != a.people.map(\.truth))
        #expect(a.people.filter { $0.kind == .visitor }.count == 1)
    }
}
