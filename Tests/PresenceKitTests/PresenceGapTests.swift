import Foundation
import Testing

@testable import PresenceKit

/// A session the phone could not watch (switched off, killed, suspended) for longer than the server
/// joins presence to a session (`PresenceStateMachine.serverIdleCutoffMs`) is not resumed: it ends at
/// its last presence, and the presence found after the gap gets a check-in of its own.
@Suite("Presence after a gap the session cannot span")
struct PresenceGapTests {
    static let hour: Int64 = 3_600_000

    /// Arrives, stays `seconds` at the gate, and returns the session's key and last moment of presence.
    static func present(_ d: inout DeviceHarness, seconds: Int = 120) throws -> (key: String, lastPresent: Timestamp) {
        try d.arrive()
        try d.run(seconds: seconds) { _ in -61 }
        let key = try #require(d.checkIns.first?.sessionKey)
        return (key, try #require(d.machine.openSession?.lastPresentAt))
    }

    @Test(
        "the phone died in the evening and is back at the beacon the next morning",
        arguments: ScanStyle.allCases, [CheckOutTrigger.beaconLoss, .geofenceExit])
    func relaunchTheNextMorning(style: ScanStyle, trigger: CheckOutTrigger) throws {
        try withTempDir { dir in
            let clock = ManualClock(World.start)
            let path = dir + "/outbox.wal"
            var session: (key: String, lastPresent: Timestamp)
            do {
                let outbox = try Outbox(path: path, clock: clock)
                var d = try DeviceHarness(config: config(style, trigger), clock: clock, outbox: outbox)
                session = try Self.present(&d)
                outbox.close() // the battery runs out: no termination event
            }
            clock.advance(by: 14 * Self.hour)
            let outbox = try Outbox(path: path, clock: clock)
            var d = try DeviceHarness(
                config: config(style, trigger), clock: clock, outbox: outbox, restoring: outbox.lastSnapshot())
            let lastStored = try #require(outbox.lastSnapshot()?.session?.lastPresentAt)
            #expect(lastStored <= session.lastPresent)
            try d.send(.appLaunched)
            try d.send(.motionActivity(.walking)) // the person walks in
            try d.send(.beaconRegionEntered)
            try d.runScanning(seconds: 120) { _ in [(World.gateA, -61)] }
            let out = try #require(d.checkOuts.first, "the evening's session is checked out")
            #expect(out.sessionKey == session.key && out.reason == .presenceGap)
            #expect(out.timestamp == lastStored, "at its last presence the phone stored, not at the morning's")
            let checkIn = try #require(d.checkIns.first, "the morning gets a check-in of its own")
            #expect(checkIn.sessionKey != session.key && checkIn.timestamp >= clock.now() - 120_000)
            #expect(d.heartbeats.allSatisfy { $0.sessionKey != session.key }, "nothing more under the old key")
            #expect(d.phase == .present && d.machine.openSession?.sessionKey == checkIn.sessionKey)
            let stored = try outbox.entries().map { try PresenceCoding.decodeEvent(outbox.payload(of: $0.id)) }
            #expect(attendanceViolations(stored).isEmpty)
        }
    }

    @Test("geofence-exit policy: a session left open after the relaunch's grace starts over too", arguments: ScanStyle.allCases)
    func openSessionUnderGeofenceExitStartsOver(style: ScanStyle) throws {
        var d = try DeviceHarness(config: config(style, .geofenceExit))
        let session = try Self.present(&d)
        try d.send(.beaconRegionExited)
        try d.runScanning(seconds: 600) { _ in [] } // signal lost: the session stays open, in `armed`
        #expect(d.checkOuts.isEmpty && d.phase == .armed && d.machine.openSession?.sessionKey == session.key)
        try d.advance(ms: 14 * Self.hour)
        try d.send(.motionActivity(.walking))
        try d.send(.beaconRegionEntered)
        try d.runScanning(seconds: 120) { _ in [(World.gateA, -61)] }
        let out = try #require(d.checkOuts.first)
        #expect(out.sessionKey == session.key && out.reason == .presenceGap && out.timestamp <= session.lastPresent + 600_000)
        let checkIn = try #require(d.checkIns.dropFirst().first, "a new check-in in the morning")
        #expect(checkIn.sessionKey != session.key && d.machine.openSession?.sessionKey == checkIn.sessionKey)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("a relaunch within the gap the server joins resumes the same session", arguments: ScanStyle.allCases)
    func relaunchWithinTheGapResumes(style: ScanStyle) throws {
        try withTempDir { dir in
            let clock = ManualClock(World.start)
            let path = dir + "/outbox.wal"
            var key = ""
            do {
                let outbox = try Outbox(path: path, clock: clock)
                var d = try DeviceHarness(config: config(style), clock: clock, outbox: outbox)
                key = try Self.present(&d).key
                outbox.close()
            }
            clock.advance(by: 11 * Self.hour)
            let outbox = try Outbox(path: path, clock: clock)
            var d = try DeviceHarness(config: config(style), clock: clock, outbox: outbox, restoring: outbox.lastSnapshot())
            try d.send(.appLaunched)
            try d.send(.motionActivity(.walking))
            try d.send(.beaconRegionEntered)
            try d.runScanning(seconds: 700) { _ in [(World.gateA, -61)] }
            #expect(d.checkOuts.isEmpty && d.checkIns.isEmpty)
            #expect(!d.heartbeats.isEmpty && d.heartbeats.allSatisfy { $0.sessionKey == key })
        }
    }

    @Test("a phone suspended overnight while present sends no heartbeat for the old session")
    func suspendedOvernightWithoutContinuousScanning() throws {
        var d = try DeviceHarness(config: config(.ranging))
        let session = try Self.present(&d)
        let heartbeatsBefore = d.heartbeats.count
        // Suspended: no timer fires until the morning, when the overdue ones fire at once (the person
        // walks in; the motion coprocessor wakes the app).
        try d.advance(ms: 14 * Self.hour)
        #expect(d.heartbeats.count == heartbeatsBefore, "no heartbeat 14 hours on under the evening's key")
        #expect(d.phase == .softExitPending && d.isScanning, "the beacon must be heard again")
        try d.send(.motionActivity(.walking))
        try d.runScanning(seconds: 120) { _ in [(World.gateA, -61)] }
        let out = try #require(d.checkOuts.first)
        #expect(out.sessionKey == session.key && out.reason == .presenceGap && out.timestamp == session.lastPresent)
        let checkIn = try #require(d.checkIns.dropFirst().first, "a new check-in in the morning")
        #expect(checkIn.sessionKey != session.key)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("suspended overnight and gone in the morning: checked out at the last presence")
    func suspendedOvernightAndGone() throws {
        var d = try DeviceHarness(config: config(.ranging))
        let session = try Self.present(&d)
        try d.advance(ms: 14 * Self.hour)
        try d.runScanning(seconds: 900) { _ in [] }
        let out = try #require(d.checkOuts.first)
        #expect(out.sessionKey == session.key && out.timestamp == session.lastPresent)
        #expect(d.checkIns.count == 1 && d.machine.openSession == nil)
    }
}
