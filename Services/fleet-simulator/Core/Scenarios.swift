import Foundation
import PresenceKit

/// One row of the QA matrix (`Scenario.all`): a world, people and phones, and the outcome expected.
package struct Scenario: Sendable {
    package var name: String
    package var summary: String
    package var options: FleetOptions
    /// Phone troubles every device of the scenario gets (on top of the plan's own profile).
    package var phone: @Sendable (_ start: Int64, _ profile: PhoneProfile) -> PhoneProfile
    /// The row's own settings, applied on top of the run's configuration (the library defaults, or the
    /// document `scenario --config` gives).
    package var config: @Sendable (PresenceConfig) -> PresenceConfig
    /// Returns what is wrong with the outcome (empty: passed).
    package var expect: @Sendable (FleetReport) -> [String]

    package struct Outcome: Sendable {
        package var scenario: String
        package var report: FleetReport
        package var failures: [String]
        package var passed: Bool { failures.isEmpty }
    }

    /// Runs the scenario in virtual time against the in-process server.
    package func run(outboxDirectory: String) async throws -> Outcome {
        var plan = FleetPlan(options: options)
        for (index, profile) in plan.profiles { plan.profiles[index] = phone(options.start, profile) }
        let server = InProcessServer()
        let started = ContinuousClock.now
        var runner = DetectionRun(plan: plan, outboxDirectory: outboxDirectory + "/" + name)
        runner.config = config(options.presenceConfig)
        let devices = try await runner.run(server: server)
        let wall = ContinuousClock.now - started
        var throughput = FleetReport.Throughput()
        throughput.wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        throughput.virtualSeconds = Double(options.durationMs) / 1000
        let report = FleetReport(
            parameters: .init(mode: "detection-only", plan: plan),
            plan: plan, devices: devices, delivery: .inProcess(devices: devices, server: server), throughput: throughput)
        return Outcome(scenario: name, report: report, failures: expect(report))
    }
}

/// Checks shared by the scenarios: the detection targets. Check-in recall and precision at least
/// 99.9 %, which needs about a thousand arrivals or more to mean anything (0.1 % of 400 arrivals is not
/// even one): the default world runs 2,000 phones and the 700 ms and fast-walk rows 700; the other rows
/// are smaller and must then be perfect.
enum Expect {
    static let target = 0.999

    static func noLoss(_ r: FleetReport) -> [String] {
        var f: [String] = []
        if r.delivery.lost != 0 { f.append("lost \(r.delivery.lost) events") }
        if r.delivery.duplicated != 0 { f.append("duplicated \(r.delivery.duplicated) events") }
        if r.delivery.undeliveredAtEnd != 0 { f.append("\(r.delivery.undeliveredAtEnd) events still in outboxes") }
        if r.delivery.unexpected != 0 { f.append("\(r.delivery.unexpected) unexpected server rows") }
        return f
    }

    /// A ratio whose denominator is zero is no figure at all: a row that asserts it fails, naming what
    /// was missing, rather than passing on the 1 an empty ratio scores.
    static func measured(_ count: Int, _ what: String, for figure: String) -> [String] {
        count > 0 ? [] : ["no \(figure): the run had no \(what)"]
    }

    static func recall(_ r: FleetReport, atLeast min: Double) -> [String] {
        measured(r.score.arrivals, "arrivals", for: "check-in recall")
            + (r.score.checkInRecall >= min
                ? []
                : [
                    "check-in recall \(r.score.checkInRecall) < \(min) (\(r.score.matchedArrivals)/\(r.score.arrivals)); missed: \(r.score.missedArrivalsSample.prefix(3))"
                ])
    }

    static func precision(_ r: FleetReport, atLeast min: Double) -> [String] {
        measured(r.score.checkIns, "check-ins", for: "check-in precision")
            + (r.score.checkInPrecision >= min
                ? []
                : [
                    "check-in precision \(r.score.checkInPrecision) < \(min) (\(r.score.falseCheckIns) false, \(r.score.repeatedCheckIns) repeated of \(r.score.checkIns))"
                ])
    }

    /// Detection latency: p50 under 5 s (the target), p99 under `p99` seconds. A run without arrivals,
    /// or with arrivals but no latency figure, fails: a missing percentile is not a pass.
    static func latency(_ r: FleetReport, p50: Double = 5, p99: Double = Expect.p99FloorSeconds) -> [String] {
        let l = r.score.detectionLatencySeconds
        guard r.score.arrivals > 0 else { return measured(0, "arrivals", for: "detection latency") }
        guard let v50 = l.p50, let v99 = l.p99 else { return ["no detection latency figure for \(r.score.arrivals) arrivals"] }
        var f: [String] = []
        if v50 >= p50 { f.append("detection latency p50 \(v50) s >= \(p50) s") }
        if v99 >= p99 { f.append("detection latency p99 \(v99) s >= \(p99) s") }
        return f
    }

    /// What p99 is held to: not the 15 s target. An arrival whose phone reads under the enter threshold
    /// at the door (a cold phone, a deep shadow) is confirmed by dwell when the person comes to rest,
    /// which is at the desk: up to a minute and a half later (PresenceKit README, "What the sweep shows").
    static let p99FloorSeconds = FleetReport.detectionLatencyP99FloorSeconds

    /// Measured floors where the shipped defaults miss a target (PresenceKit README, "What the sweep shows").
    static let hotPhonesPrecisionFloor = 0.45
    /// The same corridor with the enter hold a site beside a pavement sets (not a default): measured 59.3 %.
    static let hotPhonesEnterHoldPrecisionFloor = 0.55
    static let sixMetreGatesFloor = 0.92
    /// People who stand still at the gate before going in are decided once they step inside or come to
    /// rest: measured p50 5.5 s.
    static let gateStanderP50FloorSeconds = 10.0
    /// Phones reading 6-8 dB cold (`weak-walk-out`) wait for dwell: measured p50 38.4 s.
    static let coldPhonesP50FloorSeconds = 60.0

    static func checkOutTime(_ r: FleetReport, atLeast min: Double) -> [String] {
        measured(r.score.departures, "departures", for: "check-out time")
            + (r.score.checkOutAccuracy >= min
                ? []
                : [
                    "check-out within 3 min of the departure \(r.score.checkOutAccuracy) < \(min) (\(r.score.accurateCheckOuts)/\(r.score.departures))"
                ])
    }

    static func checkInTime(_ r: FleetReport, atLeast min: Double) -> [String] {
        measured(r.score.matchedArrivals, "matched arrivals", for: "check-in time")
            + (r.score.checkInTimeAccuracy >= min
                ? []
                : [
                    "check-in recorded within 3 min of the arrival \(r.score.checkInTimeAccuracy) < \(min) (\(r.score.accurateCheckInTimes)/\(r.score.matchedArrivals))"
                ])
    }

    static func rightGate(_ r: FleetReport, atLeast min: Double) -> [String] {
        measured(r.score.matchedArrivals, "matched arrivals", for: "right-gate share")
            + (r.score.rightGateShare >= min
                ? [] : ["right gate \(r.score.rightGateShare) < \(min) (\(r.score.rightGateCheckIns)/\(r.score.matchedArrivals))"])
    }

    /// Recall, precision and no false check-out at the targets, latency, no loss: every row with arrivals.
    static func detection(_ r: FleetReport, target: Double = Expect.target, p50: Double = 5) -> [String] {
        recall(r, atLeast: target) + precision(r, atLeast: target) + noFalseCheckOuts(r) + latency(r, p50: p50) + noLoss(r)
    }

    static func noFalseCheckOuts(_ r: FleetReport) -> [String] {
        r.score.falseCheckOuts == 0 ? [] : ["\(r.score.falseCheckOuts) false check-outs"]
    }
}

extension Scenario {
    /// A phone edit with random draws of the phone's own, the same in every run (seeded by its radio
    /// loss, which is drawn per phone).
    static func drawing(
        _ edit: @escaping @Sendable (_ start: Int64, _ phone: inout PhoneProfile, _ draw: inout SplitMix64) -> Void
    ) -> @Sendable (Int64, PhoneProfile) -> PhoneProfile {
        { start, phone in
            var phone = phone
            var draw = SplitMix64(seed: UInt64(bitPattern: Int64(phone.phoneLossDb * 1_000_000)))
            edit(start, &phone, &draw)
            return phone
        }
    }

    /// A phone clock that is wrong all day: 10 minutes to 3 hours fast (kept fast on purpose), or 8 to 30
    /// days slow (reset when the battery ran flat).
    static func wrongClockSkew(_ draw: inout SplitMix64) -> Int64 {
        Bool.random(using: &draw)
            ? Int64.random(in: 600_000...(3 * 3_600_000), using: &draw)
            : -Int64.random(in: (8 * 86_400_000)...(30 * 86_400_000), using: &draw)
    }

    static func make(
        _ name: String, _ summary: String, devices: Int = 120, days: Int = 1,
        options edit: (inout FleetOptions) -> Void = { _ in },
        phone: @escaping @Sendable (Int64, PhoneProfile) -> PhoneProfile = { $1 },
        config: @escaping @Sendable (PresenceConfig) -> PresenceConfig = { $0 },
        expect: @escaping @Sendable (FleetReport) -> [String]
    ) -> Scenario {
        var o = FleetOptions()
        o.devices = devices
        o.durationMs = Int64(days) * ScheduleGenerator.dayMs
        o.phones = .quiet
        o.walkPastShare = 0
        o.gateStanderShare = 0
        o.visitorShare = 0
        o.seed = seed(name)
        edit(&o)
        return Scenario(name: name, summary: summary, options: o, phone: phone, config: config, expect: expect)
    }

    /// A row's seed: from its name, so that adding a row changes no other row's world.
    static func seed(_ name: String) -> UInt64 {
        UInt64(truncatingIfNeeded: name.utf8.reduce(UInt64(5381)) { ($0 &* 33) &+ UInt64($1) })
    }

    /// A corridor-like site (path-loss exponent 1.8), phones reading 3-6 dB hot, and half the people
    /// walking past 4-8 m from the doors.
    static func hotPhoneCorridor(_ o: inout FleetOptions) {
        o.radio.pathLossExponent = 1.8
        o.phones.phoneLossDb = -6...(-3)
        o.walkPastShare = 0.5
        o.schedule.pavementDistance = 4...8
    }

    /// The QA matrix, each row with the detection targets it must meet.
    package static let all: [Scenario] = [
        make(
            "default-world", "the default world and phone mix: employees, walk-pasts, gate standers, visitors, network and app troubles",
            devices: 2_000,
            options: { o in
                o.phones = PhoneMix(); o.walkPastShare = 0.05; o.gateStanderShare = 0.05; o.visitorShare = 0.02
            },
            expect: { r in Expect.detection(r) + Expect.checkOutTime(r, atLeast: 0.99) + Expect.rightGate(r, atLeast: 0.99) }),
        make(
            "single-beacon-700ms", "one gate, one beacon advertising every 700 ms (no busy door): the latency target",
            devices: 700,
            options: { o in
                o.gatesPerSite = 1; o.busyDoorIntervalMs = 700
            },
            expect: { r in Expect.detection(r) }),
        make(
            "overlapping-beacons", "four gates 12 m apart: every gate hears its neighbours",
            options: { o in o.gatesPerSite = 4 },
            expect: { r in Expect.detection(r) + Expect.rightGate(r, atLeast: 0.99) }),
        make(
            "crowd-at-the-door", "300 people arriving within a few minutes through one door",
            devices: 300,
            options: { o in
                o.gatesPerSite = 1; o.schedule.arrivalSpreadMs = 3 * 60_000
            },
            expect: { r in Expect.detection(r) }),
        make(
            "slow-walk", "walking at 0.5-0.8 m/s",
            options: { o in o.schedule.walkSpeed = 0.5...0.8 },
            expect: { r in Expect.detection(r) }),
        make(
            "fast-walk",
            "walking at 1.8-2.2 m/s with barely a pause at the door (too short for the motion coprocessor to report), 700 ms and 250 ms doors",
            devices: 700,
            options: { o in
                o.schedule.walkSpeed = 1.8...2.2; o.schedule.doorPauseSeconds = 0.5...1.5
            },
            expect: { r in Expect.detection(r) }),
        // p50 is held to 10 s here: standing 1-2 m out, a third of the phones stay under the enter
        // threshold and check in by dwell once the motion coprocessor reports the rest (4 s + 2-5 s).
        make(
            "stand-at-gate", "people who stand still right at the gate for 1-5 minutes before going in",
            options: { o in o.gateStanderShare = 1 },
            expect: { r in Expect.detection(r, p50: Expect.gateStanderP50FloorSeconds) }),
        make(
            "walk-past", "people who only walk past the gates on the pavement, 2-4 times each: at most one check-in per 200 passes",
            options: { o in o.walkPastShare = 1 },
            expect: { r in
                r.score.checkIns * 200 <= r.parameters.devices * 2
                    ? [] : ["\(r.score.checkIns) check-ins from \(r.parameters.devices) people who only walked past"]
            }),
        make(
            "visitors-without-devices", "visitors walk in and out without an enrolled device: nothing is recorded for them",
            devices: 60, options: { o in o.visitorShare = 1 },
            expect: { r in Expect.noLoss(r) + (r.parameters.visitors == 60 ? [] : ["expected 60 visitors"]) }),
        make(
            "reboot", "every phone reboots once during the day",
            phone: { start, p in
                var p = p; p.lifecycle = [ScheduledLifecycle(at: start + 10 * 3_600_000, event: .reboot)]; return p
            },
            expect: { r in Expect.detection(r) }),
        make(
            "force-quit", "every phone's app is force-quit at 9:00 and only comes back with a geofence event",
            phone: { start, p in
                var p = p; p.lifecycle = [ScheduledLifecycle(at: start + 9 * 3_600_000, event: .forceQuit)]; return p
            },
            expect: { r in Expect.detection(r) }
        ),
        make(
            "app-terminated", "the OS terminates every app at 10:00; a region or geofence event relaunches it",
            phone: { start, p in
                var p = p; p.lifecycle = [ScheduledLifecycle(at: start + 10 * 3_600_000, event: .terminated)]; return p
            },
            expect: { r in Expect.detection(r) }),
        make(
            "wall-clock-jumps",
            "every phone's wall clock is set once between 10:00 and 12:00, 2 minutes to 3 hours forward or back (a network time correction, a hand-set clock), and the OS ends half of the apps at 15:00: nobody is checked out by it, nothing is refused, the times are the server's",
            phone: Scenario.drawing { start, p, draw in
                let size = Int64.random(in: 120_000...(3 * 3_600_000), using: &draw)
                let at = start + Int64.random(in: (10 * 3_600_000)...(12 * 3_600_000), using: &draw)
                p.wallClockJumps = [WallClockJump(at: at, byMs: Bool.random(using: &draw) ? size : -size)]
                if Bool.random(using: &draw) { p.lifecycle = [ScheduledLifecycle(at: start + 15 * 3_600_000, event: .terminated)] }
            },
            expect: { r in Expect.detection(r) + Expect.checkOutTime(r, atLeast: 0.99) }),
        make(
            "wrong-phone-clocks",
            "every phone's clock is wrong all day: 10 minutes to 3 hours fast, or 8 to 30 days slow (a clock reset when the battery ran flat): nothing is refused, the times are the server's",
            phone: Scenario.drawing { _, p, draw in p.clockSkewMs = Scenario.wrongClockSkew(&draw) },
            expect: { r in Expect.detection(r) + Expect.checkOutTime(r, atLeast: 0.99) }),
        make(
            "offline-wrong-clocks",
            "every phone's clock is wrong (10 minutes to 3 hours fast, or 8 to 30 days slow) and it has no network until noon, so the app decides the morning's check-ins before any answer has told it the server's clock; the OS ends half of the apps at 10:00: nothing is refused, the times are the server's",
            phone: Scenario.drawing { start, p, draw in
                p.clockSkewMs = Scenario.wrongClockSkew(&draw)
                p.networkWindows = [NetworkWindow(from: start, to: start + 12 * 3_600_000, condition: .offline)]
                if Bool.random(using: &draw) { p.lifecycle = [ScheduledLifecycle(at: start + 10 * 3_600_000, event: .terminated)] }
            },
            expect: { r in Expect.detection(r) + Expect.checkInTime(r, atLeast: 0.99) + Expect.checkOutTime(r, atLeast: 0.99) }),
        make(
            "clock-set-right-offline",
            "every phone's clock reset 8 to 30 days back (a flat battery) and no network until noon; at 11:00, still offline, the clock is set right (the carrier's time): the morning's stamps move with it, nothing is refused, the times are the server's",
            phone: Scenario.drawing { start, p, draw in
                p.clockSkewMs = -Int64.random(in: (8 * 86_400_000)...(30 * 86_400_000), using: &draw)
                p.wallClockJumps = [WallClockJump(at: start + 11 * 3_600_000, byMs: -p.clockSkewMs)]
                p.networkWindows = [NetworkWindow(from: start, to: start + 12 * 3_600_000, condition: .offline)]
            },
            expect: { r in Expect.detection(r) + Expect.checkInTime(r, atLeast: 0.99) + Expect.checkOutTime(r, atLeast: 0.99) }),
        make(
            "offline-72h", "every phone offline for 72 hours from the first morning: everything arrives afterwards, once",
            devices: 40, days: 4,
            phone: { start, p in
                var p = p; p.networkWindows = [NetworkWindow(from: start + 6 * 3_600_000, to: start + 78 * 3_600_000, condition: .offline)];
                return p
            },
            expect: { r in Expect.detection(r) }),
        make(
            "2g-network",
            "every request takes 0.6-2.5 s, a third of the phones over the 4 s timeout (the server stored what the phone never heard back)",
            phone: { _, p in
                var p = p; p.latencyMs = p.phoneLossDb > 2.7 ? 4_500 : 600 + Int(p.phoneLossDb * 500); return p
            },
            expect: { r in Expect.detection(r) + ((r.delivery.attemptStatuses["timeout"] ?? 0) > 0 ? [] : ["no request timed out"]) }),
        make(
            "captive-portal", "every phone behind a captive portal (HTML 200) from 7:00 to 10:00",
            phone: { start, p in
                var p = p;
                p.networkWindows = [NetworkWindow(from: start + 7 * 3_600_000, to: start + 10 * 3_600_000, condition: .captivePortal)];
                return p
            },
            expect: { r in
                Expect.detection(r) + ((r.delivery.attemptStatuses["captive_portal"] ?? 0) > 0 ? [] : ["no request met the portal"])
            }),
        make(
            "signal-gaps-under-10s",
            "receptionists 1-2 m from the beacon with 3-9 s signal gaps every few minutes, check-out on beacon loss: no false check-out",
            devices: 40,
            options: { o in
                o.schedule.deskDepth = 1...2; o.schedule.lunchOutProbability = 0
            },
            phone: { start, p in
                var p = p
                var t = start + 8 * 3_600_000
                var n = UInt64(p.phoneLossDb * 1_000)
                while t < start + 18 * 3_600_000 {
                    n = n &* 6364136223846793005 &+ 1442695040888963407
                    let gap = 3_000 + Int64((n >> 33) % 6_000)
                    p.signalGaps.append(NetworkWindow(from: t, to: t + gap, condition: .offline))
                    t += 120_000 + Int64((n >> 20) % 120_000)
                }
                return p
            },
            config: { c in
                var c = c; c.checkOutTrigger = .beaconLoss; c.flags.continuousScan = true; return c
            },
            expect: { r in Expect.detection(r) }),
        // The failure modes the detection sweep found, one row each.
        make(
            "resting-in-a-shadow",
            "desks 2-15 m from the gate, every one in a 8-20 dB radio shadow, check-out on beacon loss: nobody at rest is checked out",
            devices: 80,
            options: { o in
                o.schedule.deskDepth = 2...15; o.schedule.shadowedDeskShare = 1; o.schedule.lunchOutProbability = 0
            },
            config: { c in
                var c = c
                c.checkOutTrigger = .beaconLoss
                return c
            },
            expect: { r in Expect.detection(r) }),
        make(
            "hot-phones-low-path-loss",
            "a corridor-like site (path-loss exponent 1.8) and phones reading 3-6 dB hot; people walk past 4-8 m from the doors",
            devices: 200, options: hotPhoneCorridor,
            // Floors, not the 99.5 % target: at its closest a walk-past here reads as strong as a cold
            // phone at the door (PresenceKit README, "What the sweep shows").
            expect: { r in
                Expect.recall(r, atLeast: 0.995) + Expect.precision(r, atLeast: Expect.hotPhonesPrecisionFloor)
                    + Expect.noFalseCheckOuts(r) + Expect.latency(r) + Expect.noLoss(r)
            }),
        make(
            "hot-phones-enter-hold",
            "the same corridor and people with the enter hold such a site sets: 3 s, unless the smoothed RSSI already reaches -64 dBm",
            devices: 200,
            options: { o in
                hotPhoneCorridor(&o)
                o.seed = seed("hot-phones-low-path-loss")
            },
            config: { c in
                var c = c
                c.enterHoldMs = 3_000
                c.enterAtOnceRssi = -64
                return c
            },
            // Still a floor, above the row before's (measured 59.3 % against 49.3 %): the hold keeps out
            // walk-pasts whose strong evidence does not last 3 s.
            expect: { r in
                Expect.recall(r, atLeast: 0.995) + Expect.precision(r, atLeast: Expect.hotPhonesEnterHoldPrecisionFloor)
                    + Expect.noFalseCheckOuts(r) + Expect.latency(r) + Expect.noLoss(r)
            }),
        make(
            "weak-walk-out",
            "deep desks and phones reading 6-8 dB cold: the check-out must carry the time of the walk out, not of the arrival",
            devices: 200,
            options: { o in o.phones.phoneLossDb = 6...8 },
            // A latency floor, not the 5 s target: a phone this cold stays under the enter threshold at
            // the door, so most arrivals are confirmed by dwell when the person comes to rest.
            expect: { r in Expect.detection(r, p50: Expect.coldPhonesP50FloorSeconds) + Expect.checkOutTime(r, atLeast: 0.99) }),
        make(
            "gates-6m-apart", "three gates 6 m apart, each heard from the next: the check-in names the gate the person came through",
            devices: 300,
            options: { o in
                o.gatesPerSite = 3; o.gateSpacingMeters = 6
            },
            // A floor, not the 99 % target: each beacon's shadowing is its own, so a neighbour 6 m away
            // outreads the gate passed through about one time in twenty.
            expect: { r in Expect.detection(r) + Expect.rightGate(r, atLeast: Expect.sixMetreGatesFloor) }),
    ]

    package static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }
}
