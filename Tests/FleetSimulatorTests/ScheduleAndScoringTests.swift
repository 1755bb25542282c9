import AttendanceProtocol
import Foundation
import PresenceKit
import Testing

@testable import FleetSimulatorCore

@Suite("People, schedules, ground truth and scoring")
struct ScheduleAndScoringTests {
    static let midnight: Int64 = 1_767_571_200_000
    static let day = ScheduleGenerator.dayMs

    @Test func anEmployeeArrivesAroundEightAndLeavesAroundHalfPastFive() throws {
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
            let first = try #require(p.truth.first), last = try #require(p.truth.last)
            let arrival = first.at - Self.midnight
            #expect(arrival > 6 * 3_600_000 && arrival < 10 * 3_600_000)
            let leave = last.at - Self.midnight
            #expect(leave > 15 * 3_600_000 && leave < 20 * 3_600_000)
            // At the moment of the true arrival the person is at the doorway.
            let here = p.itinerary.whereabouts(at: first.at)
            #expect(here.position.distance(to: site.gates[first.gate].position) < 1.5)
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

    @Test func walkPastsHaveNoTruthAndGateStandersStandAtTheGate() throws {
        let site = World.standard(sites: 1).sites[0]
        var random = SimulationRandom(seed: 5)
        let walker = ScheduleGenerator.person(
            index: 0, kind: .walkPast, siteIndex: 0, site: site, start: Self.midnight, durationMs: Self.day, settings: ScheduleSettings(),
            random: &random)
        #expect(walker.truth.isEmpty)
        // Their closest approach to a gate is the pavement, 8-12 m away.
        let approaches = try walker.itinerary.segments.filter(\.isWalk).map { s in
            try #require(
                stride(from: 0.0, through: 1.0, by: 0.001).map {
                    s.from.interpolated(to: s.to, fraction: $0).distance(to: site.gates[0].position)
                }.min())
        }
        let closest = try #require(approaches.min())
        #expect(closest >= 7.9 && closest <= 12.1)
        let stander = ScheduleGenerator.person(
            index: 1, kind: .gateStander, siteIndex: 0, site: site, start: Self.midnight, durationMs: Self.day,
            settings: ScheduleSettings(), random: &random)
        let arrival = try #require(stander.truth.first)
        // A minute after the arrival they still stand within 3 m of the gate.
        let later = stander.itinerary.whereabouts(at: arrival.at + 60_000)
        #expect(later.position.distance(to: site.gates[arrival.gate].position) < 3 && !later.walking)
    }

    static func posted(_ kind: String, at: Int64, timestamp: Int64? = nil, session: String = "s") -> PostedEvent {
        PostedEvent(
            key: "\(kind)-\(at)", kind: kind, siteId: "S_1", sessionKey: session, reason: "r", timestamp: timestamp ?? at, decidedAt: at)
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
            Self.posted("checkin", at: 1_004_000), // 4 s after the first arrival
            Self.posted("checkout", at: 3_000_000), // while inside: a false check-out
            Self.posted("checkout", at: 5_200_000, timestamp: 5_010_000), // the real departure, stamped 10 s late
            Self.posted("checkin", at: 7_000_000, session: "walk-past"), // nobody arrived: a false check-in
            Self.posted("checkout", at: 7_200_000, session: "walk-past"), // closes that false session
        ] // the second arrival is missed
        device.deliveries = [DeliveryRecord(key: "checkin-1004000", kind: "checkin", status: 201, attempts: 1, verdictAt: 1_006_000)]
        let score = Score(people: [person], devices: [device])
        #expect(score.arrivals == 2 && score.matchedArrivals == 1)
        #expect(score.checkInRecall == 0.5)
        #expect(score.falseCheckIns == 1 && score.checkInPrecision == 0.5)
        #expect(score.departures == 1 && score.matchedDepartures == 1 && score.accurateCheckOuts == 1)
        #expect(score.falseCheckOuts == 1, "only the check-out that cut the real session short")
        #expect(score.checkOutsOfFalseSessions == 1)
        #expect(score.detectionLatencySeconds.p50 == 4)
        #expect(score.triggerToVerdictSeconds.p50 == 2) // the check-in's own time to its verdict
        #expect(score.checkOutTimeErrorSeconds.p50 == 10)
        // Daily attendance leaves out the walk-past's 200-second session, and nothing else.
        #expect(score.briefCheckIns == 1 && score.briefFalseCheckIns == 1 && score.briefMatchedArrivals == 0)
        var figures = SweepFigures()
        figures.merge(SweepFigures(score))
        #expect(figures.attendancePrecision == 1 && figures.attendanceRecall == 0.5)
    }

    @Test func aTrueArrivalWhoseSessionEndsWithinTheMinimumPresenceIsCountedAsLeftOut() {
        let truth = [TruthEvent(person: 0, siteId: "S_1", kind: .arrival, at: 1_000_000, gate: 0)]
        let person = Person(index: 0, kind: .employee, siteIndex: 0, itinerary: Itinerary(segments: []), truth: truth, speed: 1.2)
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        let minimum = Int64(AttendancePresence.defaultMinimumSeconds * 1000)
        // Checked out (by its own time) a second short of the minimum: decided much later, which does not count.
        device.posted = [
            Self.posted("checkin", at: 1_002_000),
            Self.posted("checkout", at: 1_002_000 + minimum + 60_000, timestamp: 1_001_000 + minimum),
        ]
        let score = Score(people: [person], devices: [device])
        #expect(score.matchedArrivals == 1 && score.briefCheckIns == 1 && score.briefMatchedArrivals == 1 && score.briefFalseCheckIns == 0)
        // A check-out stamped exactly at the minimum, or none at all, keeps the session.
        device.posted[1].timestamp = 1_002_000 + minimum
        #expect(Score(people: [person], devices: [device]).briefCheckIns == 0)
        device.posted.removeLast()
        #expect(Score(people: [person], devices: [device]).briefCheckIns == 0)
        // A passer-by's check-out followed within the soft-exit grace by the real check-in is one session,
        // as the merger builds it, and not left out; a minute after the grace, the passing is a session
        // of its own.
        let grace = Int64(AttendancePresence.defaultSoftExitGraceSeconds * 1000)
        for (checkInAt, brief) in [(880_000 + grace - 60_000, 0), (880_000 + grace + 60_000, 1)] {
            device.posted = [
                Self.posted("checkin", at: 700_000), Self.posted("checkout", at: 880_000), Self.posted("checkin", at: checkInAt),
            ]
            let score = Score(people: [person], devices: [device])
            #expect(score.falseCheckIns == 1 && score.matchedArrivals == 1, "check-in at \(checkInAt)")
            #expect(score.briefCheckIns == brief && score.briefFalseCheckIns == brief && score.briefMatchedArrivals == 0)
        }
    }

    @Test func checkInsAreCountedByWhereThePersonWasWhenTheDeviceDecided() {
        let door = Point(x: 0, y: 0)
        // Walks along the pavement 1.5 m in front of the door, stops 3 m past it, stands a minute, walks in.
        var b = ItineraryBuilder(start: 0, at: Point(x: -20, y: -1.5))
        b.walk(to: Point(x: 3, y: -1.5), speed: 1) // 0 ... 23 s
        b.stay(forMs: 60_000) // 23 ... 83 s
        b.walk(to: Point(x: 0, y: 10), speed: 1)
        let arrival = TruthEvent(person: 0, siteId: "S_1", kind: .arrival, at: 85_000, gate: 0)
        let person = Person(index: 0, kind: .gateStander, siteIndex: 0, itinerary: b.build(until: 200_000), truth: [arrival], speed: 1)
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        device.posted = [
            Self.posted("checkin", at: 20_000, session: "a"), // moving, 1.5 m from the door: false (before the window)
            Self.posted("checkin", at: 60_000, session: "b"), // still, 3.4 m from the door: matched (the first in the window)
            Self.posted("checkin", at: 90_000, session: "c"), // inside: a repeat of the same arrival
        ]
        let score = Score(people: [person], devices: [device], doors: [[door]])
        #expect(score.falseCheckIns == 1 && score.matchedArrivals == 1 && score.repeatedCheckIns == 1)
        #expect(score.checkInsByPlace[DecisionPlace.movingAtDoor.rawValue] == ["gate_stander (false)": 1])
        #expect(score.checkInsByPlace[DecisionPlace.stillNearDoor.rawValue] == ["gate_stander": 1])
        #expect(score.checkInsByPlace.count == 2, "a repeated check-in is not counted again: \(score.checkInsByPlace)")
        // Without the doors the scorer does not know where anyone was.
        #expect(Score(people: [person], devices: [device]).checkInsByPlace.isEmpty)
        // The places themselves.
        func place(_ x: Double, _ y: Double, walking: Bool) -> DecisionPlace {
            DecisionPlace(
                Whereabouts(position: Point(x: x, y: y), heading: Point(x: 0, y: 0), walking: walking), doors: [door, Point(x: 8, y: 0)])
        }
        #expect(place(0.5, -2, walking: false) == .stillAtDoor)
        #expect(place(8, -4, walking: false) == .stillNearDoor)
        #expect(place(4, -1, walking: true) == .movingNearDoor)
        #expect(place(4, -6, walking: true) == .fartherOutside)
        #expect(place(0, 0, walking: false) == .doorwayOrInside && place(30, 40, walking: true) == .doorwayOrInside)
        #expect(DecisionPlace.stillAtDoor.words == "still, outside, within 2.5 m of a door")
        #expect(DecisionPlace.movingNearDoor.words == "moving, outside, 2.5-5 m from a door")
    }

    @Test func inARushEveryoneArrivesWithinTheRunAndNobodyLeaves() throws {
        let site = World.standard(sites: 1).sites[0]
        let rush = RushSettings()
        let start: Int64 = 1_800_000_000_123 // any moment, not a midnight
        let duration: Int64 = 90_000
        let window = rush.arrivalWindow(durationMs: duration)
        for index in 0..<60 {
            var random = SimulationRandom(seed: 5, stream: UInt64(index))
            let kind: PersonKind = [.employee, .gateStander, .visitor, .walkPast][index % 4]
            let p = ScheduleGenerator.rushPerson(
                index: index, kind: kind, siteIndex: 0, site: site, start: start, durationMs: duration,
                settings: ScheduleSettings(), rush: rush, random: &random)
            // From the run's start; a walk under way at its end may go on past it.
            #expect(p.itinerary.segments.first?.start == start && (p.itinerary.segments.last?.end ?? 0) >= start + duration)
            for (a, b) in zip(p.itinerary.segments, p.itinerary.segments.dropFirst()) { #expect(a.end == b.start && a.to == b.from) }
            if kind == .walkPast {
                #expect(p.truth.isEmpty)
                // Passes a door (within a metre along the pavement) inside the arrival window.
                let passes = stride(from: start, to: start + duration, by: 250).filter { t in
                    site.gates.contains { abs(p.itinerary.whereabouts(at: t).position.x - $0.position.x) < 1 }
                }
                #expect(passes.contains { window.contains($0 - start) }, "passes a door at \(passes.map { $0 - start })")
            } else {
                #expect(p.truth.map(\.kind) == [.arrival])
                let arrival = try #require(p.truth.first)
                #expect(window.contains(arrival.at - start))
                #expect(p.itinerary.whereabouts(at: arrival.at).position.distance(to: site.gates[arrival.gate].position) < 1.5)
                // Employees and visitors are at rest at a desk inside the building when the run ends (gate
                // standers may still stand at the gate).
                let end = p.itinerary.whereabouts(at: start + duration)
                if kind != .gateStander {
                    #expect(!end.walking && end.position.y >= rush.deskDepth.lowerBound && end.position.y <= rush.deskDepth.upperBound)
                }
            }
        }
    }

    @Test func aRealTimeRunStartsNow() {
        let now: Int64 = Self.midnight + 9 * 3_600_000 + 1_234
        var rush = FleetOptions()
        rush.scheduleKind = .morningRush
        rush.setRealTimeStart(nowMs: now)
        #expect(rush.simulationStart == now && rush.scoringEdgeMs == 0)
        var days = FleetOptions()
        days.setRealTimeStart(nowMs: now)
        #expect(days.start == Self.midnight && days.simulationStart == now && days.scoringEdgeMs == 300_000)
    }

    @Test func theSLOIsTheServersFirstReceiptAgainstTheEventsOwnTime() {
        let person = Person(index: 0, kind: .employee, siteIndex: 0, itinerary: Itinerary(segments: []), truth: [], speed: 1.2)
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        // Checked in at 1,000 s, but confirmed (decided) at 1,100 s; a heartbeat queued offline for 6 minutes.
        device.posted = [Self.posted("checkin", at: 1_100_000, timestamp: 1_000_000), Self.posted("heartbeat", at: 2_000_000)]
        device.deliveries = [
            DeliveryRecord(
                key: "checkin-1100000", kind: "checkin", status: 201, attempts: 1, verdictAt: 1_101_000, reachedServerAt: 1_100_500),
            DeliveryRecord(
                key: "heartbeat-2000000", kind: "heartbeat", status: 201, attempts: 3, verdictAt: 2_360_000, reachedServerAt: 2_359_000),
        ]
        let score = Score(people: [person], devices: [device])
        #expect(score.sloEvents == 2 && score.sloGoodEvents == 1 && score.sloWithin5Minutes == 0.5)
        #expect(score.decisionToVerdictSeconds.p50 == 1 && score.decisionToVerdictSeconds.max == 360)
    }

    @Test func theReportHasASiteTableAndSaysWhatEachStatusBarMeans() throws {
        var options = FleetOptions()
        options.devices = 20
        options.sites = 2
        options.scheduleKind = .morningRush
        options.durationMs = 90_000
        let plan = FleetPlan(options: options)
        var delivery = FleetReport.Delivery()
        delivery.attemptStatuses = ["201": 10, "offline": 2, "captive_portal": 1, "timeout": 1]
        var report = FleetReport(
            parameters: .init(mode: "real-stack", plan: plan), plan: plan, devices: [], delivery: delivery, throughput: .init())
        #expect(report.sites.map(\.siteId) == plan.world.sites.map(\.id))
        report.compare(withServer: .init(source: "test", good: 0, total: 0), bySite: [plan.world.sites[0].id: (good: 0, total: 0)])
        #expect(report.targets.last?.name == "SLO as the status page reports it (test)" && report.targets.last?.met == true)
        let html = HTMLReport.render(report)
        #expect(html.contains("<table id=\"site-table\">") && html.contains(plan.world.sites[1].id))
        #expect(html.contains("no network on the phone: no request left it"))
        #expect(html.contains("a Wi-Fi login page answered instead of the gateway"))
        #expect(report.headline.contains("90 s in real time") && report.headline.contains("no departures in the run"))
    }

    @Test func aRowWithNothingToMeasureFailsEveryRatioItAsserts() {
        var options = FleetOptions()
        options.devices = 1
        let plan = FleetPlan(options: options)
        let empty = FleetReport(
            parameters: .init(mode: "test", plan: plan), plan: plan, devices: [], delivery: FleetReport.Delivery(), throughput: .init())
        #expect(empty.score.arrivals == 0 && empty.score.checkInRecall == 1, "an empty ratio scores 1")
        let failures =
            Expect.detection(empty) + Expect.checkOutTime(empty, atLeast: 0.99) + Expect.checkInTime(empty, atLeast: 0.99)
            + Expect.rightGate(empty, atLeast: 0.99)
        for missing in [
            "no check-in recall: the run had no arrivals", "no check-in precision: the run had no check-ins",
            "no detection latency: the run had no arrivals", "no check-out time: the run had no departures",
            "no check-in time: the run had no matched arrivals", "no right-gate share: the run had no matched arrivals",
        ] {
            #expect(failures.contains(missing), "\(failures)")
        }
    }

    @Test func aRefusalAMismatchOrAKeyPostedTwiceFailsTheDeliveryProof() {
        // Each key its own time: three attendances, not one posted three times.
        func posted(_ key: String) -> PostedEvent {
            PostedEvent(
                key: key, kind: "checkin", siteId: "S1", sessionKey: "s", reason: "",
                timestamp: key.utf8.reduce(0) { $0 * 256 + Int64($1) },
                decidedAt: 0, gate: nil)
        }
        func answer(_ key: String, _ status: Int) -> DeliveryRecord {
            DeliveryRecord(key: key, kind: "checkin", status: status, attempts: 1, verdictAt: 0, wallLatencyMs: nil, reachedServerAt: 0)
        }
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        device.posted = [posted("a"), posted("b"), posted("c")]
        device.deliveries = [answer("a", 201), answer("b", 201), answer("c", 201)]
        let clean = FleetReport.Delivery(devices: [device], serverKeys: ["a": 1, "b": 1, "c": 1])
        #expect(clean.failures == 0)
        // Every row is at the server, yet one was refused, one answered as a mismatch, one key posted twice.
        device.posted.append(posted("c"))
        device.deliveries = [answer("a", 201), answer("b", 409), answer("c", 422), answer("c", 200)]
        let broken = FleetReport.Delivery(devices: [device], serverKeys: ["a": 1, "b": 1, "c": 1])
        #expect(broken.lost == 0 && broken.duplicated == 0)
        #expect(broken.refused == 1 && broken.mismatched == 1 && broken.postedTwice == 1)
        #expect(broken.failures == 3)
    }

    @Test("one attendance posted again under a new key is a duplicate, though each key is at the server once")
    func theSameEventUnderTwoKeysIsADuplicate() {
        var device = DeviceResult(person: 0, userId: "u", deviceId: "d")
        // Two keys, one check-in (same kind, session and time), and another check-in.
        device.posted = [Self.posted("checkin", at: 1_000, timestamp: 500), Self.posted("checkin", at: 2_000, timestamp: 500)]
        device.posted.append(Self.posted("checkin", at: 3_000))
        let keys = Dictionary(uniqueKeysWithValues: device.posted.map { ($0.key, 1) })
        let delivery = FleetReport.Delivery(devices: [device], serverKeys: keys)
        #expect(delivery.lost == 0 && delivery.unexpected == 0)
        #expect(delivery.postedUnderNewKey == 1 && delivery.duplicated == 1 && delivery.failures == 1)
        // A key posted twice is counted once, as posted twice, not again as a new key.
        device.posted.append(device.posted[1])
        let again = FleetReport.Delivery(devices: [device], serverKeys: keys)
        #expect(again.postedTwice == 1 && again.postedUnderNewKey == 1)
        // Another device's event with the same content is its own attendance.
        var other = DeviceResult(person: 1, userId: "v", deviceId: "e")
        other.posted = [Self.posted("checkin", at: 4_000, timestamp: 500)]
        device.posted = [device.posted[0], device.posted[2]]
        let posted = (device.posted + other.posted).map { ($0.key, 1) }
        let two = FleetReport.Delivery(devices: [device, other], serverKeys: Dictionary(uniqueKeysWithValues: posted))
        #expect(two.postedUnderNewKey == 0 && two.duplicated == 0 && two.failures == 0)
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
