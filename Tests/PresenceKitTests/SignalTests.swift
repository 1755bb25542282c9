import Testing

@testable import PresenceKit

@Suite("RSSI smoothing")
struct RssiSmootherTests {
    @Test("0 and 127 are missing data, never a strong signal")
    func ignoresMissingReadings() {
        var s = RssiSmoother(window: 5)
        let r1 = s.add(-80)
        #expect(r1)
        let r2 = s.add(0)
        #expect(!r2)
        let r3 = s.add(127)
        #expect(!r3)
        let r4 = s.add(5)
        #expect(!r4)
        let r5 = s.add(-128)
        #expect(!r5)
        let r6 = s.add(-82)
        #expect(r6)
        #expect(s.count == 2)
        #expect(s.median == -81)
        #expect(s.samples == [-80, -82])
        #expect(!Rssi.isValid(0) && !Rssi.isValid(127) && Rssi.isValid(-1) && Rssi.isValid(-127))
    }

    @Test("median and sample standard deviation over a sliding window")
    func medianAndDeviation() {
        var s = RssiSmoother(window: 5)
        for v in [-70, -60, -80, -65, -75] { s.add(v) }
        #expect(s.median == -70)
        #expect(s.mean == -70)
        // sample sd of [-70,-60,-80,-65,-75] = sqrt(250/4) = 7.9057
        #expect(abs(s.standardDeviation - 7.9057) < 0.001)
        s.add(-50) // evicts -70
        #expect(s.samples == [-60, -80, -65, -75, -50])
        #expect(s.median == -65)
        #expect(s.count == 5)
        var even = RssiSmoother(window: 4)
        for v in [-60, -70, -64, -66] { even.add(v) }
        #expect(even.median == -65)
        var one = RssiSmoother(window: 3)
        one.add(-61)
        #expect(one.standardDeviation == 0 && one.median == -61)
    }

    @Test("window of 16 wraps many times and stays exact")
    func longRun() {
        var s = RssiSmoother(window: 16)
        var reference: [Int] = []
        for i in 0..<1_000 {
            let v = -40 - (i * 37 % 60)
            s.add(v)
            reference.append(v)
            if reference.count > 16 { reference.removeFirst() }
        }
        #expect(s.samples == reference)
        let sorted = reference.sorted()
        #expect(s.median == Float(sorted[7] + sorted[8]) / 2)
        let mean = Double(reference.reduce(0, +)) / 16
        let sd = (reference.map { (Double($0) - mean) * (Double($0) - mean) }.reduce(0, +) / 15).squareRoot()
        #expect(abs(Double(s.standardDeviation) - sd) < 0.001)
    }

    @Test("EMA and Kalman smoothing converge and damp a spike")
    func emaAndKalman() throws {
        var ema = RssiSmoother(window: 5, mode: .ema(alpha: 0.5))
        ema.add(-80)
        #expect(ema.smoothed == -80)
        ema.add(-60)
        #expect(ema.smoothed == -70)
        var kalman = RssiSmoother(window: 5, mode: .kalman(processNoise: 0.5, measurementNoise: 16))
        for _ in 0..<30 { kalman.add(-70) }
        kalman.add(-40) // a spike
        let spiked = try #require(kalman.smoothed)
        #expect(spiked < -60)
        for _ in 0..<60 { kalman.add(-60) }
        let settled = try #require(kalman.smoothed)
        #expect(abs(settled + 60) < 1)
        var median = RssiSmoother(window: 5)
        for v in [-70, -70, -30, -70, -70] { median.add(v) }
        #expect(median.smoothed == -70)
        median.reset()
        #expect(median.isEmpty && median.smoothed == nil)
    }
}

@Suite("Ranging window")
struct RangingWindowTests {
    let t0 = World.start

    @Test("finishes early with 3 steady strong readings")
    func finishesEarly() {
        var w = RangingWindow(startedAt: t0)
        let r7 = w.add(BeaconReading(beacon: World.gateA, rssi: -66), at: t0 + 1_000)
        #expect(r7 == .collecting)
        let r8 = w.add(BeaconReading(beacon: World.gateA, rssi: 0), at: t0 + 1_500)
        #expect(r8 == .collecting) // missing
        let r9 = w.add(BeaconReading(beacon: World.gateA, rssi: -64), at: t0 + 2_000)
        #expect(r9 == .collecting)
        guard case .candidate(let c) = w.add(BeaconReading(beacon: World.gateA, rssi: -65), at: t0 + 3_000) else {
            Issue.record("expected an early candidate"); return
        }
        #expect(c.beacon == World.gateA)
        #expect(c.readings == 3 && c.medianRssi == -65 && c.decidedAt == t0 + 3_000)
        #expect(w.readingCount == 3)
    }

    @Test("noisy or weak signal times out with no candidate")
    func timesOut() {
        var noisy = RangingWindow(startedAt: t0)
        for (i, v) in [-50, -68, -52, -69, -51, -67, -53].enumerated() {
            let r10 = noisy.add(BeaconReading(beacon: World.gateA, rssi: v), at: t0 + Int64(i + 1) * 1_000)
            #expect(r10 == .collecting)
        }
        let r11 = noisy.finish(at: noisy.deadline)
        #expect(r11 == .timedOut)
        var weak = RangingWindow(startedAt: t0)
        for i in 1...7 { weak.add(BeaconReading(beacon: World.gateA, rssi: -74), at: t0 + Int64(i) * 1_000) }
        let r12 = weak.finish(at: t0 + 8_000)
        #expect(r12 == .timedOut)
        // A reading after the deadline ends the window instead of counting.
        var late = RangingWindow(startedAt: t0)
        let r13 = late.add(BeaconReading(beacon: World.gateA, rssi: -60), at: t0 + 9_000)
        #expect(r13 == .timedOut)
    }

    @Test("picks the nearest of overlapping beacons by smoothed RSSI")
    func nearest() {
        var w = RangingWindow(startedAt: t0)
        var outcome = RangingOutcome.collecting
        for i in 1...4 {
            let t = t0 + Int64(i) * 1_000
            w.add(BeaconReading(beacon: World.gateB, rssi: -68), at: t)
            outcome = w.add(BeaconReading(beacon: World.gateA, rssi: -61), at: t)
            if case .candidate = outcome { break }
        }
        guard case .candidate(let c) = outcome else { Issue.record("no candidate"); return }
        #expect(c.beacon == World.gateA)
    }

    @Test("thresholds are configurable")
    func configurable() {
        let strict = RangingConfig(windowMs: 5_000, rule: ConfidenceRule(minReadings: 5, maxStdDevDb: 2, enterRssi: -60))
        var w = RangingWindow(config: strict, startedAt: t0)
        for i in 1...4 {
            let r14 = w.add(BeaconReading(beacon: World.gateA, rssi: -58), at: t0 + Int64(i) * 1_000); #expect(r14 == .collecting)
        }
        guard case .candidate = w.add(BeaconReading(beacon: World.gateA, rssi: -58), at: t0 + 4_500) else {
            Issue.record("5 readings should do"); return
        }
        var w2 = RangingWindow(config: strict, startedAt: t0)
        for i in 1...4 { w2.add(BeaconReading(beacon: World.gateA, rssi: -65), at: t0 + Int64(i) * 1_000) }
        let r15 = w2.finish(at: w2.deadline)
        #expect(r15 == .timedOut) // -65 is not above -60
        #expect(w2.deadline == t0 + 5_000)
    }
}

@Suite("Beacon tracker")
struct BeaconTrackerTests {
    @Test("ignores foreign beacons, evicts the least recently heard, resets stale samples")
    func tracking() throws {
        var t = BeaconTracker(window: 5, mode: .median, freshnessMs: 10_000)
        let now = World.start
        let resolve: (BeaconIdentity) -> Int32? = { World.directory.siteIndex(for: $0) }
        let r16 = t.record(BeaconReading(beacon: World.foreign, rssi: -50), at: now, resolveSite: resolve)
        #expect(r16 == nil)
        let r17 = t.record(BeaconReading(beacon: World.gateA, rssi: 0), at: now, resolveSite: resolve)
        #expect(r17 == nil)
        let a = t.record(BeaconReading(beacon: World.gateA, rssi: -60), at: now, resolveSite: resolve)
        let aIndex = try #require(a)
        #expect(t.slot(aIndex).siteIndex == 0)
        t.record(BeaconReading(beacon: World.lab, rssi: -70), at: now + 10, resolveSite: resolve)
        let labIndex = try #require(t.index(of: World.lab))
        #expect(t.slot(labIndex).siteIndex == 1)
        for minor in UInt16(3)...5 {
            t.record(
                BeaconReading(beacon: BeaconIdentity(World.companyUUID, major: 10, minor: minor), rssi: -80), at: now + 20,
                resolveSite: resolve)
        }
        #expect(t.index(of: World.gateA) == nil) // oldest evicted
        #expect(t.index(of: World.lab) != nil)
        // stale: heard again after freshness → old samples dropped
        t.record(BeaconReading(beacon: World.lab, rssi: -40), at: now + 20_000, resolveSite: resolve)
        let staleLabIndex = try #require(t.index(of: World.lab))
        #expect(t.slot(staleLabIndex).smoother.count == 1)
        #expect(t.nearest(at: now + 20_000) == t.index(of: World.lab))
        #expect(t.bestSmoothed(site: 1, at: now + 20_000) == -40)
        #expect(t.bestSmoothed(site: 0, at: now + 20_000) == nil) // those are stale now
    }
}

@Suite("Geofence and motion gate")
struct GeofenceMotionTests {
    @Test("haversine distances")
    func haversine() {
        let paris = GeoPoint(latitude: 48.8566, longitude: 2.3522)
        let london = GeoPoint(latitude: 51.5074, longitude: -0.1278)
        #expect(abs(Haversine.distance(paris, london) - 343_556.5) < 1)
        let a = GeoPoint(latitude: 33.8938, longitude: 130.8403)
        let b = GeoPoint(latitude: 33.8950, longitude: 130.8403)
        #expect(abs(Haversine.distance(a, b) - 133.434) < 0.01)
        #expect(Haversine.distance(a, a) == 0)
        for bearing in stride(from: 0.0, to: 360, by: 45) {
            #expect(abs(Haversine.distance(a, a.moved(meters: 250, bearingDegrees: bearing)) - 250) < 0.01)
        }
    }

    @Test("inside-radius test and arming from location fixes with an exit margin")
    func geofence() throws {
        let fence = Geofence(center: World.hqCenter, radiusMeters: 200)
        #expect(fence.contains(World.hqCenter.moved(meters: 199, bearingDegrees: 10)))
        #expect(!fence.contains(World.hqCenter.moved(meters: 201, bearingDegrees: 10)))
        var d = try DeviceHarness(config: World.config { $0.flags.continuousScan = true })
        #expect(d.phase == .idle)
        try d.send(.location(World.hqCenter.moved(meters: 500, bearingDegrees: 0)))
        #expect(d.phase == .idle)
        try d.send(.location(World.hqCenter.moved(meters: 180, bearingDegrees: 0)))
        #expect(d.phase == .armed && d.machine.insideSiteIds == ["S_HQ"])
        #expect(d.effects.contains(.startScanning(.continuous)))
        try d.send(.location(World.hqCenter.moved(meters: 230, bearingDegrees: 0))) // jitter inside the margin
        #expect(d.phase == .armed)
        try d.send(.location(World.hqCenter.moved(meters: 260, bearingDegrees: 0)))
        #expect(d.phase == .idle && d.machine.insideSiteIds.isEmpty)
        #expect(d.effects.contains(.stopScanning(.continuous)))
    }

    @Test("walking recently or 30 steps in 2 minutes opens the gate")
    func motionGate() {
        let t0 = World.start
        var gate = MotionGate()
        #expect(!gate.isSatisfied(at: t0))
        gate.record(activity: .walking, at: t0)
        gate.record(activity: .stationary, at: t0 + 1_000)
        #expect(gate.isSatisfied(at: t0 + 179_000))
        #expect(!gate.isSatisfied(at: t0 + 181_000))
        var steps = MotionGate()
        steps.record(steps: 20, at: t0)
        #expect(!steps.isSatisfied(at: t0 + 1_000))
        steps.record(steps: 12, at: t0 + 60_000)
        #expect(steps.steps(at: t0 + 60_000) == 32)
        #expect(steps.isSatisfied(at: t0 + 60_000))
        #expect(steps.steps(at: t0 + 125_000) == 12) // the first 20 left the window
        #expect(!steps.isSatisfied(at: t0 + 125_000))
        #expect(steps.steps(at: t0 + 500_000) == 0)
        let custom = MotionGate(config: MotionGateConfig(recentActivityMs: 60_000, minSteps: 5, stepsWindowMs: 60_000))
        var c = custom
        c.record(steps: 5, at: t0)
        #expect(c.isSatisfied(at: t0 + 30_000))
        #expect(!c.isSatisfied(at: t0 + 70_000))
    }

    @Test("an absurd step count saturates its bucket instead of trapping")
    func absurdStepCount() {
        let t0 = World.start
        var gate = MotionGate()
        gate.record(steps: 10, at: t0)
        gate.record(steps: Int.max, at: t0)
        gate.record(steps: Int.max, at: t0)
        #expect(gate.steps(at: t0) == Int(UInt16.max))
        #expect(gate.isSatisfied(at: t0))
    }
}

@Suite("Idempotency key, CRC32, UUID")
struct KeyTests {
    @Test("idempotency key known vector")
    func knownVector() {
        let input = IdempotencyKey.canonicalInput(
            userId: "u_123", deviceId: "d_456", beaconId: BeaconIdentity(World.companyUUID, major: 10, minor: 3).beaconId,
            tStart: Timestamp(millisecondsSinceEpoch: 1_758_177_312_000), nonce: "0123456789abcdef")
        #expect(input == "u_123|d_456|f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:3|1758177312000|0123456789abcdef")
        let key = IdempotencyKey.make(
            userId: "u_123", deviceId: "d_456", beaconId: BeaconIdentity(World.companyUUID.uppercased(), major: 10, minor: 3).beaconId,
            tStart: Timestamp(millisecondsSinceEpoch: 1_758_177_312_000), nonce: "0123456789abcdef")
        #expect(key.hex == "d0993c3d40b7d3fb1d6db55090cff29a16f6b6d822d46c367093a0143e46e924")
        var rng = SplitMix64(seed: 1)
        let nonce = IdempotencyKey.nonce(using: &rng)
        #expect(nonce.count == 16 && nonce.allSatisfy { "0123456789abcdef".contains($0) })
    }

    @Test("CRC32 check value")
    func crc() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.update(CRC32.checksum(Array("1234".utf8)), Array("56789".utf8)) == 0xCBF4_3926)
    }

    @Test("UUID parsing, formatting and version-4 generation; ISO-8601")
    func uuid() {
        let bits = UUIDBits(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
        #expect(bits?.uuidString == World.companyUUID)
        #expect(UUIDBits(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893") == nil)
        #expect(UUIDBits(uuidString: "f7826da6x4fa2-4e98-8024-bc5b71e0893e") == nil)
        var rng = SplitMix64(seed: 9)
        let u = UUIDBits.random(using: &rng).uuidString
        #expect(Array(u)[14] == "4")
        #expect("89ab".contains(Array(u)[19]))
        #expect(World.start.iso8601 == "2025-09-18T06:35:12Z")
        #expect(Timestamp(millisecondsSinceEpoch: -1).iso8601 == "1969-12-31T23:59:59Z")
        #expect(Timestamp.seconds(951_782_400).iso8601 == "2000-02-29T00:00:00Z")
    }
}
