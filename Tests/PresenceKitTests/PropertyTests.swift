import PropertyBased
import Synchronization
import Testing

@testable import PresenceKit

/// Drives one device through a random life: readings of every kind (including 0 and 127), silences,
/// geofence and region events, motion, periodic wakes, stopped scans, GATT answers, user changes, and
/// force-quit + relaunch from the persisted snapshot, and (`configBits` 64) sites with detection settings of
/// their own, kill switches included, replaced by a changed directory while running. Every posted event is
/// collected, across relaunches, with the sessions the device ended without a check-out (a kill switch).
struct RandomLife {
    let configBits: Int
    let ops: [Int]

    /// The site directories a life moves between: without settings, with the HQ's own (stricter, or its
    /// kill switch on), the sites in another order, the HQ's gate A retired, the HQ removed.
    var directories: [SiteDirectory] {
        let plain = World.directory.sites
        guard configBits & 64 != 0 else { return [World.directory] }
        var strict = config
        strict.enterRssi = -60
        var killed = config
        killed.flags.killSwitch = true
        var other = config
        other.checkOutTrigger = config.checkOutTrigger == .geofenceExit ? .beaconLoss : .geofenceExit
        func with(_ hq: PresenceConfig?, _ lab: PresenceConfig?, hqBeacons: [BeaconMatcher]? = nil) -> [Site] {
            var sites = plain
            sites[0].settings = hq
            sites[1].settings = lab
            if let hqBeacons { sites[0].beacons = hqBeacons }
            return sites
        }
        return [
            SiteDirectory(sites: with(strict, other)),
            SiteDirectory(sites: with(killed, nil)),
            SiteDirectory(sites: with(nil, killed).reversed()),
            SiteDirectory(sites: with(other, strict, hqBeacons: [BeaconMatcher(World.companyUUID, major: 10, minor: 2)])),
            SiteDirectory(sites: [with(nil, strict)[1]]),
            World.directory,
        ]
    }

    static let beacons = [World.gateA, World.gateB, World.lab, World.foreign]
    static let levels: [Int?] = [-55, -62, -68, -72, -76, -85, -95, 0, 127, nil]

    var config: PresenceConfig {
        World.config {
            $0.flags.continuousScan = configBits & 1 != 0
            $0.checkOutTrigger = configBits & 2 != 0 ? .geofenceExit : .beaconLoss
            $0.flags.gattChallenge = configBits & 4 != 0
            $0.flags.requireGeofence = configBits & 8 == 0
            $0.flags.motionGating = configBits & 16 == 0
            if configBits & 32 != 0 {
                $0.softExitGraceMs = 10_000
                $0.exitConfirmationMs = 3_000
                $0.heartbeatIntervalMs = 60_000
            }
        }
    }

    func run() throws -> (
        posts: [AttendanceEvent], relaunches: Int, replacements: Int, underASitesKillSwitch: Int, endedSilently: Set<String>
    ) {
        let clock = ManualClock(World.start)
        var seed: UInt64 = 1
        let directories = self.directories
        var directory = directories[0]
        var d = try DeviceHarness(config: config, seed: seed, clock: clock, directory: directory)
        var posts: [AttendanceEvent] = []
        var lastSnapshot: PresenceSnapshot?
        var relaunches = 0
        var replacements = 0
        var underASitesKillSwitch = 0
        var endedSilently = Set<String>()
        func absorb(_ fx: [PresenceEffect]) {
            for effect in fx {
                switch effect {
                case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e): posts.append(e)
                case .persistSnapshot(let s): lastSnapshot = s
                case .log(_, let text) where text.contains("its session ends here, without a check-out"):
                    if let key = posts.last(where: { $0.type == .checkIn })?.sessionKey { endedSilently.insert(key) }
                default: break
                }
            }
        }
        for v in ops {
            if d.machine.settingsSiteId != nil && d.machine.config.flags.killSwitch { underASitesKillSwitch += 1 }
            let op = v % 16
            let p = v / 16
            switch op {
            case 0...5:
                let beacon = Self.beacons[(p / 20) % 4]
                let level = Self.levels[(p / 80) % 10]
                for _ in 0..<(1 + p % 20) {
                    clock.advance(by: 1_000)
                    absorb(d.agent.advance(to: clock.now()))
                    if let level { absorb(d.agent.handle(.beaconReading(BeaconReading(beacon: beacon, rssi: level)), at: clock.now())) }
                }
            case 6:
                clock.advance(by: Int64(p % 600) * 1_000)
                absorb(d.agent.advance(to: clock.now()))
            case 7:
                absorb(d.agent.handle(.geofenceEntered(siteId: p % 2 == 0 ? "S_HQ" : "S_LAB"), at: clock.now()))
            case 8:
                absorb(d.agent.handle(.geofenceExited(siteId: p % 2 == 0 ? "S_HQ" : "S_LAB"), at: clock.now()))
            case 9:
                absorb(d.agent.handle(p % 2 == 0 ? .beaconRegionEntered : .beaconRegionExited, at: clock.now()))
            case 10:
                absorb(d.agent.handle(.beaconRegionState(inside: p % 2 == 0), at: clock.now()))
            case 11:
                let event: PresenceEvent =
                    p % 3 == 0 ? .motionActivity(.walking) : p % 3 == 1 ? .motionActivity(.stationary) : .steps(p % 50)
                absorb(d.agent.handle(event, at: clock.now()))
            case 12:
                absorb(d.agent.handle(.periodicWake, at: clock.now()))
            case 13:
                absorb(d.agent.handle(.scanningStopped(p % 2 == 0 ? .continuous : .ranging), at: clock.now()))
            case 14:
                absorb(d.agent.handle(.gattChallengeResult(ok: p % 3 != 0, roundTripMs: 100 + p % 200), at: clock.now()))
            default:
                if p % 3 == 0 {
                    // Force-quit (or crash: no terminate event), relaunch from the last persisted snapshot.
                    if p % 2 == 0 { absorb(d.agent.handle(.appTerminated(forceQuit: true), at: clock.now())) }
                    clock.advance(by: Int64(p % 900) * 1_000)
                    seed += 1 // a relaunched process draws fresh randomness
                    d = try DeviceHarness(config: config, seed: seed, clock: clock, restoring: lastSnapshot, directory: directory)
                    absorb(d.agent.handle(.appLaunched, at: clock.now()))
                    relaunches += 1
                } else if p % 3 == 2 && directories.count > 1 {
                    // The app fetched a changed configuration.
                    directory = directories[(p / 3) % directories.count]
                    absorb(d.agent.replace(directory: directory, at: clock.now()))
                    replacements += 1
                } else {
                    let users: [String?] = [nil, "u_1", "u_2"]
                    absorb(d.agent.handle(.userIdChanged(users[(p / 3) % 3]), at: clock.now()))
                }
            }
        }
        return (posts, relaunches, replacements, underASitesKillSwitch, endedSilently)
    }
}

@Suite("Invariants (property-based)")
struct PropertyTests {
    @Test("never two open sessions for one site; a check-out only after its check-in; unique idempotency keys")
    func sessionInvariants() async throws {
        // Tallies that prove the generated lives are not vacuous.
        let tally = Mutex<[AttendanceEvent.Kind: Int]>([:])
        let relaunched = Mutex(0)
        let replaced = Mutex(0)
        let killed = Mutex(0)
        await propertyCheck(count: 300, input: Gen.int(in: 0...127), Gen.int(in: 0...1_000_000).array(of: 1...150)) { bits, ops in
            let life = RandomLife(configBits: bits, ops: ops)
            let result = try life.run()
            tally.withLock { t in for e in result.posts { t[e.type, default: 0] += 1 } }
            relaunched.withLock { $0 += result.relaunches }
            replaced.withLock { $0 += result.replacements }
            killed.withLock { $0 += result.underASitesKillSwitch }
            let violations = attendanceViolations(result.posts, endedSilently: result.endedSilently)
            #expect(violations.isEmpty, "config \(bits): \(violations)")
            for e in result.posts {
                #expect(e.idempotencyKey.hex.count == 64)
                #expect(
                    e.idempotencyKey
                        == IdempotencyKey.make(
                            userId: e.userId, deviceId: e.deviceId, beaconId: e.beacon.beaconId,
                            tStart: e.type == .checkIn ? e.tStart : e.timestamp, nonce: e.nonce))
            }
        }
        let counts = tally.withLock { $0 }
        #expect(counts[.checkIn, default: 0] > 100 && counts[.checkOut, default: 0] > 50, "\(counts)")
        #expect(relaunched.withLock { $0 } > 50)
        // Sites with settings of their own, replaced while running, and events met under a site's kill switch.
        #expect(replaced.withLock { $0 } > 50 && killed.withLock { $0 } > 50, "\(replaced.withLock { $0 }), \(killed.withLock { $0 })")
    }

    @Test("a strong signal interrupted by gaps shorter than 10 s never produces a check-out")
    func noiseNeverChecksOut() async throws {
        // Gaps of 1-9 s (silence, "not heard" zeros, or -96 dBm dips), each followed by at least two good
        // readings: the signal is back once two of the last three readings are above the leave threshold.
        // (One good reading between two long gaps is not "back": 1 s heard in 14 s is someone leaving.)
        let gap = zip(Gen.int(in: 2...60), Gen.int(in: 1...9), Gen.int(in: 0...2))
        await propertyCheck(count: 150, input: Gen.int(in: 0...3), gap.array(of: 1...60)) { bits, gaps in
            var c = World.config {
                $0.flags.continuousScan = bits & 1 != 0
                if bits & 2 != 0 { $0.softExitGraceMs = 10_000; $0.exitConfirmationMs = 3_000 }
            }
            c.checkOutTrigger = .beaconLoss
            var d = try DeviceHarness(config: c)
            try d.arrive()
            try d.send(.beaconRegionEntered)
            for (good, gapSeconds, kind) in gaps {
                try d.run(seconds: good) { _ in -62 }
                try d.run(seconds: gapSeconds) { _ in kind == 0 ? nil : kind == 1 ? 0 : -96 }
            }
            try d.run(seconds: 5) { _ in -62 }
            #expect(d.checkOuts.isEmpty, "gaps \(gaps)")
            #expect(d.checkIns.count == 1)
        }
    }

    @Test("idempotency keys stay unique across many devices checking in at the same millisecond")
    func keysUniqueAcrossFleet() async throws {
        await propertyCheck(count: 50, input: Gen.int(in: 2...40)) { devices in
            var keys = Set<String>()
            for i in 0..<devices {
                var d = try DeviceHarness(
                    config: World.config { $0.flags.continuousScan = true }, userId: "u_\(i % 3)",
                    deviceId: "d_\(i % 2)", seed: UInt64(i) &* 0x9E37_79B9)
                try d.arrive()
                try d.run(seconds: 3) { _ in -60 }
                for e in d.posts { #expect(keys.insert(e.idempotencyKey.hex).inserted) }
            }
            #expect(keys.count == devices)
        }
    }
}
