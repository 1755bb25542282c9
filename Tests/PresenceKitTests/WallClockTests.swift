import Foundation
import Testing

@testable import PresenceKit

/// The machine's time is the device's steady clock; setting the wall clock (a network time correction,
/// the user) moves only the stamps of what the device sends and persists.
@Suite("Wall clock set while present")
struct WallClockTests {
    /// Continuous scan, check-out on beacon loss, heartbeats every 5 minutes: every timer in play.
    static let config = World.config {
        $0.flags.continuousScan = true
        $0.heartbeatIntervalMs = 300_000
    }
    static let hour: Int64 = 3_600_000

    /// Checked in at the gate, then walking about inside (not at rest, so only the signal keeps the
    /// session): readings every second.
    static func checkedIn(outbox: Outbox? = nil) throws -> DeviceHarness {
        var d = try DeviceHarness(config: config, outbox: outbox)
        try d.arrive()
        try d.run(seconds: 5) { _ in -60 }
        try #require(d.checkIns.count == 1 && d.phase == .present)
        return d
    }

    @Test("the wall clock set an hour forward: no check-out, no burst of heartbeats, the stamps an hour on")
    func forward() throws {
        var d = try Self.checkedIn()
        let checkIn = try #require(d.checkIns.first)
        try d.run(seconds: 60) { _ in -62 }
        try d.send(.clockOffsetChanged(offsetMs: Self.hour))
        let heartbeatsBefore = d.heartbeats.count
        try d.run(seconds: 600) { _ in -62 }
        #expect(d.checkOuts.isEmpty && d.checkIns.count == 1 && d.phase == .present)
        // 10 minutes of steady time: two heartbeats, each stamped by the wall clock (an hour on). The
        // session's start, stamped by the same clock before it was set, moved with it (the stamps are
        // the phone's until an answer corrects them all at once).
        let after = Array(d.heartbeats.dropFirst(heartbeatsBefore))
        #expect(after.count == 2)
        for heartbeat in after {
            #expect(heartbeat.timestamp - heartbeat.decidedAt == 0)
            #expect(heartbeat.timestamp > checkIn.timestamp + Self.hour)
            #expect(heartbeat.tStart == checkIn.tStart + Self.hour && heartbeat.sessionKey == checkIn.sessionKey)
        }
        // The person leaves: the check-out is decided after the grace in steady time and stamped with
        // the wall clock's reading of the last moment of presence.
        let lastSeen = d.now
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.timestamp == lastSeen + Self.hour)
        #expect(out.tStart == checkIn.tStart + Self.hour)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    /// The app suspended for two hours at a desk (steady time runs on while the phone sleeps): the
    /// reading that wakes it is delivered after the timers due meanwhile, and those fire at the wake-up
    /// time, once. Before, each fired at its own deadline: the whole exit was replayed (a check-out
    /// stamped two hours back, then a new check-in) before the reading arrived.
    @Test("two hours suspended at a desk: no check-out, no burst of heartbeats, the session goes on")
    func suspendedAtADesk() throws {
        var d = try Self.checkedIn()
        try d.run(seconds: 60) { _ in -62 }
        let heartbeatsBefore = d.heartbeats.count
        d.clock.advance(by: 2 * Self.hour)
        try d.run(seconds: 5) { _ in -62 }
        #expect(d.checkOuts.isEmpty && d.checkIns.count == 1 && d.phase == .present)
        #expect(
            d.heartbeats.count - heartbeatsBefore <= 1, "a heartbeat for each interval missed: \(d.heartbeats.count - heartbeatsBefore)")

        // Suspended again, and the person left meanwhile: the check-out is decided after the grace and
        // stamped with the last moment of presence, not the wake-up time.
        let lastSeen = d.now
        d.clock.advance(by: 2 * Self.hour)
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.reason == .beaconLost && out.timestamp == lastSeen)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    /// A late timer fires at the wake-up; one due just before it (within the tolerance) then fires at
    /// the wake-up too, never earlier: the machine's time does not run backwards.
    @Test("timers due around a late one fire in time order, none before the wake-up")
    func lateTimersKeepTimeMonotonic() throws {
        var d = try Self.checkedIn()
        let heartbeatDue = try #require(d.machine.deadline(of: .heartbeat))
        // Heard until 25 s before the heartbeat is due: the signal watchdog falls due 10 s later.
        try d.run(seconds: Int((heartbeatDue - d.now) / 1_000) - 25) { _ in -62 }
        let watchdogDue = try #require(d.machine.deadline(of: .signalWatchdog))
        // Woken 5 s after the heartbeat was due: the watchdog is 20 s late, the heartbeat 5 s.
        d.clock.advance(by: heartbeatDue + 5_000 - d.now)
        #expect(d.now - watchdogDue > PresenceAgent.lateTimerToleranceMs && d.now - heartbeatDue < PresenceAgent.lateTimerToleranceMs)
        try d.advance(ms: 0)
        #expect(d.machine.deadline(of: .heartbeat) == d.now + 300_000, "the heartbeat fired before the wake-up")
    }

    /// Without continuous scanning, presence rests on the OS's region: a suspension of an hour is one
    /// heartbeat at the wake-up, not twelve stamped in the past.
    @Test("an hour suspended without continuous scanning: one heartbeat at the wake-up")
    func suspendedWithoutContinuousScan() throws {
        var d = try DeviceHarness(config: World.config { $0.heartbeatIntervalMs = 300_000 })
        try d.arrive()
        try d.send(.beaconRegionEntered)
        try d.runScanning(seconds: 30) { _ in [(World.gateA, -60)] }
        try #require(d.checkIns.count == 1 && d.phase == .present)
        let before = d.heartbeats.count
        d.clock.advance(by: Self.hour)
        try d.advance(ms: 1_000)
        let woke = Array(d.heartbeats.dropFirst(before))
        #expect(woke.count == 1 && woke.first?.decidedAt == d.now)
    }

    @Test("the wall clock set two hours back: heartbeats go on, the session's start moves with the clock")
    func backward() throws {
        var d = try Self.checkedIn()
        let checkIn = try #require(d.checkIns.first)
        try d.send(.clockOffsetChanged(offsetMs: -2 * Self.hour))
        try d.run(seconds: 900) { _ in -62 }
        // 15 minutes: three heartbeats, on time in steady time, stamped by the wall clock as set, after
        // the session's start as the same clock now reads it.
        #expect(d.heartbeats.count == 3)
        #expect(d.heartbeats.allSatisfy { $0.timestamp == $0.decidedAt && $0.tStart == checkIn.tStart - 2 * Self.hour })
        #expect(d.heartbeats.allSatisfy { $0.timestamp > $0.tStart && $0.decidedAt < checkIn.decidedAt })
        let lastSeen = d.now
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.timestamp == lastSeen - 2 * Self.hour && out.reason == .beaconLost)
        #expect(attendanceViolations(d.posts).isEmpty)

        // The same with the wall clock fed as `at:`: no heartbeat for the two hours the clock repeats.
        let wallFed = try Self.checkedIn()
        let fedAt = wallFed.now - 2 * Self.hour
        var agent = wallFed.agent
        var heartbeats = 0
        for second in 1...900 {
            let at = fedAt + Int64(second) * 1_000
            for effect in agent.handle(.beaconReading(BeaconReading(beacon: World.gateA, rssi: -62)), at: at) {
                if case .postHeartbeat = effect { heartbeats += 1 }
            }
        }
        #expect(heartbeats == 0 && agent.machine.phase == .present)
    }

    @Test("a relaunch after the clock was set restores the session at the wall clock's times")
    func relaunch() throws {
        var d = try Self.checkedIn()
        let checkIn = try #require(d.checkIns.first)
        try d.send(.clockOffsetChanged(offsetMs: Self.hour))
        try d.run(seconds: 30) { _ in -62 }
        let lastSeen = d.now
        try d.send(.appTerminated(forceQuit: false))
        let snapshot = try #require(
            d.effects.reversed().lazy.compactMap { effect -> PresenceSnapshot? in
                if case .persistSnapshot(let s) = effect { return s } else { return nil }
            }.first)
        let saved = try #require(snapshot.session)
        #expect(saved.tStart == checkIn.tStart + Self.hour)
        #expect(saved.lastPresentAt == lastSeen + Self.hour)
        #expect(snapshot.savedAt == lastSeen + Self.hour)

        // The new process's steady clock starts at the wall clock's reading (offset 0).
        let clock = ManualClock(lastSeen + Self.hour + 5_000)
        var relaunched = try DeviceHarness(config: Self.config, clock: clock, restoring: snapshot)
        #expect(relaunched.machine.openSession == saved)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        #expect(out.sessionKey == checkIn.sessionKey && out.tStart == saved.tStart)
        #expect(out.timestamp == saved.lastPresentAt)

        // A process whose steady clock reads an hour behind the clock it stamps with places the same
        // times through its offset: the check-out carries the snapshot's time.
        var behind = try DeviceHarness(
            config: Self.config, clock: ManualClock(lastSeen + 5_000), restoring: snapshot, clockOffsetMs: Self.hour)
        try behind.send(.appLaunched)
        try behind.run(seconds: 400) { _ in nil }
        #expect(behind.checkOuts.map(\.timestamp) == [saved.lastPresentAt])
    }

    @Test("restored times keep their stamps when the offset moves before presence is seen again")
    func offsetChangedAfterRestore() throws {
        // The previous process stamped with the server's clock, an hour ahead of the phone's own.
        var d = try DeviceHarness(config: Self.config)
        try d.send(.serverClockKnown(offsetMs: Self.hour, phoneAheadMs: -Self.hour))
        try d.arrive()
        try d.run(seconds: 5) { _ in -60 }
        let checkIn = try #require(d.checkIns.first)
        try d.run(seconds: 30) { _ in -62 }
        let snapshot = d.machine.snapshot(at: d.now)
        let saved = try #require(snapshot.session)
        #expect(saved.lastPresentAt == d.now + Self.hour)

        // Relaunched offline: it stamps with the phone's clock (offset 0) until the launch request is
        // answered, then with the server's again.
        var relaunched = try DeviceHarness(config: Self.config, clock: ManualClock(d.now + 5_000), restoring: snapshot)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 20) { _ in nil }
        try relaunched.send(.serverClockKnown(offsetMs: Self.hour, phoneAheadMs: -Self.hour))
        #expect(relaunched.machine.openSession == saved)
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        #expect(out.timestamp == saved.lastPresentAt && out.tStart == checkIn.tStart)

        // Presence seen again takes over: a later offset change moves only what comes after.
        var resumed = try DeviceHarness(config: Self.config, clock: ManualClock(d.now + 5_000), restoring: snapshot)
        try resumed.send(.appLaunched)
        try resumed.run(seconds: 5) { _ in -60 }
        #expect(resumed.phase == .present)
        let heardAt = resumed.now
        try resumed.send(.serverClockKnown(offsetMs: Self.hour, phoneAheadMs: -Self.hour))
        #expect(resumed.machine.session?.tStart == checkIn.tStart - Self.hour)
        try resumed.run(seconds: 400) { _ in nil }
        let resumedOut = try #require(resumed.checkOuts.first)
        #expect(resumedOut.timestamp == heardAt + Self.hour)
    }

    @Test("the kill switch keeps the wall clock's setting")
    func killSwitch() throws {
        var d = try Self.checkedIn()
        var off = Self.config
        off.flags.killSwitch = true
        try d.record(d.agent.apply(config: off, at: d.now))
        try d.send(.clockOffsetChanged(offsetMs: 90_000))
        #expect(d.machine.clockOffsetMs == 90_000)
        #expect(d.machine.snapshot(at: d.now).savedAt == d.now + 90_000)
    }

    @Test("SteadyClock starts at the wall clock and does not go back")
    func steadyClock() {
        let clock = SteadyClock()
        #expect(abs(clock.wallClockOffsetMs()) < 1_000)
        var last = clock.now()
        for _ in 0..<1_000 {
            let now = clock.now()
            #expect(now >= last)
            last = now
        }
    }
}
