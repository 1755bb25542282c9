import PropertyBased
import Testing

@testable import PresenceKit

/// The shipped defaults, as a phone app gets them with `PresenceConfig()`, and the rules the detection
/// sweep asked for.
@Suite("Shipped defaults")
struct DefaultsTests {
    @Test("the defaults are the swept ones: continuous scan, geofence-exit check-out, -65 / -75 / -85 dBm")
    func defaults() throws {
        let c = try PresenceConfig().validated()
        #expect(c.flags.continuousScan && c.checkOutTrigger == .geofenceExit)
        #expect(c.enterRssi == -65 && c.leaveRssi == -75 && c.dwellEnterRssi == -85)
        #expect(c.minReadings == 3 && c.softExitGraceMs == 180_000)
        // An empty remote config is exactly the defaults.
        #expect(try RemoteConfig.decode("{}").presence == c)
    }

    @Test(
        "a walk-in with the defaults: check-in at the door, nothing while the desk is out of range, check-out on leaving the geofence stamped with the walk out"
    )
    func walkInWithDefaults() throws {
        var d = try DeviceHarness.arriving(PresenceConfig())
        #expect(d.isScanning)
        let readings = [-80, -74, -68, -62, -60, -61]
        try d.run(seconds: readings.count) { readings[$0] }
        #expect(d.checkIns.count == 1)
        // To the desk, out of range for hours: no check-out (the gate beacon is behind the wall).
        try d.send(.motionActivity(.stationary))
        try d.run(seconds: 4 * 3_600) { _ in nil }
        #expect(d.checkOuts.isEmpty)
        // The walk out past the gate: weak readings only (a cold phone), then out of the geofence 3 min later.
        try d.send(.motionActivity(.walking))
        let walkOut = d.now
        try d.run(seconds: 4) { _ in -82 }
        try d.run(seconds: 180) { _ in nil }
        try d.send(.geofenceExited(siteId: "S_HQ"))
        let out = try #require(d.checkOuts.first)
        #expect(out.reason == .geofenceExit)
        #expect(out.timestamp == walkOut + 4_000, "the last reading of the site dates the departure, not the arrival")
    }

    @Test("with an enter hold, strong evidence checks in once it has held, stamped with its first moment; a dip starts the hold again")
    func enterHold() throws {
        #expect(PresenceConfig().enterHoldMs == 0, "the default checks in at the first passing reading")
        var config = PresenceConfig()
        config.enterHoldMs = 3_000
        var d = try DeviceHarness.arriving(config)
        // A shadow peak on the approach: strong for two seconds, then weak again. No check-in.
        let peak = [-80, -62, -62, -62, -80, -80, -80]
        try d.run(seconds: peak.count) { peak[$0] }
        #expect(d.checkIns.isEmpty)
        // At the door: strong from the first reading on, and checked in three seconds later.
        try d.run(seconds: 2) { _ in -60 }
        let first = d.now
        #expect(d.checkIns.isEmpty)
        try d.run(seconds: 4) { _ in -60 }
        let checkIn = try #require(d.checkIns.first)
        #expect(d.checkIns.count == 1)
        #expect(checkIn.timestamp <= first, "stamped when the evidence began, not when the hold ended")
    }

    @Test("with an at-once level, strong evidence that reaches it checks in without the hold; weaker strong evidence is held")
    func conditionalEnterHold() throws {
        #expect(PresenceConfig().enterAtOnceRssi == 0, "the default holds all strong evidence (when a hold is set)")
        var config = PresenceConfig()
        config.enterHoldMs = 3_000
        config.enterAtOnceRssi = -62
        // A walk-past: strong (above -65), but under -62, for two seconds. No check-in.
        var passer = try DeviceHarness.arriving(config)
        let pass = [-80, -63, -64, -63, -80, -80, -80]
        try passer.run(seconds: pass.count) { pass[$0] }
        #expect(passer.checkIns.isEmpty)
        // The same level at the door for longer: the second reading is strong (the median of three
        // passes), and three seconds later the check-in is stamped with that reading.
        let door = passer.now
        try passer.run(seconds: 6) { _ in -64 }
        #expect(passer.checkIns.count == 1)
        #expect(try #require(passer.checkIns.first).timestamp == door + 2_000)
        // At the beacon: the third reading at -60 checks in at once, held by nothing.
        var atDoor = try DeviceHarness.arriving(config)
        try atDoor.run(seconds: 3) { _ in -60 }
        #expect(atDoor.checkIns.count == 1)
    }

    @Test("evidence that reaches the at-once level during a hold ends the hold, stamped with the hold's start")
    func atOnceLevelDuringAHold() throws {
        var config = PresenceConfig()
        config.enterHoldMs = 5_000
        config.enterAtOnceRssi = -62
        var d = try DeviceHarness.arriving(config)
        let start = d.now
        // Strong from the third reading (median -63), held; the smoothed level (median of five) reaches
        // -62 only at the sixth reading, three seconds into a five-second hold.
        let approach = [-80, -63, -63, -50, -50]
        try d.run(seconds: approach.count) { approach[$0] }
        #expect(d.checkIns.isEmpty)
        try d.run(seconds: 1) { _ in -50 }
        #expect(d.checkIns.count == 1)
        #expect(try #require(d.checkIns.first).timestamp == start + 3_000)
    }

    @Test("a cold phone under the enter threshold checks in when it comes to rest (dwell)")
    func coldPhoneDwell() throws {
        var d = try DeviceHarness.arriving(PresenceConfig())
        try d.run(seconds: 5) { _ in -72 }
        #expect(d.checkIns.isEmpty)
        try d.send(.motionActivity(.stationary))
        #expect(d.checkIns.count == 1)
    }

    @Test("a stationary person inside the geofence is never checked out by weak RSSI alone (check-out on beacon loss)")
    func restingIsNeverCheckedOutByWeakSignal() async throws {
        // After the check-in the person walks to a seat and rests there; the radio then does anything:
        // weak readings, silence, zeros, region exits and state answers, for hours.
        let level = Gen.int(in: 0...5)
        let step = zip(level, Gen.int(in: 1...400), Gen.int(in: 0...9))
        await propertyCheck(count: 120, input: Gen.int(in: 0...3), step.array(of: 1...40)) { bits, steps in
            var c = PresenceConfig()
            c.checkOutTrigger = .beaconLoss
            c.flags.continuousScan = bits & 1 != 0
            if bits & 2 != 0 { c.softExitGraceMs = 10_000; c.exitConfirmationMs = 3_000 }
            var d = try DeviceHarness.arriving(c)
            try d.send(.beaconRegionEntered)
            try d.run(seconds: 4) { _ in -58 }
            #expect(d.checkIns.count == 1)
            try d.run(seconds: 5) { _ in -84 } // the walk to the seat, losing the signal
            try d.send(.motionActivity(.stationary))
            for (kind, seconds, os) in steps {
                let rssi: Int? = [nil, 0, -80, -88, -95, -76][kind]
                try d.run(seconds: seconds) { _ in rssi }
                switch os {
                case 0: try d.send(.beaconRegionExited)
                case 1: try d.send(.beaconRegionState(inside: false))
                case 2: try d.send(.periodicWake)
                default: break
                }
            }
            try d.run(seconds: 600) { _ in nil }
            #expect(d.checkOuts.isEmpty, "steps \(steps)")
            // Walking away ends it: the next grace after the walk checks out.
            try d.send(.motionActivity(.walking))
            try d.send(.beaconRegionExited)
            try d.run(seconds: 700) { _ in nil }
            #expect(d.checkOuts.count == 1)
        }
    }
}

@Suite("Passing by")
struct PassingByTests {
    @Test("a runner or a cyclist passing right by the door does not check in; slowing to a walk at the door does")
    func runnersAndCyclists() throws {
        for activity in [MotionActivity.running, .cycling] {
            var d = try DeviceHarness(config: PresenceConfig())
            try d.send(.geofenceEntered(siteId: "S_HQ"))
            try d.send(.motionActivity(activity))
            try d.run(seconds: 6) { _ in -58 }
            #expect(d.checkIns.isEmpty, "\(activity)")
            try d.send(.motionActivity(.walking))
            try d.run(seconds: 2) { _ in -58 }
            #expect(d.checkIns.count == 1, "\(activity)")
        }
    }
}
