import Foundation
import Synchronization
import Testing

@testable import PresenceKit

// The QA matrix, for every row the library can express, on virtual time.

enum ScanStyle: CaseIterable, CustomStringConvertible {
    /// Continuous RSSI scanning inside the geofence.
    case continuous
    /// iOS region monitoring + short ranging bursts.
    case ranging

    var description: String { self == .continuous ? "continuous" : "ranging" }
}

/// A walk along a straight line past a beacon at the origin, `lateral` meters to the side.
struct GateWalk {
    var speed: Double
    var lateral: Double
    var startX = -25.0
    var endX = 40.0
    var sigma = 3.0
    var dropout = 0.05
    /// Beyond this distance the phone hears nothing.
    var hearing = 10.0
    /// Walking through the gate means entering the building: walls cost this much beyond x = 2 m.
    var entersBuilding = true
    var wallLossDb = 15.0

    var duration: Int { Int(((endX - startX) / speed).rounded(.up)) }

    func x(at second: Int) -> Double { startX + speed * Double(second) }

    func distance(at second: Int) -> Double {
        let x = x(at: second)
        return (x * x + lateral * lateral).squareRoot()
    }

    func rssi(at second: Int, noise: inout Noise) -> Int? {
        guard second < duration else { return nil }
        let d = distance(at: second)
        if d > hearing || noise.chance(dropout) { return nil }
        var value = PathLoss.rssi(distance: d) + noise.gaussian(sigma: sigma)
        if entersBuilding && x(at: second) > 2 { value -= wallLossDb }
        return value < -98 ? nil : Int(value.rounded())
    }

    func firstSecond(within meters: Double) -> Int? {
        (0..<duration).first { distance(at: $0) <= meters }
    }
}

/// iOS region monitoring, roughly: "inside" from the first packet heard, "outside" 30 s after the last.
struct RegionSimulator {
    var inside = false
    var lastHeard = Int.min / 2
    var second = 0

    mutating func step(heard: Bool, device: inout DeviceHarness) throws {
        second += 1
        if heard {
            lastHeard = second
            if !inside {
                inside = true
                try device.send(.beaconRegionEntered)
            }
        } else if inside && second - lastHeard >= 30 {
            inside = false
            try device.send(.beaconRegionExited)
        }
    }
}

func config(_ style: ScanStyle, _ trigger: CheckOutTrigger = .beaconLoss) -> PresenceConfig {
    World.config {
        $0.flags.continuousScan = style == .continuous
        $0.checkOutTrigger = trigger
    }
}

/// Runs a gate walk plus `after` seconds of silence for one device.
func simulate(
    _ walk: GateWalk, _ style: ScanStyle, seed: UInt64, trigger: CheckOutTrigger = .geofenceExit, after: Int = 1_800,
    config custom: PresenceConfig? = nil
) throws -> DeviceHarness {
    var d = try DeviceHarness(config: custom ?? config(style, trigger), seed: seed)
    try d.arrive()
    var noise = Noise(seed: seed &* 7919)
    var region = RegionSimulator()
    for second in 0..<(walk.duration + after) {
        try d.advance(ms: 1_000)
        let rssi = walk.rssi(at: second, noise: &noise)
        try region.step(heard: rssi != nil, device: &d)
        if let rssi, d.isScanning { try d.reading(World.gateA, rssi) }
    }
    return d
}

@Suite("QA matrix")
struct ScenarioTests {
    @Test(
        "slow walk through the gate: one check-in near the gate, none while inside the building",
        arguments: ScanStyle.allCases)
    func slowWalk(style: ScanStyle) throws {
        let walk = GateWalk(speed: 0.8, lateral: 1.0)
        let gateTime = World.start + Int64(walk.firstSecond(within: 3)! + 1) * 1_000
        for seed in UInt64(1)...10 {
            var d = try simulate(walk, style, seed: seed)
            let checkIn = try #require(d.checkIns.first, "seed \(seed)")
            #expect(d.checkIns.count == 1, "seed \(seed)")
            #expect(checkIn.beacon == World.gateA)
            #expect(checkIn.tStart >= gateTime - 2_000 && checkIn.tStart <= gateTime + 6_000, "seed \(seed): \(checkIn.tStart)")
            #expect(d.checkOuts.isEmpty, "30 min inside the building, beacon out of range: still checked in")
            try d.send(.geofenceExited(siteId: "S_HQ"))
            #expect(d.checkOuts.map(\.reason) == [.geofenceExit])
            #expect(attendanceViolations(d.posts).isEmpty)
        }
    }

    @Test("fast walk through the gate (2 m/s), busy-door profile: still one check-in", arguments: ScanStyle.allCases)
    func fastWalk(style: ScanStyle) throws {
        // At 2 m/s a phone is inside the 3 m bubble for 2-3 one-second readings, and the building's walls
        // cut the signal right after the gate: the default "3 readings" rule catches only ~72 % of such
        // passes in this model (~98 % with 2 readings, measured over 200 seeds). Busy doors use the busy-door
        // profile instead: 2 near readings, and 200-300 ms advertising for a steadier 1 Hz average.
        let walk = GateWalk(speed: 2.0, lateral: 0.8, sigma: 2.0, dropout: 0.02)
        var busyDoor = config(style, .geofenceExit)
        busyDoor.minReadings = 2
        for seed in UInt64(1)...20 {
            let d = try simulate(walk, style, seed: seed, after: 300, config: busyDoor)
            #expect(d.checkIns.count == 1, "seed \(seed)")
            #expect(d.checkOuts.isEmpty)
        }
    }

    @Test(
        "standing at the gate for 30 minutes: one check-in, no flapping, check-out after leaving",
        arguments: ScanStyle.allCases)
    func standing(style: ScanStyle) throws {
        for seed in UInt64(1)...5 {
            var d = try DeviceHarness(config: config(style), seed: seed)
            try d.arrive()
            var noise = Noise(seed: seed)
            var region = RegionSimulator()
            let standSeconds = 1_800
            for second in 0..<(standSeconds + 400) {
                try d.advance(ms: 1_000)
                // Walks up in 5 s, stands 1.5 m away (sigma 4 dB, 10 % dropouts), then walks away at 1 m/s.
                let distance =
                    second < 5
                    ? 6.0 - Double(second)
                    : second < standSeconds ? 1.5 : 1.5 + Double(second - standSeconds)
                let rssi = PathLoss.reading(distance: distance, noise: &noise, sigma: 4, dropout: 0.10, range: 12)
                try region.step(heard: rssi != nil, device: &d)
                if let rssi, d.isScanning { try d.reading(World.gateA, rssi) }
                if second == standSeconds - 1 {
                    #expect(d.checkIns.count == 1, "seed \(seed)")
                    #expect(d.checkOuts.isEmpty, "seed \(seed)")
                    #expect(d.phase == .present)
                }
            }
            let out = try #require(d.checkOuts.first, "seed \(seed)")
            #expect(d.checkOuts.count == 1)
            // Left at +1800 s: the check-out is stamped with the last moment of presence, not the moment
            // of decision ~3 minutes later. Continuous scanning knows it to a few seconds; with ranging
            // bursts it is the OS region exit, which iOS reports ~30 s after the last packet.
            let left = World.start + 1_800_000
            let tolerance: Int64 = style == .continuous ? 15_000 : 45_000
            #expect(abs(out.timestamp - left) <= tolerance, "seed \(seed): \(out.timestamp - left) ms")
            #expect(out.decidedAt - left < 260_000)
            #expect(attendanceViolations(d.posts).isEmpty)
        }
    }

    @Test("walking past the gate without entering: no check-in", arguments: ScanStyle.allCases)
    func walkingPast(style: ScanStyle) throws {
        let walk = GateWalk(speed: 1.3, lateral: 7, entersBuilding: false)
        for seed in UInt64(1)...20 {
            let d = try simulate(walk, style, seed: seed, after: 300)
            #expect(d.checkIns.isEmpty, "seed \(seed)")
        }
    }

    @Test("overlapping beacons: the nearest gate wins, moving between gates of one site is one session")
    func overlapping() throws {
        for style in ScanStyle.allCases {
            var d = try DeviceHarness(config: config(style))
            try d.send(.geofenceEntered(siteId: "S_HQ"))
            try d.send(.geofenceEntered(siteId: "S_LAB"))
            try d.send(.motionActivity(.walking))
            var noise = Noise(seed: 5)
            var region = RegionSimulator()
            // Gate A at x = 0, gate B at x = 3 (same site), the lab beacon at x = 12 (another site).
            func step(at x: Double, seconds: Int) throws {
                for _ in 0..<seconds {
                    try d.advance(ms: 1_000)
                    let readings: [(BeaconIdentity, Int?)] = [
                        (World.gateA, PathLoss.reading(distance: abs(x) + 0.3, noise: &noise, range: 20)),
                        (World.gateB, PathLoss.reading(distance: abs(x - 3) + 0.3, noise: &noise, range: 20)),
                        (World.lab, PathLoss.reading(distance: abs(x - 12) + 0.3, noise: &noise, range: 20)),
                    ]
                    try region.step(heard: readings.contains { $0.1 != nil }, device: &d)
                    guard d.isScanning else { continue }
                    for (beacon, rssi) in readings { if let rssi { try d.reading(beacon, rssi) } }
                }
            }
            try step(at: 0.4, seconds: 30)
            #expect(d.checkIns.map(\.beacon) == [World.gateA], "\(style)")
            try step(at: 2.7, seconds: 300)
            #expect(d.checkIns.count == 1 && d.checkOuts.isEmpty, "\(style)")
            try d.send(.motionActivity(.walking)) // walks over to the lab
            if style == .ranging {
                // Without continuous scanning only an OS trigger makes the phone range again.
                try step(at: 11.7, seconds: 5)
                try d.send(.beaconRegionExited)
                try step(at: 11.7, seconds: 2)
                try d.send(.beaconRegionEntered)
            }
            try step(at: 11.7, seconds: 240)
            #expect(d.checkIns.map(\.siteId) == ["S_HQ", "S_LAB"], "\(style)")
            #expect(d.checkOuts.map(\.siteId) == ["S_HQ"], "\(style)")
            #expect(attendanceViolations(d.posts).isEmpty)
        }
    }

    @Test("many people: 100 devices, each one check-in and one check-out, every key unique")
    func manyPeople() throws {
        var allKeys = Set<String>()
        var allSessions = Set<String>()
        var checkInDelays: [Int64] = []
        var checkOutErrors: [Int64] = []
        for person in 0..<100 {
            let seed = UInt64(1_000 + person)
            var noise = Noise(seed: seed)
            let arrive = Int(noise.uniform() * 1_800)
            let stay = 600 + Int(noise.uniform() * 1_800)
            var d = try DeviceHarness(
                config: config(person % 2 == 0 ? .continuous : .ranging),
                userId: "u_\(person)", deviceId: "d_\(person)", seed: seed)
            try d.arrive(site: "S_LAB")
            var region = RegionSimulator()
            var distance = 2.0
            for second in 0..<(arrive + stay + 400) {
                try d.advance(ms: 1_000)
                if second == arrive - 120 { try d.send(.motionActivity(.walking)) }
                let rssi: Int?
                if second < arrive || second > arrive + stay + 30 {
                    rssi = nil
                } else if second > arrive + stay {
                    rssi = PathLoss.reading(distance: 2 + Double(second - arrive - stay), noise: &noise, range: 12)
                } else {
                    distance = min(3, max(0.5, distance + noise.gaussian(sigma: 0.2)))
                    rssi = PathLoss.reading(distance: distance, noise: &noise, sigma: 3.5, dropout: 0.08)
                }
                try region.step(heard: rssi != nil, device: &d)
                if let rssi, d.isScanning { try d.reading(World.lab, rssi) }
            }
            #expect(d.checkIns.count == 1, "person \(person)")
            #expect(d.checkOuts.count == 1, "person \(person)")
            #expect(attendanceViolations(d.posts).isEmpty, "person \(person)")
            for e in d.posts { #expect(allKeys.insert(e.idempotencyKey.hex).inserted) }
            if let first = d.checkIns.first {
                allSessions.insert(first.sessionKey)
                checkInDelays.append(first.tStart - (World.start + Int64(arrive + 1) * 1_000))
            }
            if let out = d.checkOuts.first, person % 2 == 0 { // continuous scanning: exact departures
                checkOutErrors.append(out.timestamp - (World.start + Int64(arrive + stay + 1) * 1_000))
            }
        }
        #expect(allSessions.count == 100)
        // Detection within 10 s of arrival; departure stamped within 20 s of the true time.
        #expect(checkInDelays.allSatisfy { $0 >= 0 && $0 <= 10_000 }, "\(checkInDelays.max() ?? 0)")
        #expect(checkOutErrors.allSatisfy { abs($0) <= 20_000 }, "\(checkOutErrors.map(abs).max() ?? 0)")
    }

    @Test("noise gaps under 10 s never cause a check-out", arguments: [false, true])
    func noiseGaps(minimalGrace: Bool) throws {
        for style in ScanStyle.allCases {
            var c = config(style)
            if minimalGrace {
                c.softExitGraceMs = 10_000
                c.exitConfirmationMs = 3_000
            }
            var d = try DeviceHarness(config: c, seed: 11)
            try d.arrive()
            try d.send(.beaconRegionEntered)
            var noise = Noise(seed: minimalGrace ? 99 : 98)
            var second = 0
            var gaps = 0
            while second < 4 * 3_600 {
                // 20-90 s of good signal...
                for _ in 0..<(20 + Int(noise.uniform() * 70)) {
                    try d.advance(ms: 1_000)
                    second += 1
                    if d.isScanning || style == .continuous, let r = PathLoss.reading(distance: 1.2, noise: &noise, dropout: 0.03) {
                        try d.reading(World.gateA, r)
                    }
                }
                // ...then a gap shorter than 10 s: silence, "not heard" zeros, a deep dip, or (ranging
                // mode) an OS region exit followed by a re-entry.
                let length = 1 + Int(noise.uniform() * 8.9)
                let kind = Int(noise.uniform() * 4)
                gaps += 1
                if kind == 3 && style == .ranging { try d.send(.beaconRegionExited) }
                for _ in 0..<length {
                    try d.advance(ms: 1_000)
                    second += 1
                    switch kind {
                    case 1: try d.reading(World.gateA, 0)
                    case 2: try d.reading(World.gateA, -95 + Int(noise.gaussian(sigma: 2)))
                    default: break
                    }
                }
                if kind == 3 && style == .ranging { try d.send(.beaconRegionEntered) }
            }
            #expect(gaps > 150)
            #expect(d.checkIns.count == 1, "\(style)")
            #expect(d.checkOuts.isEmpty, "\(style), minimal grace \(minimalGrace)")
        }
    }

    @Test("offline for 72 h: every event kept on disk, then drained in order")
    func offline72h() async throws {
        try await withTempDir { dir in
            let clock = ManualClock(World.start)
            let path = dir + "/outbox.wal"
            let outbox = try Outbox(path: path, clock: clock)
            var d = try DeviceHarness(config: config(.continuous), clock: clock, outbox: outbox)
            // The app had an answer before it went offline: it stamps with the server's clock.
            try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: 0))
            try d.send(.connectivityChanged(online: false))
            var noise = Noise(seed: 72)
            // Three working days: arrive 09:00, lunch out 12:00-13:00, leave 18:00 (times relative).
            for _ in 0..<3 {
                try d.arrive()
                for (presentHours, awayHours) in [(3, 1), (5, 15)] {
                    try d.send(.motionActivity(.walking))
                    for _ in 0..<(presentHours * 3_600) {
                        try d.advance(ms: 1_000)
                        if let r = PathLoss.reading(distance: 1.5, noise: &noise) { try d.reading(World.gateA, r) }
                    }
                    // Away: beacon out of range; time passes in 1-minute steps.
                    for _ in 0..<(awayHours * 60) { try d.advance(ms: 60_000) }
                }
                try d.send(.geofenceExited(siteId: "S_HQ"))
            }
            #expect(clock.now() - World.start == 72 * 3_600_000)
            let posted = d.posts
            #expect(d.checkIns.count == 6 && d.checkOuts.count == 6)
            #expect(d.heartbeats.count > 250)
            #expect(attendanceViolations(posted).isEmpty)
            #expect(outbox.count == posted.count)
            #expect(outbox.fileSize < Int64(posted.count) * 2_500)
            outbox.close()

            // The app is relaunched later and the network is back: everything drains, in order.
            let reopened = try Outbox(path: path, clock: clock)
            #expect(reopened.count == posted.count)
            let received = Mutex<[AttendanceEvent]>([])
            let drainer = OutboxDrainer(outbox: reopened, clock: clock, sleep: { clock.advance(by: $0) })
            var rng = SplitMix64(seed: 1)
            let report = try await drainer.drain(deadline: nil, random: &rng) { _, payload in
                guard let event = try? PresenceCoding.decodeEvent(payload) else { return .response(status: 400) }
                received.withLock { $0.append(event) }
                return .response(status: 201)
            }
            #expect(report.stop == .empty && reopened.isEmpty)
            #expect(received.withLock { $0 } == posted)
        }
    }

    @Test("crash in the middle of an outbox write: recovery keeps everything before, the device carries on")
    func crashMidWrite() throws {
        try withTempDir { dir in
            let clock = ManualClock(World.start)
            let path = dir + "/outbox.wal"
            var snapshotBeforeCrash: PresenceSnapshot?
            var storedBeforeCrash: [AttendanceEvent] = []
            do {
                let outbox = try Outbox(path: path, clock: clock)
                var d = try DeviceHarness(config: config(.continuous), clock: clock, outbox: outbox)
                try d.arrive()
                try d.run(seconds: 700) { _ in -60 } // check-in + 2 heartbeats
                storedBeforeCrash = d.posts
                snapshotBeforeCrash = outbox.lastSnapshot()
                // The check-out is produced, and the process dies while writing it: only part of its
                // record reaches the disk.
                d.outbox = nil
                try d.run(seconds: 400) { _ in nil }
                let checkOut = try #require(d.checkOuts.first)
                let record = Outbox.appendRecord(
                    id: 99, createdAt: clock.now(), kind: 2, evictable: false, phoneClock: true,
                    payload: PresenceCoding.encode(checkOut), checkpoint: nil)
                outbox.close()
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(record[0..<(record.count / 2)]))
                try handle.close()
            }
            try #require(storedBeforeCrash.map(\.type) == [.checkIn, .heartbeat, .heartbeat])
            // Relaunch.
            clock.advance(by: 5_000)
            let outbox = try Outbox(path: path, clock: clock)
            #expect(outbox.recovery.truncatedBytes > 0)
            #expect(try outbox.entries().map { try PresenceCoding.decodeEvent(outbox.payload(of: $0.id)) } == storedBeforeCrash)
            let snapshot = try #require(outbox.lastSnapshot())
            #expect(snapshot == snapshotBeforeCrash)
            #expect(snapshot.session?.sessionKey == storedBeforeCrash[0].sessionKey)
            var d = try DeviceHarness(config: config(.continuous), clock: clock, outbox: outbox, restoring: snapshot)
            try d.send(.appLaunched)
            try d.run(seconds: 400) { _ in nil } // the user is gone
            let out = try #require(d.checkOuts.first)
            #expect(out.reason == .notFoundAfterRelaunch)
            #expect(out.sessionKey == storedBeforeCrash[0].sessionKey)
            let session = try #require(snapshot.session)
            #expect(out.timestamp == session.lastPresentAt)
            let all = try outbox.entries().map { try PresenceCoding.decodeEvent(outbox.payload(of: $0.id)) }
            #expect(all.count == 4)
            #expect(attendanceViolations(all).isEmpty)
        }
    }

    @Test(
        "force-quit and relaunch: the open session survives; it continues or closes correctly",
        arguments: [true, false])
    func forceQuit(backAtTheBeacon: Bool) throws {
        try withTempDir { dir in
            let clock = ManualClock(World.start)
            let path = dir + "/outbox.wal"
            var sessionKey = ""
            var quitAt = Timestamp.zero
            do {
                let outbox = try Outbox(path: path, clock: clock)
                var d = try DeviceHarness(config: config(.continuous), clock: clock, outbox: outbox)
                try d.arrive()
                try d.run(seconds: 120) { _ in -61 }
                sessionKey = try #require(d.checkIns.first?.sessionKey)
                quitAt = clock.now()
                try d.send(.appTerminated(forceQuit: true))
                #expect(!d.isScanning)
                outbox.close()
            }
            clock.advance(by: 600_000) // ten minutes without the app
            let outbox = try Outbox(path: path, clock: clock)
            let snapshot = try #require(outbox.lastSnapshot())
            #expect(snapshot.session?.sessionKey == sessionKey)
            #expect(snapshot.session?.lastPresentAt == quitAt)
            #expect(snapshot.insideSiteIds == ["S_HQ"])
            var d = try DeviceHarness(config: config(.continuous), clock: clock, outbox: outbox, restoring: snapshot)
            #expect(d.phase == .softExitPending)
            let launch = try d.send(.appLaunched)
            #expect(launch.contains(.drainOutbox) && launch.contains(.startScanning(.continuous)))
            if backAtTheBeacon {
                try d.run(seconds: 600) { _ in -61 }
                #expect(d.checkIns.isEmpty, "no second check-in for the same session")
                #expect(d.checkOuts.isEmpty && d.phase == .present)
                try d.run(seconds: 400) { _ in nil }
                #expect(d.checkOuts.map(\.sessionKey) == [sessionKey])
                #expect(d.checkOuts.first?.reason == .beaconLost)
            } else {
                try d.run(seconds: 400) { _ in nil }
                let out = try #require(d.checkOuts.first)
                #expect(out.sessionKey == sessionKey && out.reason == .notFoundAfterRelaunch)
                #expect(out.timestamp == quitAt)
            }
            let stored = try outbox.entries().map { try PresenceCoding.decodeEvent(outbox.payload(of: $0.id)) }
            #expect(attendanceViolations(stored).isEmpty)
            #expect(stored.first?.type == .checkIn && stored.last?.type == .checkOut)
        }
    }

    /// The shipped defaults (geofence-exit check-out, continuous scan). The phone dies at its desk; the
    /// relaunch comes `hoursOff` later, at the desk or at home.
    @Test(
        "a phone off for longer than the resume limit ends its session at its last presence on relaunch, then checks in anew",
        arguments: [(14.0, true), (14.0, false), (2.0, true)])
    func relaunchAfterALongTimeOff(hoursOff: Double, atTheDesk: Bool) throws {
        var d = try DeviceHarness(config: PresenceConfig())
        try d.arrive()
        try d.run(seconds: 30) { _ in -60 }
        let evening = try #require(d.checkIns.first)
        try d.run(seconds: 600) { _ in -60 }
        let lastPresence = try #require(d.machine.openSession?.lastPresentAt)
        let snapshot = d.machine.snapshot(at: d.now) // the last one written before the battery died
        let offMs = Int64(hoursOff * 3_600_000)
        let clock = ManualClock(d.now + offMs)
        var next = try DeviceHarness(config: PresenceConfig(), seed: 43, clock: clock, restoring: snapshot)
        try next.send(.appLaunched)
        let stale = offMs > PresenceConfig().sessionResumeLimitMs
        if stale {
            // At once, before anything is heard, dated at the evening's last presence.
            let out = try #require(next.checkOuts.first)
            #expect(out.sessionKey == evening.sessionKey && out.reason == .notFoundAfterRelaunch)
            #expect(out.timestamp == lastPresence)
            #expect(next.machine.openSession == nil)
        } else {
            #expect(next.checkOuts.isEmpty && next.machine.openSession?.sessionKey == evening.sessionKey)
        }
        if atTheDesk {
            try next.send(.motionActivity(.walking))
            try next.run(seconds: 30) { _ in -60 }
            try next.send(.motionActivity(.stationary))
            try next.run(seconds: 700) { _ in -60 }
            #expect(!next.heartbeats.isEmpty)
            if stale {
                // A session of its own, whose heartbeats the server can join.
                let morning = try #require(next.checkIns.first)
                #expect(morning.sessionKey != evening.sessionKey && morning.timestamp > lastPresence + offMs - 60_000)
                #expect(next.heartbeats.allSatisfy { $0.sessionKey == morning.sessionKey })
            } else {
                #expect(next.checkIns.isEmpty && next.heartbeats.allSatisfy { $0.sessionKey == evening.sessionKey })
            }
        } else {
            // At home: the OS reports the geofence exit soon after the launch.
            try next.run(seconds: 5) { _ in nil }
            try next.send(.geofenceExited(siteId: "S_HQ"))
            #expect(next.checkIns.isEmpty)
            #expect(next.checkOuts.count == 1 && next.checkOuts.first?.timestamp == lastPresence)
        }
        #expect(attendanceViolations(d.posts + next.posts).isEmpty)
    }

    /// The battery dies at the desk; the phone is switched on 2 h later (within the resume limit). At home,
    /// the exit the OS reports at once does not date the departure 2 h late: the last moment the earlier
    /// process knew the session was going does. Back at the desk, the session goes on, with no check-out.
    @Test(
        "a phone switched on again after it was off dates a restored session's exit at its last known moment",
        arguments: [false, true])
    func relaunchAfterTheDeviceWasOff(atTheDesk: Bool) throws {
        var d = try DeviceHarness(config: PresenceConfig())
        try d.arrive()
        try d.run(seconds: 30) { _ in -60 }
        let checkIn = try #require(d.checkIns.first)
        try d.run(seconds: 600) { _ in -60 }
        let diedAt = d.now
        let snapshot = d.machine.snapshot(at: diedAt) // the last one written before the battery died
        let clock = ManualClock(diedAt + 2 * 3_600_000)
        var next = try DeviceHarness(config: PresenceConfig(), seed: 43, clock: clock, restoring: snapshot)
        try next.send(.appLaunchedAfterDeviceRestart)
        #expect(next.checkOuts.isEmpty && next.machine.openSession?.sessionKey == checkIn.sessionKey)
        if atTheDesk {
            try next.send(.motionActivity(.stationary))
            try next.run(seconds: 700) { _ in -60 }
            #expect(next.checkOuts.isEmpty && next.checkIns.isEmpty)
            #expect(next.heartbeats.allSatisfy { $0.sessionKey == checkIn.sessionKey })
        } else {
            try next.run(seconds: 5) { _ in nil }
            try next.send(.geofenceExited(siteId: "S_HQ"))
            let out = try #require(next.checkOuts.first)
            #expect(out.sessionKey == checkIn.sessionKey && out.reason == .geofenceExit)
            #expect(out.timestamp == diedAt, "dated at the report, \((out.timestamp - diedAt) / 60_000) min late")
        }
        #expect(attendanceViolations(d.posts + next.posts).isEmpty)

        // Switched on at the desk, out of the gate's range, and leaving hours later: the phone was on and
        // inside the geofence all along, so the exit dates the departure.
        var stayed = try DeviceHarness(config: PresenceConfig(), seed: 44, clock: ManualClock(diedAt + 2 * 3_600_000), restoring: snapshot)
        try stayed.send(.appLaunchedAfterDeviceRestart)
        try stayed.run(seconds: 3 * 3_600) { _ in nil }
        let leftAt = stayed.now
        try stayed.send(.geofenceExited(siteId: "S_HQ"))
        #expect(stayed.checkOuts.last?.timestamp == leftAt)
    }

    /// The phone's clock read 12 h slow when the server's became known, then the network corrected it.
    /// The machine is told (`clockEvent`), so the snapshot records what the phone reads now, and a
    /// relaunch a minute later resumes the session instead of measuring 12 h off and checking it out.
    @Test("a phone clock set while the device stamps with the server's is what the snapshot records")
    func aPhoneClockCorrectedLaterReachesTheSnapshot() throws {
        let phoneAhead: Int64 = -12 * 3_600_000
        var d = try DeviceHarness(config: PresenceConfig(), clockOffsetMs: phoneAhead)
        try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: phoneAhead))
        #expect(d.machine.clockEvent(serverOffsetMs: 0, phoneAheadMs: phoneAhead, wallClockOffsetMs: phoneAhead) == nil)
        try d.arrive()
        try d.run(seconds: 30) { _ in -60 }
        let checkIn = try #require(d.checkIns.first)
        // Corrected: the phone now reads the server's time.
        let owed = try #require(d.machine.clockEvent(serverOffsetMs: 0, phoneAheadMs: 0, wallClockOffsetMs: 0))
        #expect(owed == .serverClockKnown(offsetMs: 0, phoneAheadMs: 0))
        try d.send(owed)
        #expect(d.machine.clockEvent(serverOffsetMs: 0, phoneAheadMs: 0, wallClockOffsetMs: 0) == nil)
        let snapshot = d.machine.snapshot(at: d.now)
        #expect(snapshot.phoneClockSavedAt == d.now)
        var next = try DeviceHarness(
            config: PresenceConfig(), seed: 43, clock: ManualClock(d.now + 60_000), restoring: snapshot, clockOffsetMs: 0)
        try next.send(.appLaunched)
        #expect(next.checkOuts.isEmpty && next.machine.openSession?.sessionKey == checkIn.sessionKey)
    }

    /// The earlier process stamped with the server's clock while the phone's own read 12 h fast (AM and
    /// PM swapped, automatic time off); it is still that wrong when the app starts again a minute later.
    /// The gap is measured on the phone's clock at both ends, so the session resumes; and a phone off
    /// for 14 h ends it, whatever the clock reads, as long as it reads the same at both ends.
    @Test("the resume limit measures the time off on the phone's own clock, not against the server's stamps", arguments: [1.0 / 60, 14])
    func resumeLimitOnThePhonesClock(hoursOff: Double) throws {
        let phoneAhead: Int64 = 12 * 3_600_000
        var d = try DeviceHarness(config: PresenceConfig(), clockOffsetMs: phoneAhead)
        try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: phoneAhead))
        try d.arrive()
        try d.run(seconds: 30) { _ in -60 }
        let checkIn = try #require(d.checkIns.first)
        #expect(checkIn.phoneClock == nil)
        let snapshot = d.machine.snapshot(at: d.now)
        #expect(snapshot.savedAt == d.now && snapshot.phoneClockSavedAt == d.now + phoneAhead)
        let clock = ManualClock(d.now + Int64(hoursOff * 3_600_000))
        var next = try DeviceHarness(config: PresenceConfig(), seed: 43, clock: clock, restoring: snapshot, clockOffsetMs: phoneAhead)
        try next.send(.appLaunched)
        if hoursOff < 1 {
            #expect(next.checkOuts.isEmpty && next.machine.openSession?.sessionKey == checkIn.sessionKey)
        } else {
            #expect(next.checkOuts.map(\.sessionKey) == [checkIn.sessionKey])
            #expect(next.checkOuts.first?.reason == .notFoundAfterRelaunch && next.machine.openSession == nil)
        }
        // A snapshot of an earlier version says nothing of the phone's clock: its session resumes.
        var old = snapshot
        old.phoneClockSavedAt = nil
        var older = try DeviceHarness(config: PresenceConfig(), seed: 44, clock: ManualClock(d.now + 14 * 3_600_000), restoring: old)
        try older.send(.appLaunched)
        #expect(older.checkOuts.isEmpty && older.machine.openSession?.sessionKey == checkIn.sessionKey)
    }
}
