/// What ends an attendance session on the device.
public enum CheckOutTrigger: String, Sendable, Hashable, Codable, CaseIterable {
    /// The beacon is lost (signal at or below the leave threshold, silence, or region exit),
    /// the soft-exit grace runs out and the loss is confirmed → check-out. For beacons that cover the
    /// place itself (a lab, a classroom).
    case beaconLoss = "beacon_loss"
    /// Losing the beacon only tells the user the device disconnected; the check-out is posted
    /// when the user leaves the site's geofence. For beacons at an entrance gate, where the user walks
    /// out of beacon range into the building right after checking in.
    case geofenceExit = "geofence_exit"
}

/// Feature switches (remote config `feature_flags`, plus `gatt_challenge`).
public struct FeatureFlags: Sendable, Hashable {
    /// Require walking/running recently or enough steps before a check-in (>= 30 steps in 2 min).
    public var motionGating: Bool
    /// Co-location: only check in for a beacon whose site's geofence the device is inside. When off, a
    /// beacon region event arms the device by itself.
    public var requireGeofence: Bool
    /// Continuous RSSI scanning while inside a site's geofence, instead of short ranging bursts triggered
    /// by region events. On by default: bursts start late (the OS reports the region 1-5 s after the
    /// first packet) and end early, and the detection sweep misses arrivals with them that scanning sees.
    public var continuousScan: Bool
    /// GATT challenge-response with the beacon before a check-in (optional).
    public var gattChallenge: Bool
    /// Carried for the app (HealthKit steps as a motion source); the library does not use it.
    public var useHealthKit: Bool
    /// Stop detection entirely: no scanning, no attendance effects (the remote kill switch).
    public var killSwitch: Bool
    /// Flags this version does not know, kept so an app can read them.
    public var other: [String: Bool]

    public init(
        motionGating: Bool = true, requireGeofence: Bool = true, continuousScan: Bool = true,
        gattChallenge: Bool = false, useHealthKit: Bool = false, killSwitch: Bool = false,
        other: [String: Bool] = [:]
    ) {
        self.motionGating = motionGating
        self.requireGeofence = requireGeofence
        self.continuousScan = continuousScan
        self.gattChallenge = gattChallenge
        self.useHealthKit = useHealthKit
        self.killSwitch = killSwitch
        self.other = other
    }
}

/// Every threshold and timing of the detection logic. Defaults follow the specification
/// (docs/SPECIFICATION.md, "1. Detection on the device"); the remote config (`RemoteConfig`) overrides
/// them. Durations are milliseconds.
public struct PresenceConfig: Sendable, Hashable {
    /// Strong evidence: the median of the last `minReadings` readings above this. -65 dBm, not the
    /// -70 dBm first written down for one radio world: across the detection sweep (path-loss exponents
    /// 1.6-3.5, phones 6 dB hot to 8 dB cold) -70 is reached 30-80 s before the door in open spaces and
    /// by people walking past, while -65 is still reached at the door in dense buildings; a cold phone
    /// that stays under it is caught by dwell confirmation (`dwellEnterRssi`). Figures in the README.
    public var enterRssi: Int = -65
    /// Leave when the smoothed RSSI is at or below this (-75 dBm). The gap between the two
    /// is the hysteresis band: inside it nothing changes, so a signal hovering at the edge cannot
    /// ping-pong between states.
    public var leaveRssi: Int = -75
    /// Samples per beacon in the sliding window, 1...16.
    public var smoothingWindow: Int = 5
    public var smoothing: SmoothingMode = .median
    /// Ranging confidence: readings needed, and the standard deviation bound. The 6 dB bound first
    /// specified was written for a phone held still during a ranging burst; at walking pace
    /// the last three readings rise 4-6 dB a second as the phone approaches the beacon, so 6 dB turned
    /// away a quarter of the arrivals the fleet simulator missed. 12 dB still rejects a lone spike
    /// between two weak readings (the median already does), and admits an approach.
    public var minReadings: Int = 3
    public var maxStdDevDb: Float = 12
    /// Dwell confirmation ("hysteresis + dwell"). Readings whose median stays between
    /// this and `enterRssi` are weak evidence: a phone in a bag or in a deep shadow right at the gate
    /// looks like this, and so does a passer-by 8-12 m away in a lucky moment. Such evidence checks in
    /// only when the device then comes to rest (motion reports stationary) within `dwellWindowMs` while
    /// still inside the site's geofence: someone who arrived stops at the door or sits down at a desk,
    /// someone walking past keeps walking. Must be at or below `enterRssi`.
    public var dwellEnterRssi: Int = -85
    /// How long weak evidence waits for the device to come to rest. 0 turns dwell confirmation off.
    public var dwellWindowMs: Int64 = 120_000
    /// Strong evidence checks in only once every reading for this long has passed the rule, or once it
    /// reaches `enterAtOnceRssi`; the check-in is stamped with the first of them. 0 (the default) checks
    /// in at the first passing reading. A site whose pavement runs close to its doors can trade latency
    /// for fewer walk-pasts and fewer check-ins decided on the approach: the README has the sweep's
    /// figures for 1-3 s, with and without an at-once level.
    public var enterHoldMs: Int64 = 0
    /// With a hold: strong evidence at or above this smoothed RSSI checks in at once, without waiting
    /// (the phone is at the beacon), and only weaker strong evidence is held. 0 (the default) holds all
    /// strong evidence; else -100...-30 dBm.
    public var enterAtOnceRssi: Int = 0
    /// Longest ranging burst (`ranging_window_ms`, 5-10 s).
    public var rangingWindowMs: Int64 = 8_000
    /// When a ranging window ends without a candidate while the beacon region is still inside and a
    /// beacon is heard (above `leaveRssi - 15` dBm: someone still approaching), ranging continues for up
    /// to this many more windows. iOS reports the region when the first packet is heard, often 10-40 m
    /// out; a slow walker needs more than one 8 s window to reach the gate. The app holds a background
    /// task meanwhile (`beginBackgroundTask`).
    public var rangingExtensions: Int = 2
    /// A beacon not heard for this long is lost; while continuously scanning, losing every beacon of the
    /// session's site starts the soft exit.
    public var signalLossMs: Int64 = 10_000
    /// Soft-exit grace, the "3-minute debounce". Must be at least 10 s: noise gaps shorter than 10 s
    /// never cause a check-out.
    public var softExitGraceMs: Int64 = 180_000
    /// After the grace, how long to wait for the confirmation (a region-state answer or a reading)
    /// before checking out ("confirm by requestState"). 0 skips confirmation.
    public var exitConfirmationMs: Int64 = 10_000
    /// Heartbeat period while present (the heartbeat contract). 0 disables heartbeats.
    public var heartbeatIntervalMs: Int64 = 300_000
    /// A session restored after a relaunch carries on (the beacon heard again within the grace, or the
    /// geofence exit the OS reports) only when the earlier process knew it was going less than this long
    /// ago (when its last snapshot was written, read on the phone's own clock at both ends); an older one is checked out at its last presence
    /// (`not_found_after_relaunch`) and detection starts afresh. A phone that died at its desk in the
    /// evening and is switched on there the next morning then checks in anew, instead of sending
    /// heartbeats for a session the server closed at its idle cutoff; switched on at home, it does not
    /// date yesterday's departure this morning. 11 h: below the session merger's idle cutoff
    /// (`MERGER_IDLE_CUTOFF_SECONDS`, 12 h) by more than two heartbeat periods, so a resumed session's
    /// next heartbeat still joins it. A deployment that lowers the cutoff lowers this with it.
    public var sessionResumeLimitMs: Int64 = 39_600_000
    public var gattTimeoutMs: Int64 = 3_000
    /// After a failed GATT challenge, wait this long before challenging again (0...600,000 ms).
    public var gattRetryCooldownMs: Int64 = 30_000
    /// Gate beacons: people walk out of their range into the building right after checking in, so the
    /// default ends a session when the device leaves the site's geofence (see `CheckOutTrigger`).
    public var checkOutTrigger: CheckOutTrigger = .geofenceExit
    public var motion = MotionGateConfig()
    /// Arming radius for sites without their own (`geofence_radius`, 150-300 m).
    public var geofenceRadiusMeters: Double = 200
    /// A location fix counts as leaving a geofence only beyond radius + margin, so GPS jitter at the
    /// boundary does not flap between inside and outside.
    public var geofenceExitMarginMeters: Double = 50
    public var flags = FeatureFlags()

    public init() {}

    /// Largest accepted Kalman process noise (q), dB² per reading.
    public static let maxKalmanProcessNoise: Float = 1_000
    /// Largest accepted Kalman measurement noise (r), dB².
    public static let maxKalmanMeasurementNoise: Float = 10_000

    public var confidenceRule: ConfidenceRule {
        ConfidenceRule(minReadings: minReadings, maxStdDevDb: maxStdDevDb, enterRssi: enterRssi)
    }

    /// The weak-evidence rule of dwell confirmation: the same readings, the lower threshold, no spread
    /// bound (a phone walking into the bubble is exactly what it looks for).
    public var dwellRule: ConfidenceRule {
        ConfidenceRule(minReadings: minReadings, maxStdDevDb: .infinity, enterRssi: dwellEnterRssi)
    }

    public var rangingConfig: RangingConfig {
        RangingConfig(windowMs: rangingWindowMs, rule: confidenceRule, smoothingWindow: smoothingWindow, smoothing: smoothing)
    }

    /// Every problem with this configuration, each naming its remote-config key. Empty when valid.
    public func validationIssues() -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        func check<T: Comparable>(_ key: String, _ value: T, _ range: ClosedRange<T>, _ unit: String, _ why: String = "") {
            if !range.contains(value) {
                issues.append(
                    ConfigIssue(
                        key: key,
                        message: "must be between \(range.lowerBound) and \(range.upperBound)\(unit)\(why), got \(value)"))
            }
        }
        check("ranging_window_ms", rangingWindowMs, 5_000...10_000, " ms", " (ranging runs 5-10 s)")
        check("geofence_radius", geofenceRadiusMeters, 150...300, " m", " (150-300 m around the gate)")
        check("thresholds.enter_rssi", enterRssi, -100...(-30), " dBm")
        check("thresholds.leave_rssi", leaveRssi, -110...(-30), " dBm")
        if leaveRssi >= enterRssi {
            issues.append(
                ConfigIssue(
                    key: "thresholds.leave_rssi",
                    message: "must be below thresholds.enter_rssi (\(enterRssi)) so enter and leave have hysteresis, got \(leaveRssi)"))
        }
        check("thresholds.max_stddev_db", maxStdDevDb, 0.5...30, " dB")
        check("thresholds.dwell_enter_rssi", dwellEnterRssi, -100...(-30), " dBm")
        if dwellEnterRssi > enterRssi {
            issues.append(
                ConfigIssue(
                    key: "thresholds.dwell_enter_rssi",
                    message: "must be at or below thresholds.enter_rssi (\(enterRssi)): it is the weaker of the two, got \(dwellEnterRssi)")
            )
        }
        if dwellWindowMs != 0 {
            check("thresholds.dwell_window_ms", dwellWindowMs, 10_000...600_000, " ms", " or 0 to disable")
        }
        check("thresholds.enter_hold_ms", enterHoldMs, 0...10_000, " ms")
        if enterAtOnceRssi != 0 {
            check("thresholds.enter_at_once_rssi", enterAtOnceRssi, -100...(-30), " dBm", " or 0 to hold all strong evidence")
        }
        check("thresholds.smoothing_window", smoothingWindow, 1...RssiSmoother.maxWindow, " samples")
        if (1...RssiSmoother.maxWindow).contains(smoothingWindow) {
            check("thresholds.min_readings", minReadings, 1...smoothingWindow, "", " (at most thresholds.smoothing_window)")
        }
        // Cross-checks run on values within their own ranges only: an out-of-range value is reported
        // above, and arithmetic on it could overflow (a remote "never" of Int64.max, say).
        let readingsInRange = (1...RssiSmoother.maxWindow).contains(minReadings)
        if readingsInRange && Int64(minReadings) * 1_000 > rangingWindowMs {
            issues.append(
                ConfigIssue(
                    key: "thresholds.min_readings",
                    message: "\(minReadings) readings at 1 Hz do not fit in ranging_window_ms (\(rangingWindowMs))"))
        }
        switch smoothing {
        case .median: break
        case .ema(let alpha):
            if !(alpha > 0 && alpha <= 1) {
                issues.append(ConfigIssue(key: "thresholds.ema_alpha", message: "must be in (0, 1], got \(alpha)"))
            }
        case .kalman(let q, let r):
            // Bounded so the filter's variance stays finite: a huge finite noise overflows Float in the
            // update and turns the smoothed RSSI into NaN.
            if !(q > 0 && q <= PresenceConfig.maxKalmanProcessNoise) {
                issues.append(
                    ConfigIssue(
                        key: "thresholds.kalman_process_noise",
                        message: "must be positive and at most \(Int(PresenceConfig.maxKalmanProcessNoise)) dB², got \(q)"))
            }
            if !(r > 0 && r <= PresenceConfig.maxKalmanMeasurementNoise) {
                issues.append(
                    ConfigIssue(
                        key: "thresholds.kalman_measurement_noise",
                        message: "must be positive and at most \(Int(PresenceConfig.maxKalmanMeasurementNoise)) dB², got \(r)"))
            }
        }
        check("thresholds.ranging_extensions", rangingExtensions, 0...5, " windows")
        check("thresholds.signal_loss_ms", signalLossMs, 2_000...120_000, " ms")
        check(
            "thresholds.soft_exit_grace_ms", softExitGraceMs, 10_000...3_600_000, " ms",
            " (noise gaps under 10 s must never cause a check-out)")
        check("thresholds.exit_confirmation_ms", exitConfirmationMs, 0...60_000, " ms")
        // After a gap the signal must be heard for up to `minReadings` readings (1 Hz) before the soft
        // exit ends; the grace plus confirmation must cover that too, or a 9.9 s gap could still end in
        // a check-out.
        let needed = 10_000 + Int64(readingsInRange ? minReadings : 1) * 1_000
        if readingsInRange && (10_000...3_600_000).contains(softExitGraceMs) && (0...60_000).contains(exitConfirmationMs)
            && softExitGraceMs + exitConfirmationMs < needed
        {
            issues.append(
                ConfigIssue(
                    key: "thresholds.exit_confirmation_ms",
                    message:
                        "soft_exit_grace_ms + exit_confirmation_ms must be at least \(needed) ms (10 s of noise plus \(minReadings) readings at 1 Hz to see the signal back), got \(softExitGraceMs + exitConfirmationMs)"
                ))
        }
        if heartbeatIntervalMs != 0 {
            check("thresholds.heartbeat_interval_ms", heartbeatIntervalMs, 60_000...86_400_000, " ms", " or 0 to disable")
        }
        check("thresholds.session_resume_limit_ms", sessionResumeLimitMs, 600_000...86_400_000, " ms", " (10 min to 24 h)")
        check("thresholds.motion_recent_ms", motion.recentActivityMs, 30_000...600_000, " ms")
        check("min_steps_window.steps", motion.minSteps, 0...10_000, " steps")
        check("min_steps_window.window_ms", motion.stepsWindowMs, 30_000...600_000, " ms")
        check("gatt_challenge.timeout_ms", gattTimeoutMs, 500...10_000, " ms")
        check("gatt_challenge.retry_cooldown_ms", gattRetryCooldownMs, 0...600_000, " ms")
        check("thresholds.geofence_exit_margin_m", geofenceExitMarginMeters, 0...500, " m")
        return issues
    }

    /// `self` if valid, else an error listing every problem.
    public func validated() throws(ConfigValidationError) -> PresenceConfig {
        let issues = validationIssues()
        if !issues.isEmpty { throw ConfigValidationError(issues: issues) }
        return self
    }
}

/// One problem in a configuration: which key, and why.
public struct ConfigIssue: Sendable, Hashable, CustomStringConvertible {
    /// Dotted path of the remote-config key, e.g. `thresholds.enter_rssi`.
    public var key: String
    public var message: String

    public var description: String { "\(key): \(message)" }
}

/// A configuration was rejected; `issues` lists every problem found, not just the first.
public struct ConfigValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var issues: [ConfigIssue]

    public init(issues: [ConfigIssue]) { self.issues = issues }

    public var description: String {
        "invalid configuration (\(issues.count) problem\(issues.count == 1 ? "" : "s")): "
            + issues.map(\.description).joined(separator: "; ")
    }
}
