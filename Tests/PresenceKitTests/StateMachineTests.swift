import Testing

@testable import PresenceKit

@Suite("Presence state machine")
struct StateMachineTests {
    static let continuous = World.config { $0.flags.continuousScan = true }

    @Test("enter above -70, leave at or below -75: the band in between changes nothing")
    func hysteresis() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        #expect(d.phase == .armed && d.scanning == [.continuous])
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.count == 1 && d.phase == .present)
        try d.run(seconds: 60) { _ in -72 }
        #expect(d.phase == .present)
        try d.run(seconds: 5) { _ in -80 }
        #expect(d.phase == .softExitPending)
        try d.run(seconds: 2) { _ in -73 } // heard above the leave threshold again: the dip was noise
        #expect(d.phase == .present)
        try d.run(seconds: 300) { _ in -85 }
        #expect(d.checkOuts.count == 1 && d.phase == .armed)
        try d.send(.motionActivity(.walking))
        try d.run(seconds: 60) { _ in -72 } // in the band: no new session
        #expect(d.checkIns.count == 1)
        try d.run(seconds: 3) { _ in -66 }
        #expect(d.checkIns.count == 2)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("weak evidence at the gate checks in only when the device then comes to rest, stamped at the gate")
    func dwellConfirmation() throws {
        // A weak phone in a shadow right at the door: the median stays between -80 and -70.
        var arrived = try DeviceHarness(config: Self.continuous)
        try arrived.arrive()
        let atGate = arrived.now + 1_000
        try arrived.run(seconds: 6) { _ in -74 }
        #expect(arrived.checkIns.isEmpty && arrived.phase == .armed)
        try arrived.run(seconds: 30) { _ in nil } // walks in to the desk, out of range
        try arrived.send(.motionActivity(.stationary))
        let checkIn = try #require(arrived.checkIns.first)
        #expect(arrived.checkIns.count == 1 && arrived.phase == .present)
        #expect(checkIn.tStart == atGate + 2_000 && checkIn.timestamp == checkIn.tStart) // the third reading
        #expect(checkIn.decidedAt == arrived.now)

        // Walking in past another gate of the site, heard weakly near the desk: the check-in names the
        // gate the person came through (the strongest evidence), not the last one heard.
        var throughA = try DeviceHarness(config: Self.continuous)
        try throughA.arrive()
        try throughA.run(seconds: 6) { _ in [(World.gateA, -72), (World.gateB, -84)] }
        try throughA.run(seconds: 20) { _ in [(World.gateA, nil), (World.gateB, -80)] }
        try throughA.send(.motionActivity(.stationary))
        #expect(throughA.checkIns.map(\.beacon.minor) == [World.gateA.minor])

        // A passer-by heard at the same level keeps walking: no check-in, and a stop after the dwell
        // window is not a stop at the gate.
        var passerBy = try DeviceHarness(config: Self.continuous)
        try passerBy.arrive()
        try passerBy.run(seconds: 6) { _ in -74 }
        try passerBy.run(seconds: 121) { _ in nil }
        try passerBy.send(.motionActivity(.stationary))
        #expect(passerBy.checkIns.isEmpty && passerBy.phase == .armed)

        // Leaving the geofence drops the evidence; below the dwell level there is none; 0 disables it.
        var left = try DeviceHarness(config: Self.continuous)
        try left.arrive()
        try left.run(seconds: 6) { _ in -74 }
        try left.send(.geofenceExited(siteId: "S_HQ"))
        try left.run(seconds: 11) { _ in nil } // readings of the beacon go stale too
        try left.send(.geofenceEntered(siteId: "S_HQ"))
        try left.send(.motionActivity(.stationary))
        #expect(left.checkIns.isEmpty)
        var far = try DeviceHarness(config: Self.continuous)
        try far.arrive()
        try far.run(seconds: 6) { _ in -82 }
        try far.send(.motionActivity(.stationary))
        #expect(far.checkIns.isEmpty)
        var off = try DeviceHarness(
            config: World.config {
                $0.flags.continuousScan = true; $0.dwellWindowMs = 0
            })
        try off.arrive()
        try off.run(seconds: 6) { _ in -74 }
        try off.send(.motionActivity(.stationary))
        #expect(off.checkIns.isEmpty)
        #expect(throws: ConfigValidationError.self) {
            try PresenceStateMachine(
                config: World.config { $0.dwellEnterRssi = -65 }, directory: World.directory,
                identity: DeviceIdentity(userId: "u", deviceId: "d"))
        }
    }

    @Test("a phone walking into the bubble (readings rising 5-6 dB a second) checks in without waiting")
    func approachIsConfident() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { s in [-76, -68, -61][s] } // std-dev 7.5 dB: the first specified 6 dB bound refused it
        #expect(d.checkIns.count == 1)
    }

    @Test("3-minute debounce, then confirmation, then check-out stamped with the last moment of presence")
    func debounce() throws {
        var d = try DeviceHarness(config: Self.continuous)
        let t0 = d.now
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.first?.tStart == t0 + 3_000)
        #expect(d.checkIns.first?.timestamp == t0 + 3_000)
        try d.run(seconds: 100) { _ in -60 }
        try d.run(seconds: 185) { _ in -90 }
        #expect(d.phase == .confirmingExit) // soft exit at +106 s, grace to +286 s
        #expect(d.effects.contains(.requestRegionState))
        #expect(d.checkOuts.isEmpty)
        try d.run(seconds: 20) { _ in -90 }
        let out = try #require(d.checkOuts.first)
        #expect(out.decidedAt == t0 + 296_000)
        #expect(out.timestamp == t0 + 105_000)
        #expect(out.tStart == t0 + 3_000)
        #expect(out.reason == .beaconLost)
        try #require(d.checkIns.count > 0)
        #expect(out.sessionKey == d.checkIns[0].sessionKey)
        #expect(d.notifications.map(\.kind) == [.checkedIn, .checkedOut])
    }

    @Test("debounce and thresholds are configurable")
    func configurable() throws {
        var d = try DeviceHarness(
            config: World.config {
                $0.flags.continuousScan = true
                $0.softExitGraceMs = 60_000
                $0.exitConfirmationMs = 0
            })
        let t0 = d.now
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        try d.run(seconds: 100) { _ in -90 }
        #expect(d.checkOuts.first?.decidedAt == t0 + 66_000) // soft exit at +6 s, 60 s grace, no confirmation
        var strict = try DeviceHarness(
            config: World.config {
                $0.flags.continuousScan = true
                $0.enterRssi = -60
                $0.leaveRssi = -65
            })
        try strict.arrive()
        try strict.run(seconds: 10) { _ in -62 }
        #expect(strict.checkIns.isEmpty)
        try strict.run(seconds: 3) { _ in -58 }
        #expect(strict.checkIns.count == 1)
        #expect(throws: ConfigValidationError.self) {
            try PresenceStateMachine(
                config: World.config { $0.leaveRssi = -60 }, directory: World.directory,
                identity: DeviceIdentity(userId: "u", deviceId: "d"))
        }
    }

    @Test("exit confirmation: inside resumes the session, outside checks out at once")
    func confirmation() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        for _ in 0..<300 where d.phase != .confirmingExit { try d.run(seconds: 1) { _ in -90 } }
        #expect(d.phase == .confirmingExit)
        try d.send(.beaconRegionState(inside: true))
        #expect(d.phase == .present && d.checkOuts.isEmpty)
        for _ in 0..<300 where d.phase != .confirmingExit { try d.run(seconds: 1) { _ in -90 } }
        try d.send(.beaconRegionState(inside: false))
        try #require(d.checkOuts.count > 0)
        #expect(d.checkOuts.count == 1 && d.checkOuts[0].reason == .regionStateOutside)
        #expect(d.phase == .armed)
    }

    @Test("periodic fallback skips while the continuous scan runs and restarts it when it stopped")
    func periodicFallback() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        let skipped = try d.send(.periodicWake)
        #expect(skipped == [.log(.info, "periodic fallback skipped: continuous scan is active")])
        try d.send(.scanningStopped(.continuous))
        #expect(!d.machine.continuousScanActive)
        let restarted = try d.send(.periodicWake)
        #expect(restarted.contains(.startScanning(.continuous)) && restarted.contains(.drainOutbox))
        #expect(d.machine.continuousScanActive)
        var outside = try DeviceHarness()
        #expect(try outside.send(.periodicWake) == [.log(.info, "periodic fallback skipped: outside every geofence")])
        var ranging = try DeviceHarness()
        try ranging.arrive()
        let fx = try ranging.send(.periodicWake)
        #expect(fx.contains(.startScanning(.ranging)) && ranging.phase == .candidate)
    }

    /// A device with no persisted user id, arrived and present at the gate: nothing posted.
    static func presentWithoutUser() throws -> DeviceHarness {
        var d = try DeviceHarness(config: Self.continuous, userId: nil)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.phase == .present && d.posts.isEmpty)
        return d
    }

    @Test("no persisted user id: attendance effects are skipped with a warning")
    func missingUserId() throws {
        var d = try Self.presentWithoutUser()
        #expect(d.logs.contains { $0.0 == .warning && $0.1 == "check-in at S_HQ skipped: no persisted user id" })
        try d.run(seconds: 300) { _ in -90 }
        #expect(d.posts.isEmpty && d.phase == .armed)
        #expect(d.logs.contains { $0.0 == .warning && $0.1.contains("check-out at S_HQ skipped") })
        try d.send(.userIdChanged("u_9"))
        try d.send(.motionActivity(.walking))
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.map(\.userId) == ["u_9"])
    }

    @Test("a user change closes the open session for the previous user")
    func userChange() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        try d.send(.userIdChanged("u_other"))
        #expect(d.checkOuts.map(\.userId) == ["u_123"])
        #expect(d.checkOuts.first?.reason == .userChanged)
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.map(\.userId) == ["u_123", "u_other"])
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    /// A shared phone handed over at a shift change, six hours after its user's arrival at a desk out of
    /// the gate's range: the previous user is checked out at the hand-over (present until then, as the
    /// heartbeats said), under their own enrollment; the next user's events carry the new enrollment.
    @Test("a shared phone handed over: the previous user checks out at the hand-over, the next user's events carry the new enrollment")
    func sharedPhoneHandedOver() throws {
        var d = try DeviceHarness(deviceId: "d_first")
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.map(\.deviceId) == ["d_first"])
        try d.send(.motionActivity(.stationary))
        try d.run(seconds: 6 * 3_600) { _ in nil }
        #expect(d.phase == .present)
        let handOver = d.now
        try d.send(.userIdChanged("u_next", deviceId: "d_next"))
        let out = try #require(d.checkOuts.last)
        #expect(out.userId == "u_123" && out.deviceId == "d_first" && out.reason == .userChanged)
        #expect(out.timestamp == handOver)
        #expect(d.machine.identity == DeviceIdentity(userId: "u_next", deviceId: "d_next"))
        try d.send(.motionActivity(.walking))
        try d.run(seconds: 3) { _ in -60 }
        let next = try #require(d.checkIns.last)
        #expect(next.userId == "u_next" && next.deviceId == "d_next")
        // The same user enrolled anew: no check-out; the open session's events keep the enrollment it was
        // opened under, the next session's carry the new one.
        try d.send(.userIdChanged("u_next", deviceId: "d_next_again"))
        #expect(d.checkOuts.count == 1 && d.machine.identity.deviceId == "d_next_again")
        #expect(attendanceViolations(d.posts).isEmpty)

        // Handed over between two runs: the app starts as the next person's enrollment; the session it
        // restores is checked out under the enrollment it was opened with.
        let snapshot = d.machine.snapshot(at: d.now)
        var relaunched = try DeviceHarness(userId: "u_third", deviceId: "d_third", clock: ManualClock(d.now + 60_000), restoring: snapshot)
        try relaunched.send(.appLaunched)
        let previous = try #require(relaunched.checkOuts.first)
        #expect(previous.userId == "u_next" && previous.deviceId == "d_next" && previous.reason == .userChanged)
    }

    @Test("a user change while the kill switch is on: the new user inherits no session, the previous user's ends unposted")
    func userChangeUnderTheKillSwitch() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.map(\.userId) == ["u_123"])
        var killed = Self.continuous
        killed.flags.killSwitch = true
        try d.record(d.agent.apply(config: killed, at: d.now))
        try d.send(.userIdChanged("u_other"))
        #expect(d.machine.openSession == nil)
        try d.record(d.agent.apply(config: Self.continuous, at: d.now))
        try d.run(seconds: 600) { _ in -60 }
        // No heartbeat of u_123's session from u_other's phone: u_other checks in.
        #expect(d.heartbeats.allSatisfy { $0.userId == "u_other" })
        #expect(d.checkIns.map(\.userId) == ["u_123", "u_other"])
    }

    @Test("a session restored under another user (a login or a logout between two runs) is handled as a user change")
    func relaunchUnderAnotherUser() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        let snapshot = d.machine.snapshot(at: d.now)
        var other = try DeviceHarness(config: Self.continuous, userId: "u_other", clock: ManualClock(d.now + 60_000), restoring: snapshot)
        try other.send(.appLaunched)
        #expect(other.checkOuts.map(\.userId) == ["u_123"] && other.checkOuts.first?.reason == .userChanged)
        #expect(other.machine.openSession == nil)
        try other.send(.motionActivity(.walking))
        try other.run(seconds: 3) { _ in -60 }
        #expect(other.checkIns.map(\.userId) == ["u_other"])
        // Under the kill switch: the previous user's session ends unposted.
        var killed = Self.continuous
        killed.flags.killSwitch = true
        var underSwitch = try DeviceHarness(config: killed, userId: "u_other", clock: ManualClock(d.now + 60_000), restoring: snapshot)
        try underSwitch.send(.appLaunched)
        #expect(underSwitch.posts.isEmpty && underSwitch.machine.openSession == nil)
        // The same user relaunched: the session goes on.
        var same = try DeviceHarness(config: Self.continuous, clock: ManualClock(d.now + 60_000), restoring: snapshot)
        try same.send(.appLaunched)
        #expect(same.posts.isEmpty && same.machine.openSession != nil)
    }

    @Test("GATT challenge: ok checks in with the handshake, failure or timeout does not")
    func gatt() throws {
        let config = World.config {
            $0.flags.continuousScan = true
            $0.flags.gattChallenge = true
        }
        var ok = try DeviceHarness(config: config)
        try ok.arrive()
        try ok.run(seconds: 3) { _ in -60 }
        #expect(ok.effects.contains(.performGattChallenge(World.gateA)))
        #expect(ok.phase == .verifying && ok.checkIns.isEmpty)
        try ok.send(.gattChallengeResult(ok: true, roundTripMs: 180))
        #expect(ok.checkIns.first?.handshake == AttendanceEvent.Handshake(ok: true, rt: 180))

        var fail = try DeviceHarness(config: config)
        try fail.arrive()
        try fail.run(seconds: 3) { _ in -60 }
        try fail.send(.gattChallengeResult(ok: false, roundTripMs: 0))
        #expect(fail.checkIns.isEmpty && fail.phase == .armed)
        let challenges = { (d: DeviceHarness) in
            d.effects.filter {
                if case .performGattChallenge = $0 { return true }; return false
            }.count
        }
        try fail.run(seconds: 20) { _ in -60 }
        #expect(challenges(fail) == 1) // cooling down
        try fail.run(seconds: 15) { _ in -60 }
        #expect(challenges(fail) == 2)

        var slow = try DeviceHarness(config: config)
        try slow.arrive()
        try slow.run(seconds: 3) { _ in -60 }
        try slow.advance(ms: 3_000)
        #expect(slow.logs.contains { $0.1.hasPrefix("GATT challenge timed out") })
        #expect(slow.checkIns.isEmpty)
    }

    @Test("kill switch stops detection")
    func killSwitch() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        var off = Self.continuous
        off.flags.killSwitch = true
        let fx = try d.agent.apply(config: off, at: d.now)
        #expect(fx.contains(.stopScanning(.continuous)))
        try d.run(seconds: 10) { _ in -60 }
        #expect(d.posts.isEmpty)
    }

    @Test("a departure during the kill switch is not lost: the next day's arrival is a new check-in")
    func leavingDuringTheKillSwitch() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.count == 1)
        var off = Self.continuous
        off.flags.killSwitch = true
        _ = try d.agent.apply(config: off, at: d.now)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.machine.openSession == nil && d.machine.insideSiteIds.isEmpty)
        #expect(d.posts.count == 1)
        _ = try d.agent.apply(config: Self.continuous, at: d.now)
        // The next morning.
        try d.run(seconds: 60) { _ in nil }
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.count == 2)
    }

    @Test("motion gate: near but not moving waits; walking or steps unlock at once")
    func motionGating() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.send(.geofenceEntered(siteId: "S_HQ"))
        try d.run(seconds: 10) { _ in -60 }
        #expect(d.checkIns.isEmpty)
        #expect(d.logs.filter { $0.1.contains("motion gate is closed") }.count == 1) // rate-limited
        let fx = try d.send(.motionActivity(.walking))
        #expect(
            fx.contains {
                if case .postCheckIn = $0 { return true }; return false
            })
        #expect(d.checkIns.first?.motion == AttendanceEvent.Motion(state: .walking, steps2min: 0))
        var s = try DeviceHarness(config: Self.continuous)
        try s.send(.geofenceEntered(siteId: "S_HQ"))
        try s.run(seconds: 5) { _ in -60 }
        try s.send(.steps(20))
        #expect(s.checkIns.isEmpty)
        try s.send(.steps(15))
        #expect(s.checkIns.first?.motion.steps2min == 35)
        var off = try DeviceHarness(
            config: World.config {
                $0.flags.continuousScan = true; $0.flags.motionGating = false
            })
        try off.send(.geofenceEntered(siteId: "S_HQ"))
        try off.run(seconds: 3) { _ in -60 }
        #expect(off.checkIns.count == 1)
    }

    @Test("co-location: a beacon only counts inside its own site's geofence")
    func coLocation() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.run(seconds: 5) { _ in -60 } // idle: nothing
        #expect(d.phase == .idle && d.effects.isEmpty)
        try d.arrive(site: "S_LAB")
        try d.run(seconds: 5) { _ in -60 } // HQ beacon, LAB geofence
        #expect(d.checkIns.isEmpty)
        #expect(d.logs.contains { $0.1.contains("not inside that site's geofence") })
        try d.run(seconds: 5, beacon: World.lab) { _ in -60 }
        #expect(d.checkIns.map(\.siteId) == ["S_LAB"])
        var free = try DeviceHarness(config: World.config { $0.flags.requireGeofence = false })
        #expect(free.phase == .armed)
        try free.send(.motionActivity(.walking))
        try free.send(.beaconRegionEntered)
        try free.runScanning(seconds: 4) { _ in [(World.gateA, -61)] }
        #expect(free.checkIns.count == 1)
        #expect(free.checkIns.first?.geofence.inside == false)
    }

    @Test("ranging mode: region enter → ranging burst → check-in → region exit → grace → confirmation → check-out")
    func rangingFlow() throws {
        var d = try DeviceHarness()
        try d.arrive()
        #expect(d.phase == .armed && !d.isScanning)
        let fx = try d.send(.beaconRegionEntered)
        #expect(fx.first == .drainOutbox && fx.contains(.startScanning(.ranging)))
        #expect(d.phase == .candidate)
        try d.runScanning(seconds: 3) { _ in [(World.gateA, -62)] }
        #expect(d.checkIns.count == 1 && d.phase == .present && !d.isScanning)
        let checkedInAt = d.now
        // 20 min, no readings (a host wakes for each timer): still present, heartbeats every 5 min
        for _ in 0..<4 { try d.advance(ms: 300_000) }
        #expect(d.phase == .present)
        #expect(d.heartbeats.map(\.timestamp) == (1...4).map { checkedInAt + Int64($0) * 300_000 })
        try #require(d.checkIns.count > 0)
        #expect(Set(d.heartbeats.map(\.sessionKey)) == [d.checkIns[0].sessionKey])
        let exitAt = d.now
        try d.send(.beaconRegionExited)
        #expect(d.phase == .softExitPending)
        try d.advance(ms: 180_000)
        #expect(d.phase == .confirmingExit && d.scanning == [.ranging])
        try d.runScanning(seconds: 12) { _ in [(World.gateA, nil)] }
        let out = try #require(d.checkOuts.first)
        #expect(out.timestamp == exitAt && out.reason == .beaconLost && d.phase == .armed && !d.isScanning)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("ranging window times out: no candidate, back to armed")
    func rangingTimeout() throws {
        var d = try DeviceHarness()
        try d.arrive()
        try d.send(.beaconRegionEntered)
        try d.runScanning(seconds: 10) { _ in [(World.gateA, -74)] }
        // Heard but not confident: the burst is extended (twice by default) before giving up.
        #expect(d.phase == .candidate && d.logs.contains { $0.1.hasPrefix("ranging window extended (1/2)") })
        try d.runScanning(seconds: 16) { _ in [(World.gateA, -74)] }
        #expect(d.phase == .armed && !d.isScanning && d.checkIns.isEmpty)
        #expect(d.logs.contains { $0.1.contains("no candidate") })
        #expect(d.now == World.start + 26_000)
        // Silence ends a window without extension.
        var quiet = try DeviceHarness()
        try quiet.arrive()
        try quiet.send(.beaconRegionEntered)
        try quiet.runScanning(seconds: 9) { _ in [] }
        #expect(quiet.phase == .armed && !quiet.isScanning)
    }

    @Test("stale or early timer firings are ignored")
    func staleTimers() throws {
        var m = try PresenceStateMachine(
            config: World.config(), directory: World.directory, identity: DeviceIdentity(userId: "u", deviceId: "d"), seed: 1)
        #expect(m.handle(.timerFired(.softExitGrace), at: World.start).isEmpty)
        _ = m.handle(.geofenceEntered(siteId: "S_HQ"), at: World.start)
        let fx = m.handle(.beaconRegionEntered, at: World.start)
        #expect(fx.contains(.scheduleTimer(.rangingWindow, at: World.start + 8_000)))
        #expect(m.handle(.timerFired(.rangingWindow), at: World.start + 7_999).isEmpty)
        #expect(m.phase == .candidate)
        #expect(!m.handle(.timerFired(.rangingWindow), at: World.start + 8_000).isEmpty)
        #expect(m.phase == .armed)
    }

    @Test("geofence-exit policy: losing the beacon only notifies; leaving the geofence checks out")
    func geofenceExitPolicy() throws {
        var d = try DeviceHarness(
            config: World.config {
                $0.flags.continuousScan = true
                $0.checkOutTrigger = .geofenceExit
            })
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        try d.run(seconds: 300) { _ in nil } // silence
        #expect(d.checkOuts.isEmpty && d.phase == .armed)
        #expect(d.notifications.map(\.kind) == [.checkedIn, .signalLost])
        #expect(d.machine.openSession != nil)
        try d.run(seconds: 5) { _ in -60 }
        #expect(d.phase == .present && d.checkIns.count == 1)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.checkOuts.first?.reason == .geofenceExit)
        #expect(d.phase == .idle && !d.isScanning)
        #expect(d.notifications.last?.kind == .leftArea)
    }

    @Test("a beacon of another site taking over checks out of the first site, then in at the second")
    func siteChange() throws {
        var d = try DeviceHarness(config: Self.continuous)
        try d.send(.geofenceEntered(siteId: "S_HQ"))
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        try d.send(.motionActivity(.walking))
        try d.run(seconds: 3) { _ in [(World.gateA, -60), (World.lab, -80)] }
        try d.run(seconds: 10) { _ in [(World.gateA, -85), (World.lab, -60)] }
        #expect(d.checkIns.map(\.siteId) == ["S_HQ", "S_LAB"])
        #expect(d.checkOuts.map(\.reason) == [.siteChanged])
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("a check-out whose beacon is no longer tracked (after a relaunch) carries no RSSI series, never an empty one")
    func noSeriesWithoutReadings() throws {
        let snapshot = PresenceSnapshot(
            session: SessionCheckpoint(
                sessionKey: "s-1", userId: "u_123", siteId: "S_HQ", beacon: World.gateA, tStart: World.start - 600_000,
                lastPresentAt: World.start - 60_000, checkInPosted: true),
            insideSiteIds: ["S_HQ"], savedAt: World.start - 60_000)
        var d = try DeviceHarness(config: Self.continuous, restoring: snapshot)
        try d.send(.appLaunched)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        let checkOut = try #require(d.checkOuts.first)
        #expect(checkOut.rssiSeries == nil)
        let json = String(decoding: PresenceCoding.encode(checkOut), as: UTF8.self)
        #expect(!json.contains("rssiSeries"))
        // An event stored with an empty series by an earlier version decodes without one.
        var stored = checkOut
        stored.rssiSeries = []
        #expect(try PresenceCoding.decodeEvent(PresenceCoding.encode(stored)).rssiSeries == nil)
        // With readings, the series is there.
        var live = try DeviceHarness(config: Self.continuous)
        try live.arrive()
        try live.run(seconds: 3) { _ in -60 }
        #expect(live.checkIns.first?.rssiSeries?.allSatisfy { $0 == -60 } == true)
    }

    @Test("a geofence exit after a relaunch that heard nothing of the site is dated by the exit, not by the presence before the relaunch")
    func geofenceExitAfterARelaunchIsDatedByTheExit() throws {
        // Checked in at 09:00; at the desk, out of the gate's range; the app killed during the day.
        let snapshot = PresenceSnapshot(
            session: SessionCheckpoint(
                sessionKey: "s-1", userId: "u_123", siteId: "S_HQ", beacon: World.gateA, tStart: World.start - 9 * 3_600_000,
                lastPresentAt: World.start - 9 * 3_600_000 + 60_000, checkInPosted: true),
            insideSiteIds: ["S_HQ"], savedAt: World.start - 8 * 3_600_000)
        var d = try DeviceHarness(config: Self.continuous, restoring: snapshot)
        // Relaunched by the OS for the geofence exit, at the end of the day.
        try d.send(.appLaunched)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        let checkOut = try #require(d.checkOuts.first)
        #expect(checkOut.reason == .geofenceExit)
        #expect(checkOut.timestamp == World.start)
    }

    @Test("a session opened with no user id is dropped when a user logs in: the user checks in at that site")
    func loginDuringUnpostedSession() throws {
        var d = try Self.presentWithoutUser()
        try d.send(.userIdChanged("u_9"))
        #expect(d.machine.openSession == nil)
        #expect(d.effects.last == .persistSnapshot(d.machine.snapshot(at: d.now)))
        try d.run(seconds: 3) { _ in -60 }
        #expect(d.checkIns.map(\.userId) == ["u_9"])
        #expect(d.checkOuts.isEmpty)
        #expect(d.machine.openSession?.checkInPosted == true)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.checkOuts.map(\.userId) == ["u_9"])
        #expect(attendanceViolations(d.posts).isEmpty)

        // Ranging bursts: the login starts a search at once while the region is inside.
        var ranging = try DeviceHarness(userId: nil)
        try ranging.arrive()
        try ranging.send(.beaconRegionEntered)
        try ranging.run(seconds: 3) { _ in -60 }
        #expect(ranging.phase == .present && ranging.posts.isEmpty && !ranging.isScanning)
        try ranging.send(.userIdChanged("u_9"))
        #expect(ranging.isScanning && ranging.phase == .candidate)
        try ranging.runScanning(seconds: 3) { _ in [(World.gateA, -60)] }
        #expect(ranging.checkIns.map(\.userId) == ["u_9"])

        // The same under the kill switch: the session is not kept for after it.
        var stopped = try DeviceHarness(config: Self.continuous, userId: nil)
        try stopped.arrive()
        try stopped.run(seconds: 3) { _ in -60 }
        var off = Self.continuous
        off.flags.killSwitch = true
        try stopped.record(try stopped.agent.apply(config: off, at: stopped.now))
        try stopped.send(.userIdChanged("u_9"))
        #expect(stopped.machine.openSession == nil)
        try stopped.record(try stopped.agent.apply(config: Self.continuous, at: stopped.now))
        try stopped.run(seconds: 3) { _ in -60 }
        #expect(stopped.checkIns.map(\.userId) == ["u_9"])
    }

    @Test("a new configuration ends the GATT retry cooldown")
    func gattCooldownEndsWithNewConfig() throws {
        let config = World.config {
            $0.flags.continuousScan = true
            $0.flags.gattChallenge = true
            $0.gattRetryCooldownMs = 600_000
        }
        var d = try DeviceHarness(config: config)
        try d.arrive()
        try d.run(seconds: 3) { _ in -60 }
        try d.send(.gattChallengeResult(ok: false, roundTripMs: 0))
        let challenges = { (d: DeviceHarness) in
            d.effects.filter {
                if case .performGattChallenge = $0 { return true }; return false
            }.count
        }
        try d.run(seconds: 5) { _ in -60 }
        #expect(challenges(d) == 1)
        var fixed = config
        fixed.gattRetryCooldownMs = 30_000
        try d.record(try d.agent.apply(config: fixed, at: d.now))
        try d.run(seconds: 1) { _ in -60 }
        #expect(challenges(d) == 2 && d.phase == .verifying)
    }

    @Test("a site change refused by the GATT cooldown leaves the open session as it was")
    func gattCooldownBeforeSiteChange() throws {
        let config = World.config {
            $0.flags.continuousScan = true
            $0.flags.gattChallenge = true
        }
        var machine = try PresenceStateMachine(
            config: config, directory: World.directory, identity: DeviceIdentity(userId: "u_123", deviceId: "d_456"), seed: 9)
        var now = World.start
        var effects: [PresenceEffect] = []
        func send(_ event: PresenceEvent) { effects += machine.handle(event, at: now) }
        send(.geofenceEntered(siteId: "S_HQ"))
        send(.geofenceEntered(siteId: "S_LAB"))
        send(.motionActivity(.walking))
        for _ in 0..<3 {
            now = now + 1_000
            send(.beaconReading(BeaconReading(beacon: World.gateA, rssi: -60)))
        }
        send(.gattChallengeResult(ok: true, roundTripMs: 120))
        #expect(machine.openSession?.siteId == "S_HQ")
        machine.gattCooldownUntil = now + 60_000 // a challenge failed moments ago
        for _ in 0..<6 {
            now = now + 1_000
            send(.beaconReading(BeaconReading(beacon: World.gateA, rssi: -95)))
            send(.beaconReading(BeaconReading(beacon: World.lab, rssi: -60)))
        }
        #expect(machine.phase == .softExitPending)
        #expect(machine.openSession?.siteId == "S_HQ")
        let checkOuts = { effects.compactMap { if case .postCheckOut(let e) = $0 { e } else { nil } } }
        #expect(checkOuts().isEmpty)
        // Once the cooldown is over, the other site takes over as usual.
        now = now + 60_000
        for _ in 0..<3 {
            now = now + 1_000
            send(.beaconReading(BeaconReading(beacon: World.lab, rssi: -60)))
        }
        #expect(checkOuts().map(\.reason) == [.siteChanged])
        #expect(effects.contains(.performGattChallenge(World.lab)))
        #expect(machine.phase == .verifying)
    }
}
