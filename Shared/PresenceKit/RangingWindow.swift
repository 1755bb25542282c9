/// Settings of a ranging window (docs/SPECIFICATION.md, "1. Detection on the device"). All thresholds are
/// configurable.
public struct RangingConfig: Sendable, Hashable {
    /// How long ranging may run before giving up (`ranging_window_ms`, 5-10 s).
    public var windowMs: Int64
    /// When a window may finish early.
    public var rule: ConfidenceRule
    /// Samples per beacon in the smoothing window (1...16).
    public var smoothingWindow: Int
    public var smoothing: SmoothingMode

    public init(
        windowMs: Int64 = 8_000,
        rule: ConfidenceRule = ConfidenceRule(),
        smoothingWindow: Int = 5,
        smoothing: SmoothingMode = .median
    ) {
        self.windowMs = windowMs
        self.rule = rule
        self.smoothingWindow = smoothingWindow
        self.smoothing = smoothing
    }
}

/// The beacon a ranging window settled on.
public struct BeaconCandidate: Sendable, Hashable {
    public var beacon: BeaconIdentity
    /// Site of the beacon in the `SiteDirectory` (-1 for a standalone window).
    public var siteIndex: Int32
    public var smoothedRssi: Float
    public var medianRssi: Float
    public var standardDeviation: Float
    public var readings: Int
    public var decidedAt: Timestamp
}

public enum RangingOutcome: Sendable, Hashable {
    /// Still collecting readings.
    case collecting
    /// Finished early: the nearest beacon passed the confidence rule.
    case candidate(BeaconCandidate)
    /// The window ran out without a confident nearest beacon: no candidate.
    case timedOut
}

/// A short ranging burst (a `RangingWindow`, also called `ShortRanger`): readings at about 1 Hz for up to
/// `windowMs`; finishes early once the nearest beacon (by smoothed RSSI) has at least `minReadings`
/// readings whose most recent `minReadings` have a standard deviation below `maxStdDevDb` and a median
/// above `enterRssi`; returns no candidate on timeout.
///
/// A value type driven by the caller: `add` for each reading, `finish` when the window's timer fires.
/// The `PresenceStateMachine` uses the same rule (`RangingWindow.evaluate`) on its own tracker.
public struct RangingWindow: Sendable {
    public let config: RangingConfig
    public let startedAt: Timestamp
    public var deadline: Timestamp { startedAt + config.windowMs }
    public private(set) var tracker: BeaconTracker
    public private(set) var outcome: RangingOutcome = .collecting
    /// Valid readings accepted so far.
    public private(set) var readingCount = 0

    public init(config: RangingConfig = RangingConfig(), startedAt: Timestamp) {
        self.config = config
        self.startedAt = startedAt
        // Within a window every beacon heard counts as fresh.
        tracker = BeaconTracker(
            window: config.smoothingWindow, mode: config.smoothing, freshnessMs: max(config.windowMs, 1))
    }

    /// Feeds one reading. Missing data (0, 127) is ignored. Returns the outcome so far; once the window
    /// has finished, further readings change nothing.
    @discardableResult
    public mutating func add(_ reading: BeaconReading, at now: Timestamp) -> RangingOutcome {
        guard case .collecting = outcome else { return outcome }
        if now >= deadline { return finish(at: now) }
        guard tracker.record(reading, at: now, resolveSite: { _ in -1 }) != nil else { return outcome }
        readingCount += 1
        if let candidate = RangingWindow.evaluate(tracker, rule: config.rule, at: now) {
            outcome = .candidate(candidate)
        }
        return outcome
    }

    /// Ends the window (its timer fired). A window still collecting times out with no candidate.
    @discardableResult
    public mutating func finish(at now: Timestamp) -> RangingOutcome {
        if case .collecting = outcome { outcome = .timedOut }
        return outcome
    }

    /// The nearest fresh beacon (among those whose site index passes `eligible`) if it passes `rule`,
    /// else nil.
    public static func evaluate(
        _ tracker: BeaconTracker, rule: ConfidenceRule, at now: Timestamp, eligible: (Int32) -> Bool = { _ in true }
    ) -> BeaconCandidate? {
        guard let index = tracker.nearest(at: now, where: eligible) else { return nil }
        let slot = tracker.slot(index)
        guard rule.isConfident(slot.smoother) else { return nil }
        let stats = slot.smoother.recentStatistics(rule.minReadings)
        return BeaconCandidate(
            beacon: slot.beacon,
            siteIndex: slot.siteIndex,
            smoothedRssi: slot.smoothed,
            medianRssi: stats?.median ?? slot.smoothed,
            standardDeviation: stats?.standardDeviation ?? 0,
            readings: slot.smoother.count,
            decidedAt: now)
    }
}
