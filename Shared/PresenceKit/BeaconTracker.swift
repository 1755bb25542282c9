/// One beacon being followed: its identity, its smoother and when it was last heard.
public struct TrackedBeacon: Sendable {
    public internal(set) var beacon: BeaconIdentity
    public internal(set) var smoother: RssiSmoother
    public internal(set) var lastHeard: Timestamp
    /// `smoother.smoothed`, cached at each sample so choosing the nearest beacon never re-sorts.
    public internal(set) var smoothed: Float
    /// Index of the beacon's site in the `SiteDirectory`, or -1 when not resolved (standalone ranging).
    public internal(set) var siteIndex: Int32
    public internal(set) var occupied: Bool

    init(window: Int, mode: SmoothingMode) {
        beacon = BeaconIdentity(uuid: UUIDBits(high: 0, low: 0), major: 0, minor: 0)
        smoother = RssiSmoother(window: window, mode: mode)
        lastHeard = .distantPast
        smoothed = -.infinity
        siteIndex = -1
        occupied = false
    }
}

/// The few beacons heard around a device, each with its own smoother, in fixed inline storage.
///
/// Four slots: a phone at a gate hears one to three beacons of interest (overlapping gates); a fifth
/// evicts the one heard least recently. Storage is a tuple, not an array, so a device state is one flat
/// value with no heap buffer and no copy-on-write check per sample.
public struct BeaconTracker: Sendable {
    public static let capacity = 4

    var s0: TrackedBeacon
    var s1: TrackedBeacon
    var s2: TrackedBeacon
    var s3: TrackedBeacon
    /// A beacon not heard for this long is "lost": it is ignored when choosing the nearest beacon and its
    /// old samples are dropped when it is heard again.
    public let freshnessMs: Int64

    public init(window: Int, mode: SmoothingMode, freshnessMs: Int64) {
        let empty = TrackedBeacon(window: window, mode: mode)
        s0 = empty; s1 = empty; s2 = empty; s3 = empty
        self.freshnessMs = freshnessMs
    }

    /// Read access to slot `index` (0..<capacity).
    public func slot(_ index: Int) -> TrackedBeacon {
        switch index {
        case 0: return s0
        case 1: return s1
        case 2: return s2
        default: return s3
        }
    }

    mutating func withSlot<R>(_ index: Int, _ body: (inout TrackedBeacon) -> R) -> R {
        switch index {
        case 0: return body(&s0)
        case 1: return body(&s1)
        case 2: return body(&s2)
        default: return body(&s3)
        }
    }

    func isFresh(_ index: Int, at now: Timestamp) -> Bool {
        let s = slot(index)
        return s.occupied && s.smoother.count > 0 && now - s.lastHeard < freshnessMs
    }

    /// Records one reading. Returns the slot it went to, or nil when the reading is missing data (0,
    /// 127, ...) or `resolveSite` returns nil (a beacon that belongs to no known site is ignored, as iOS
    /// region filtering would). `resolveSite` is only called for a beacon not already tracked.
    @discardableResult
    public mutating func record(
        _ reading: BeaconReading, at now: Timestamp, resolveSite: (BeaconIdentity) -> Int32?
    ) -> Int? {
        guard Rssi.isValid(reading.rssi) else { return nil }
        var target = -1
        var free = -1
        var oldest = 0
        var oldestTime = Timestamp(millisecondsSinceEpoch: .max)
        for i in 0..<BeaconTracker.capacity {
            let s = slot(i)
            if s.occupied {
                if s.beacon == reading.beacon { target = i; break }
                if s.lastHeard < oldestTime { oldestTime = s.lastHeard; oldest = i }
            } else if free < 0 {
                free = i
            }
        }
        if target < 0 {
            guard let site = resolveSite(reading.beacon) else { return nil }
            target = free >= 0 ? free : oldest
            let beacon = reading.beacon
            withSlot(target) { s in
                s.beacon = beacon
                s.smoother.reset()
                s.siteIndex = site
                s.occupied = true
                s.smoothed = -.infinity
            }
        }
        let freshness = freshnessMs
        withSlot(target) { s in
            if now - s.lastHeard >= freshness { s.smoother.reset() }
            s.smoother.add(reading.rssi)
            s.lastHeard = now
            s.smoothed = s.smoother.smoothed ?? -.infinity
        }
        return target
    }

    /// Resolves the site of every beacon followed again (a new site directory): a beacon that belongs
    /// to no site any more is no longer followed.
    mutating func resolveSitesAgain(_ resolveSite: (BeaconIdentity) -> Int32?) {
        for i in 0..<BeaconTracker.capacity where slot(i).occupied {
            let site = resolveSite(slot(i).beacon)
            withSlot(i) { s in
                if let site {
                    s.siteIndex = site
                } else {
                    s.occupied = false
                    s.smoother.reset()
                    s.smoothed = -.infinity
                    s.lastHeard = .distantPast
                }
            }
        }
    }

    /// The fresh beacon with the strongest smoothed RSSI (the nearest one), if any.
    public func nearest(at now: Timestamp) -> Int? {
        nearest(at: now, where: { _ in true })
    }

    /// The fresh beacon with the strongest smoothed RSSI among those whose site passes `eligible`.
    public func nearest(at now: Timestamp, where eligible: (Int32) -> Bool) -> Int? {
        var best = -1
        var bestValue = -Float.infinity
        for i in 0..<BeaconTracker.capacity where isFresh(i, at: now) && eligible(slot(i).siteIndex) {
            let v = slot(i).smoothed
            if best < 0 || v > bestValue { best = i; bestValue = v }
        }
        return best < 0 ? nil : best
    }

    /// Strongest smoothed RSSI among fresh beacons of `siteIndex`, or nil when none is fresh.
    public func bestSmoothed(site siteIndex: Int32, at now: Timestamp) -> Float? {
        var found = false
        var bestValue = -Float.infinity
        for i in 0..<BeaconTracker.capacity where isFresh(i, at: now) {
            let s = slot(i)
            guard s.siteIndex == siteIndex else { continue }
            if !found || s.smoothed > bestValue {
                bestValue = s.smoothed
                found = true
            }
        }
        return found ? bestValue : nil
    }

    /// Strongest fresh evidence that `siteIndex` is still heard: for each fresh beacon of the site, the
    /// larger of its smoothed RSSI and the median of its last `recent` readings. Used to end a soft exit
    /// quickly once the signal is back, whatever the smoothing lag.
    public func bestRecoveryEvidence(site siteIndex: Int32, recent: Int, at now: Timestamp) -> Float? {
        var found = false
        var bestValue = -Float.infinity
        for i in 0..<BeaconTracker.capacity where isFresh(i, at: now) {
            let s = slot(i)
            guard s.siteIndex == siteIndex else { continue }
            let value = max(s.smoothed, s.smoother.recentStatistics(recent)?.median ?? -.infinity)
            if !found || value > bestValue {
                bestValue = value
                found = true
            }
        }
        return found ? bestValue : nil
    }

    /// Slot index currently tracking `beacon`, if any.
    public func index(of beacon: BeaconIdentity) -> Int? {
        for i in 0..<BeaconTracker.capacity where slot(i).occupied && slot(i).beacon == beacon { return i }
        return nil
    }

    /// Forgets every beacon.
    public mutating func reset() {
        for i in 0..<BeaconTracker.capacity {
            withSlot(i) { s in
                s.occupied = false
                s.smoother.reset()
                s.lastHeard = .distantPast
                s.smoothed = -.infinity
                s.siteIndex = -1
            }
        }
    }
}

/// The rule that ends a ranging window early: at least `minReadings` readings, standard deviation below
/// `maxStdDevDb` and median above the enter threshold. The defaults here are the first specified ones
/// (3 readings, 6 dB, -70 dBm), for a standalone `RangingWindow`; the state machine takes its rules from
/// `PresenceConfig` (`confidenceRule`, 12 dB spread bound, and `dwellRule`).
public struct ConfidenceRule: Sendable, Hashable {
    public var minReadings: Int
    public var maxStdDevDb: Float
    public var enterRssi: Int

    public init(minReadings: Int = 3, maxStdDevDb: Float = 6, enterRssi: Int = -70) {
        self.minReadings = minReadings
        self.maxStdDevDb = maxStdDevDb
        self.enterRssi = enterRssi
    }

    /// Judged on the most recent `minReadings` readings (see `RssiSmoother.recentStatistics`).
    public func isConfident(_ smoother: RssiSmoother) -> Bool {
        guard smoother.count >= minReadings, let stats = smoother.recentStatistics(minReadings) else { return false }
        return stats.standardDeviation < maxStdDevDb && stats.median > Float(enterRssi)
    }
}
