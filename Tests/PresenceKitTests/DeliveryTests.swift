import Foundation
import Synchronization
import Testing

@testable import PresenceKit

/// A counter tasks share (a `Mutex` cannot be captured by an escaping closure).
final class SharedCounter: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    /// Adds one; returns the new value.
    @discardableResult
    func increment() -> Int {
        count.withLock { n in
            n += 1
            return n
        }
    }
}

@Suite("Retry policy and outbox drain")
struct DeliveryTests {
    @Test("100 ms, 500 ms, 2 s, 5 s, then full-jitter exponential backoff with a cap")
    func schedule() {
        let policy = RetryPolicy()
        var rng = SplitMix64(seed: 7)
        #expect((1...4).map { policy.delay(beforeRetry: $0, using: &rng) } == [100, 500, 2_000, 5_000])
        #expect((5...10).map { policy.ceiling(beforeRetry: $0) } == [10_000, 20_000, 40_000, 80_000, 160_000, 300_000])
        #expect(policy.ceiling(beforeRetry: 500) == 300_000)
        for retry in 5...40 {
            var seen = Set<Int64>()
            for _ in 0..<200 {
                let d = policy.delay(beforeRetry: retry, using: &rng)
                #expect(d >= 0 && d <= policy.ceiling(beforeRetry: retry))
                seen.insert(d)
            }
            #expect(seen.count > 150) // jittered, not fixed
        }
        // Full jitter: the mean is about half the ceiling.
        var sum: Int64 = 0
        for _ in 0..<10_000 { sum += policy.delay(beforeRetry: 6, using: &rng) }
        #expect(abs(Double(sum) / 10_000 - 10_000) < 500)
    }

    @Test("a retry that would start after the deadline is not scheduled")
    func deadline() {
        let policy = RetryPolicy()
        var rng = SplitMix64(seed: 1)
        let now = World.start
        let deadline = now + RetryPolicy.backgroundBudgetMs
        #expect(policy.nextAttempt(beforeRetry: 3, now: now, deadline: deadline, using: &rng) == now + 2_000)
        #expect(policy.nextAttempt(beforeRetry: 4, now: now + 6_000, deadline: deadline, using: &rng) == nil)
        #expect(policy.nextAttempt(beforeRetry: 4, now: now + 6_000, deadline: nil, using: &rng) == now + 11_000)
    }

    @Test("final verdicts: 201/200/409/422/400; everything else is retried")
    func classifier() {
        let c = DeliveryClassifier()
        for status in [200, 201, 400, 409, 422] { #expect(c.verdict(for: .response(status: status)) == .final(status: status)) }
        for status in [202, 500, 502, 503, 429, 401, 408] {
            guard case .retry = c.verdict(for: .response(status: status)) else { Issue.record("\(status) must retry"); continue }
        }
        guard case .retry = c.verdict(for: .timeout), case .retry = c.verdict(for: .transportError("reset")) else {
            Issue.record("timeouts and transport errors must retry"); return
        }
        guard
            case .retry(_, let after) = c.verdict(
                for: .response(status: 409, problemType: "https://attendance/problems/request-in-flight", retryAfterMs: 700))
        else {
            Issue.record("409 in flight is not a verdict"); return
        }
        #expect(after == 700)
        #expect(c.verdict(for: .response(status: 409, problemType: "https://attendance/problems/policy-conflict")) == .final(status: 409))
        // An event stamped ahead of the server's clock: kept, and sent again when the gateway says.
        #expect(
            c.verdict(for: .response(status: 425, problemType: "urn:problem:attendance:too-early", retryAfterMs: 300_000))
                == .retry(reason: "HTTP 425", notBeforeMs: 300_000))
    }

    @Test("drain: in append order, retries with the same payload, stops at the deadline, resumes later")
    func drain() async throws {
        try await withTempDir { dir in
            let clock = ManualClock(World.start)
            let box = try Outbox(path: dir + "/d.wal", clock: clock)
            for i in 0..<6 { try box.append(Array("e\(i)".utf8)) }
            let drainer = OutboxDrainer(outbox: box, clock: clock, sleep: { ms in clock.advance(by: ms) })
            var rng = SplitMix64(seed: 3)
            let log = Mutex<[String]>([])
            // e0: 201; e1: 503, 202, then 200; e2: timeouts forever.
            let report = try await drainer.drain(deadline: clock.now() + RetryPolicy.backgroundBudgetMs, random: &rng) { entry, payload in
                let name = String(decoding: payload, as: UTF8.self)
                let attempt = entry.attempts
                log.withLock { $0.append("\(name)#\(attempt)") }
                switch name {
                case "e0": return .response(status: 201)
                case "e1": return attempt == 1 ? .response(status: 503) : attempt == 2 ? .response(status: 202) : .response(status: 200)
                default: return .timeout
                }
            }
            // 100 + 500 ms for e1, then 100 + 500 + 2000 + 5000 ms for e2 (t = 8.2 s), a fifth try, then
            // jittered retries while they still start before the 10 s deadline.
            let attempts = log.withLock { $0 }
            #expect(Array(attempts.prefix(9)) == ["e0#1", "e1#1", "e1#2", "e1#3", "e2#1", "e2#2", "e2#3", "e2#4", "e2#5"])
            #expect(attempts.dropFirst(9).allSatisfy { $0.hasPrefix("e2#") })
            #expect(report.delivered.map(\.status) == [201, 200])
            guard case .deadline(_, let reason) = report.stop else { Issue.record("should stop at the deadline"); return }
            #expect(reason == "timeout")
            #expect(clock.now() <= World.start + RetryPolicy.backgroundBudgetMs)
            #expect(try box.entries().map { String(decoding: try box.payload(of: $0.id), as: UTF8.self) } == ["e2", "e3", "e4", "e5"])
            #expect(box.first()?.state == .sentAwaitingVerdict)
            // Later, online: everything drains in order.
            clock.advance(by: 60_000)
            let order = Mutex<[String]>([])
            let second = try await drainer.drain(deadline: nil, random: &rng) { _, payload in
                order.withLock { $0.append(String(decoding: payload, as: UTF8.self)) }
                return .response(status: 201)
            }
            #expect(order.withLock { $0 } == ["e2", "e3", "e4", "e5"])
            #expect(second.stop == .empty && box.isEmpty)
        }
    }

    /// A gateway back from an outage answers every phone `Retry-After: 2` at once: they come back spread
    /// over the next second, not together; a long wait (a 425 for an hour) stays within 5 s of it.
    @Test("phones told the same Retry-After come back spread out, never sooner than it")
    func retryAfterIsSpread() async throws {
        func retryTimes(retryAfterMs: Int64, phones: Int) async throws -> [Int64] {
            var times: [Int64] = []
            for phone in 0..<phones {
                try await withTempDir { dir in
                    let clock = ManualClock(World.start)
                    let box = try Outbox(path: dir + "/p.wal", clock: clock)
                    try box.append(Array("e".utf8))
                    let drainer = OutboxDrainer(outbox: box, clock: clock, sleep: { ms in clock.advance(by: ms) })
                    var rng = SplitMix64(seed: UInt64(phone) + 1)
                    let second = Mutex<Int64?>(nil)
                    _ = try await drainer.drain(deadline: nil, random: &rng) { entry, _ in
                        if entry.attempts == 1 { return .response(status: 503, retryAfterMs: retryAfterMs) }
                        second.withLock { $0 = clock.now() - World.start }
                        return .response(status: 201)
                    }
                    times.append(try #require(second.withLock { $0 }))
                }
            }
            return times
        }
        let short = try await retryTimes(retryAfterMs: 2_000, phones: 40)
        #expect(short.allSatisfy { (2_000...3_000).contains($0) }, "\(short)")
        #expect(Set(short).count >= 30, "\(short)")
        let long = try await retryTimes(retryAfterMs: 3_600_000, phones: 5)
        #expect(long.allSatisfy { (3_600_000...3_605_000).contains($0) }, "\(long)")
    }

    @Test("a cancelled drain stops at once, even when its sleep returns early on cancellation")
    func cancelledDrainStops() async throws {
        try await withTempDir { dir in
            let clock = ManualClock(World.start)
            let box = try Outbox(path: dir + "/d.wal", clock: clock)
            try box.append(Array("e0".utf8))
            // A production-style sleep on a cancelled task returns at once; virtual time does not move.
            let drainer = OutboxDrainer(outbox: box, clock: clock, sleep: { _ in })
            let attempts = SharedCounter()
            let started = SharedCounter()
            let task = Task {
                var rng = SplitMix64(seed: 5)
                while started.value == 0 { await Task.yield() }
                return try await drainer.drain(deadline: nil, random: &rng) { _, _ in
                    // Bounded so a drain that ignores cancellation still ends (and fails the test).
                    attempts.increment() < 1_000 ? .response(status: 503, retryAfterMs: 60_000) : .response(status: 201)
                }
            }
            task.cancel()
            started.increment()
            let report = try await task.value
            #expect(attempts.value == 0)
            #expect(report.stop == .deadline(retryAt: World.start, lastReason: OutboxDrainer.cancelledReason))
            #expect(box.count == 1)
            // Cancelled between a failed attempt and its retry: no second attempt.
            let once = SharedCounter()
            let cancelling = OutboxDrainer(
                outbox: box, clock: clock,
                sleep: { _ in withUnsafeCurrentTask { $0?.cancel() } })
            let second = try await Task {
                var rng = SplitMix64(seed: 6)
                return try await cancelling.drain(deadline: nil, random: &rng) { _, _ in
                    once.increment() < 1_000 ? .response(status: 503, retryAfterMs: 60_000) : .response(status: 201)
                }
            }.value
            #expect(once.value == 1)
            guard case .deadline(_, let reason) = second.stop else { Issue.record("a cancelled drain reports a stop"); return }
            #expect(reason == OutboxDrainer.cancelledReason)
            #expect(box.count == 1)
        }
    }

    @Test("a full disk does not keep the events from the server: each is sent once, answered, and leaves once the disk has room")
    func fullDisk() async throws {
        try await withTempDir { dir in
            let clock = ManualClock(World.start)
            let box = try Outbox(path: dir + "/full.wal", clock: clock)
            var d = try DeviceHarness(config: StateMachineTests.continuous)
            try d.arrive()
            try d.run(seconds: 3) { _ in -60 }
            try d.run(seconds: 400) { _ in nil }
            let events = d.checkIns + d.checkOuts
            try #require(events.count == 2)
            for event in events { try box.append(PresenceCoding.encode(event), kind: event.type.outboxKind) }
            let ids = box.entries().map(\.id)
            #expect(box.first(after: 0)?.id == ids[0] && box.first(after: ids[0])?.id == ids[1] && box.first(after: ids[1]) == nil)
            let drainer = OutboxDrainer(outbox: box, clock: clock, sleep: { ms in clock.advance(by: ms) })
            var rng = SplitMix64(seed: 5)
            box.failWrites(errno: ENOSPC)
            let sent = Mutex<[UInt64]>([])
            let full = try await drainer.drain(deadline: nil, random: &rng) { entry, _ in
                sent.withLock { $0.append(entry.id) }
                return .response(status: 201)
            }
            // In order, each once; answered; still stored, since nothing could be written.
            #expect(sent.withLock { $0 } == ids)
            #expect(full.delivered.map(\.id) == ids && box.count == 2)
            guard case .unrecorded(.io(_, _, let code)) = full.stop else {
                Issue.record("expected .unrecorded, got \(full.stop)")
                return
            }
            #expect(code == ENOSPC)
            // Room again: the next drain sends them again (the server answers from its record) and they leave.
            box.failWrites(errno: nil)
            let room = try await drainer.drain(deadline: nil, random: &rng) { _, _ in .response(status: 200) }
            #expect(room.stop == .empty && room.delivered.map(\.id) == ids && box.isEmpty)
        }
    }

    @Test("a 403 for an entry of another device or user parks it; the queue goes on; a 403 of the current identity stops the drain")
    func foreignEntriesAreParked() async throws {
        try await withTempDir { dir in
            let clock = ManualClock(World.start)
            let box = try Outbox(path: dir + "/d.wal", clock: clock)
            var old = try DeviceHarness(config: StateMachineTests.continuous, userId: "u_old", deviceId: "d_old", seed: 1)
            try old.arrive()
            try old.run(seconds: 3) { _ in -60 }
            var current = try DeviceHarness(config: StateMachineTests.continuous, userId: "u_new", deviceId: "d_new", seed: 2)
            try current.arrive()
            try current.run(seconds: 3) { _ in -60 }
            try current.send(.userIdChanged("u_other")) // the check-out of u_new: now another user's
            var other = try DeviceHarness(config: StateMachineTests.continuous, userId: "u_other", deviceId: "d_new", seed: 3)
            try other.arrive()
            try other.run(seconds: 3) { _ in -60 }
            for event in old.checkIns + current.checkIns + current.checkOuts + other.checkIns {
                try box.append(PresenceCoding.encode(event), kind: event.type.outboxKind)
            }
            let ids = box.entries().map(\.id)
            try #require(ids.count == 4)
            let identity = DeviceIdentity(userId: "u_other", deviceId: "d_new")
            let drainer = OutboxDrainer(outbox: box, clock: clock, sendingAs: identity, sleep: { ms in clock.advance(by: ms) })
            var rng = SplitMix64(seed: 4)
            let sent = Mutex<[UInt64]>([])
            let report = try await drainer.drain(deadline: clock.now() + RetryPolicy.backgroundBudgetMs, random: &rng) { entry, payload in
                sent.withLock { $0.append(entry.id) }
                guard let event = try? PresenceCoding.decodeEvent(payload) else { return .response(status: 400) }
                return event.deviceId == identity.deviceId && event.userId == identity.userId
                    ? .response(status: 201) : .response(status: 403)
            }
            #expect(sent.withLock { $0 } == ids)
            #expect(report.parked == [.init(id: ids[0], status: 403), .init(id: ids[1], status: 403), .init(id: ids[2], status: 403)])
            #expect(report.delivered == [.init(id: ids[3], status: 201)])
            #expect(report.stop == .empty && box.isEmpty)
            #expect(box.parkedEntries().map(\.id) == Array(ids.prefix(3)))
            #expect(try PresenceCoding.decodeEvent(try box.payload(of: ids[2])).reason == .userChanged)

            // The current identity's own 403 (a revoked device) stops the drain after one request, with
            // the entry kept at the head of the line; without a deadline too (it would retry for ever).
            try box.append(PresenceCoding.encode(try #require(other.checkIns.first)))
            try box.append(Array("not an event".utf8))
            for deadline in [clock.now() + RetryPolicy.backgroundBudgetMs, nil] {
                let requests = Mutex(0)
                let forbidden = try await drainer.drain(deadline: deadline, random: &rng) { _, _ in
                    requests.withLock { $0 += 1 }
                    return .response(status: 403, problemType: "urn:problem:attendance:forbidden")
                }
                #expect(forbidden.parked.isEmpty && forbidden.delivered.isEmpty)
                #expect(requests.withLock { $0 } == 1 && forbidden.attempts == 1)
                #expect(forbidden.stop == .forbidden(problemType: "urn:problem:attendance:forbidden"))
                #expect(box.count == 2 && box.parkedEntries().count == 3)
            }
            // Without an identity nothing is parked, and a 403 stops the drain the same way.
            let anonymous = OutboxDrainer(outbox: box, clock: clock, sleep: { ms in clock.advance(by: ms) })
            let stopped = try await anonymous.drain(deadline: nil, random: &rng) { _, _ in .response(status: 403) }
            #expect(stopped.stop == .forbidden(problemType: nil) && stopped.attempts == 1 && box.count == 2)
            // Once the server takes the phone again, the next drain delivers what waited.
            let resumed = try await drainer.drain(deadline: nil, random: &rng) { _, _ in .response(status: 201) }
            #expect(resumed.stop == .empty && resumed.delivered.count == 2 && box.isEmpty)
        }
    }
}

@Suite("Remote config")
struct RemoteConfigTests {
    @Test("decodes every key")
    func full() throws {
        let json = """
            {
              "schema_version": 2,
              "ranging_window_ms": 6000,
              "geofence_radius": 250,
              "min_steps_window": {"steps": 40, "window_ms": 90000},
              "gatt_challenge": {"enabled": true, "timeout_ms": 2500},
              "checkout_trigger": "geofence_exit",
              "thresholds": {"enter_rssi": -68, "leave_rssi": -78, "max_stddev_db": 5.5, "min_readings": 4,
                             "dwell_enter_rssi": -79, "dwell_window_ms": 90000,
                             "smoothing_window": 7, "smoothing": "kalman", "kalman_process_noise": 1, "kalman_measurement_noise": 9,
                             "signal_loss_ms": 12000, "soft_exit_grace_ms": 120000, "exit_confirmation_ms": 5000,
                             "heartbeat_interval_ms": 0, "motion_recent_ms": 150000, "geofence_exit_margin_m": 30},
              "feature_flags": {"motion_gating": false, "require_geofence": true, "continuous_scan": true,
                                "use_healthkit": true, "kill_switch": false, "new_ui": true}
            }
            """
        let rc = try RemoteConfig.decode(json)
        let c = rc.presence
        #expect(rc.version == 2)
        #expect(c.rangingWindowMs == 6_000 && c.geofenceRadiusMeters == 250)
        #expect(c.motion.minSteps == 40 && c.motion.stepsWindowMs == 90_000 && c.motion.recentActivityMs == 150_000)
        #expect(c.flags.gattChallenge && c.gattTimeoutMs == 2_500)
        #expect(c.checkOutTrigger == .geofenceExit)
        #expect(c.enterRssi == -68 && c.leaveRssi == -78 && c.maxStdDevDb == 5.5 && c.minReadings == 4)
        #expect(c.dwellEnterRssi == -79 && c.dwellWindowMs == 90_000)
        #expect(c.smoothingWindow == 7 && c.smoothing == .kalman(processNoise: 1, measurementNoise: 9))
        #expect(c.signalLossMs == 12_000 && c.softExitGraceMs == 120_000 && c.exitConfirmationMs == 5_000)
        #expect(c.heartbeatIntervalMs == 0 && c.geofenceExitMarginMeters == 30)
        #expect(!c.flags.motionGating && c.flags.continuousScan && c.flags.useHealthKit && c.flags.other == ["new_ui": true])
        let short = try RemoteConfig.decode(
            #"{"min_steps_window": 25, "gatt_challenge": true, "thresholds": {"smoothing": "ema", "ema_alpha": 0.4}}"#)
        #expect(short.presence.motion.minSteps == 25 && short.presence.flags.gattChallenge)
        #expect(short.presence.smoothing == .ema(alpha: 0.4))
        #expect(try RemoteConfig.decode("{}").presence == PresenceConfig())
        #expect(try RemoteConfig.decode(#"{"thresholds": {"enter_hold_ms": 3000}}"#).presence.enterHoldMs == 3_000)
        let conditional = try RemoteConfig.decode(#"{"thresholds": {"enter_hold_ms": 3000, "enter_at_once_rssi": -64}}"#)
        #expect(conditional.presence.enterHoldMs == 3_000 && conditional.presence.enterAtOnceRssi == -64)
        #expect(try RemoteConfig.decode(#"{"thresholds": {"enter_at_once_rssi": 0}}"#).presence.enterAtOnceRssi == 0)
    }

    @Test("validation errors name the key and say why — all of them at once")
    func errors() throws {
        let typeErrors = issues(
            #"{"ranging_window_ms": "8000", "thresholds": {"enter_rssi": -70.5, "smoothing": "fancy"}, "feature_flags": {"kill_switch": 1}, "geofence_radius": null}"#
        )
        #expect(
            typeErrors.map(\.key).sorted() == [
                "feature_flags.kill_switch", "geofence_radius", "ranging_window_ms", "thresholds.enter_rssi", "thresholds.smoothing",
            ])
        #expect(typeErrors.contains(ConfigIssue(key: "ranging_window_ms", message: "expected an integer, got the string \"8000\"")))
        #expect(typeErrors.contains(ConfigIssue(key: "feature_flags.kill_switch", message: "expected a boolean, got the number 1")))
        let rangeErrors = issues(
            #"{"ranging_window_ms": 20000, "geofence_radius": 50, "thresholds": {"enter_rssi": -75, "leave_rssi": -70, "soft_exit_grace_ms": 5000}}"#
        )
        #expect(
            rangeErrors.map(\.key) == ["ranging_window_ms", "geofence_radius", "thresholds.leave_rssi", "thresholds.soft_exit_grace_ms"])
        try #require(rangeErrors.count == 4)
        #expect(rangeErrors[0].description == "ranging_window_ms: must be between 5000 and 10000 ms (ranging runs 5-10 s), got 20000")
        #expect(rangeErrors[2].message.contains("must be below thresholds.enter_rssi (-75)"))
        #expect(rangeErrors[3].message.contains("noise gaps under 10 s must never cause a check-out"))
        #expect(issues("[1, 2]").map(\.description) == ["(document): must be a JSON object, got an array"])
        #expect(issues("{\"a\": ").first?.key == "(document)")
        #expect(issues(#"{"checkout_trigger": "never"}"#).first?.message == #"must be one of "beacon_loss", "geofence_exit", got "never""#)
        #expect(
            issues(#"{"thresholds": {"enter_hold_ms": 20000}}"#).map(\.description) == [
                "thresholds.enter_hold_ms: must be between 0 and 10000 ms, got 20000"
            ])
        #expect(
            issues(#"{"thresholds": {"enter_at_once_rssi": -20}}"#).map(\.description) == [
                "thresholds.enter_at_once_rssi: must be between -100 and -30 dBm or 0 to hold all strong evidence, got -20"
            ])
        #expect(issues(#"{"thresholds": {"enter_at_once_rssi": -64.5}}"#).map(\.key) == ["thresholds.enter_at_once_rssi"])
        // Misspelled or unknown keys are refused by name, at every level, all at once (flags are an open set).
        let unknown = issues(
            #"{"checkout_triger": "geofence_exit", "thresholds": {"max_stdev_db": 6}, "gatt_challenge": {"enabeld": true}, "min_steps_window": {"stepz": 3}, "feature_flags": {"new_ui": true}}"#
        )
        #expect(
            unknown.map(\.key).sorted() == [
                "checkout_triger", "gatt_challenge.enabeld", "min_steps_window.stepz", "thresholds.max_stdev_db",
            ])
        #expect(unknown.allSatisfy { $0.message == "is not a remote-config key of this app" })
        do {
            _ = try RemoteConfig.decode(#"{"thresholds": {"min_readings": 6}}"#)
            Issue.record("min_readings 6 > smoothing_window 5 must fail")
        } catch {
            #expect(error.description.hasPrefix("invalid configuration (1 problem): thresholds.min_readings: must be between 1 and 5"))
        }
    }

    @Test("values at the ends of Int64 are refused by name, never trap in the cross-checks")
    func extremeValuesAreRefusedNotTrapped() {
        #expect(
            issues(#"{"thresholds": {"soft_exit_grace_ms": 9223372036854775807}}"#).map(\.key) == ["thresholds.soft_exit_grace_ms"])
        #expect(
            issues(#"{"thresholds": {"min_readings": 100000000000000000}}"#).map(\.key) == ["thresholds.min_readings"])
        #expect(
            issues(#"{"thresholds": {"exit_confirmation_ms": 9223372036854775807, "soft_exit_grace_ms": 3600000}}"#).map(\.key)
                == ["thresholds.exit_confirmation_ms"])
        #expect(!issues(#"{"thresholds": {"soft_exit_grace_ms": -9223372036854775808}}"#).isEmpty)
    }

    @Test("a refused configuration leaves the device on its last good one")
    func refusedConfigKeepsTheLastGoodOne() throws {
        let directory = SiteDirectory(sites: [])
        var machine = try PresenceStateMachine(
            config: PresenceConfig(), directory: directory, identity: DeviceIdentity(userId: "u", deviceId: "d"), seed: 1)
        var good = PresenceConfig()
        good.enterRssi = -68
        _ = try machine.apply(config: good, at: Timestamp.seconds(1_000))
        var bad = good
        bad.leaveRssi = -60 // above the enter threshold
        #expect(throws: ConfigValidationError.self) { _ = try machine.apply(config: bad, at: Timestamp.seconds(1_001)) }
        #expect(machine.config == good)
    }

    @Test("gatt_challenge.retry_cooldown_ms and the Kalman noises are range-checked, naming the key")
    func cooldownAndKalmanRanges() throws {
        #expect(
            issues(#"{"gatt_challenge": {"enabled": true, "retry_cooldown_ms": 86400000000}}"#) == [
                ConfigIssue(key: "gatt_challenge.retry_cooldown_ms", message: "must be between 0 and 600000 ms, got 86400000000")
            ])
        #expect(issues(#"{"gatt_challenge": {"retry_cooldown_ms": -1}}"#).map(\.key) == ["gatt_challenge.retry_cooldown_ms"])
        #expect(try RemoteConfig.decode(#"{"gatt_challenge": {"retry_cooldown_ms": 0}}"#).presence.gattRetryCooldownMs == 0)
        #expect(try RemoteConfig.decode(#"{"gatt_challenge": {"retry_cooldown_ms": 600000}}"#).presence.gattRetryCooldownMs == 600_000)
        #expect(
            issues(#"{"thresholds": {"smoothing": "kalman", "kalman_process_noise": 1e30, "kalman_measurement_noise": 1e30}}"#) == [
                ConfigIssue(key: "thresholds.kalman_process_noise", message: "must be positive and at most 1000 dB², got 1e+30"),
                ConfigIssue(key: "thresholds.kalman_measurement_noise", message: "must be positive and at most 10000 dB², got 1e+30"),
            ])
        let atTheBounds = #"{"thresholds": {"smoothing": "kalman", "kalman_process_noise": 1000, "kalman_measurement_noise": 10000}}"#
        #expect(issues(atTheBounds).isEmpty)
        // What the bound prevents: huge finite noises overflow the filter into NaN. At the bounds it stays finite.
        var huge = RssiSmoother(window: 5, mode: .kalman(processNoise: 3e38, measurementNoise: 3e38))
        var bounded = RssiSmoother(
            window: 5,
            mode: .kalman(processNoise: PresenceConfig.maxKalmanProcessNoise, measurementNoise: PresenceConfig.maxKalmanMeasurementNoise))
        for i in 0..<10_000 {
            huge.add(i % 2 == 0 ? -70 : -40)
            bounded.add(i % 2 == 0 ? -70 : -40)
        }
        #expect(try #require(huge.smoothed).isNaN)
        let smoothed = try #require(bounded.smoothed)
        #expect(smoothed >= -70 && smoothed <= -40)
    }
}

/// The issues `RemoteConfig.decode` reports for `json` (none when it decodes).
private func issues(_ json: String) -> [ConfigIssue] {
    do {
        _ = try RemoteConfig.decode(json)
        return []
    } catch {
        return error.issues
    }
}
