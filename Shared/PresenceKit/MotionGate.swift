/// What the motion coprocessor says the user is doing (CMMotionActivity on iOS).
public enum MotionActivity: String, Sendable, Hashable, Codable, CaseIterable {
    case unknown, stationary, walking, running, cycling, automotive
}

/// Settings of the motion gate (walking/running recently, or >= 30 steps in 2 min).
public struct MotionGateConfig: Sendable, Hashable {
    /// Walking or running within this long counts as "recently" (2-3 minutes).
    public var recentActivityMs: Int64
    /// Steps needed within `stepsWindowMs` (`min_steps_window`).
    public var minSteps: Int
    public var stepsWindowMs: Int64

    public init(recentActivityMs: Int64 = 180_000, minSteps: Int = 30, stepsWindowMs: Int64 = 120_000) {
        self.recentActivityMs = recentActivityMs
        self.minSteps = minSteps
        self.stepsWindowMs = stepsWindowMs
    }
}

/// Motion gating: a check-in needs the user to have been walking or running recently, or to have taken
/// enough steps lately. A phone lying on a desk next to the beacon (or a spoofer replaying beacon
/// frames to a parked phone) does not move, so it does not check in.
///
/// Steps are counted in 12 buckets covering the window (each `stepsWindowMs / 12` wide, 10 s for the
/// default 2 minutes), packed into three words: the window sum is exact to one bucket's width and the
/// gate stays a small inline value.
public struct MotionGate: Sendable, Hashable {
    public static let bucketCount = 12

    public let config: MotionGateConfig
    public private(set) var lastActivity: MotionActivity = .unknown
    /// Last time walking or running was reported.
    public private(set) var lastActiveAt: Timestamp = .distantPast
    var buckets: (UInt64, UInt64, UInt64) = (0, 0, 0)
    /// Bucket number (time / bucket width) of the newest bucket written.
    var newestBucket: Int64 = .min

    public init(config: MotionGateConfig = MotionGateConfig()) {
        self.config = config
    }

    public static func == (a: MotionGate, b: MotionGate) -> Bool {
        a.config == b.config && a.lastActivity == b.lastActivity && a.lastActiveAt == b.lastActiveAt
            && a.buckets == b.buckets && a.newestBucket == b.newestBucket
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(lastActiveAt)
        hasher.combine(newestBucket)
    }

    var bucketWidthMs: Int64 { max(1, config.stepsWindowMs / Int64(MotionGate.bucketCount)) }

    func bucket(_ i: Int) -> UInt16 {
        let word: UInt64
        switch i / 4 {
        case 0: word = buckets.0
        case 1: word = buckets.1
        default: word = buckets.2
        }
        return UInt16(truncatingIfNeeded: word >> (UInt64(i % 4) * 16))
    }

    mutating func setBucket(_ i: Int, _ value: UInt16) {
        let shift = UInt64(i % 4) * 16
        let mask = ~(UInt64(0xFFFF) << shift)
        let bits = UInt64(value) << shift
        switch i / 4 {
        case 0: buckets.0 = (buckets.0 & mask) | bits
        case 1: buckets.1 = (buckets.1 & mask) | bits
        default: buckets.2 = (buckets.2 & mask) | bits
        }
    }

    public mutating func record(activity: MotionActivity, at now: Timestamp) {
        lastActivity = activity
        if activity == .walking || activity == .running { lastActiveAt = now }
    }

    /// Adds `count` steps taken since the previous report, attributed to `now`.
    public mutating func record(steps count: Int, at now: Timestamp) {
        guard count > 0 else { return }
        let n = Int64(MotionGate.bucketCount)
        let current = now.millisecondsSinceEpoch / bucketWidthMs
        if newestBucket == .min || current - newestBucket >= n {
            buckets = (0, 0, 0)
        } else if current > newestBucket {
            var b = newestBucket + 1
            while b <= current {
                setBucket(Int(((b % n) + n) % n), 0)
                b += 1
            }
        } else if newestBucket - current >= n {
            return // older than the window: irrelevant
        }
        newestBucket = max(newestBucket, current)
        let i = Int(((current % n) + n) % n)
        // Saturating: a bucket holds at most UInt16.max steps, whatever count the host reports.
        let (total, overflow) = Int(bucket(i)).addingReportingOverflow(count)
        setBucket(i, overflow ? UInt16.max : UInt16(clamping: total))
    }

    /// Steps counted in the window ending at `now` (to one bucket's precision).
    public func steps(at now: Timestamp) -> Int {
        guard newestBucket != .min else { return 0 }
        let n = Int64(MotionGate.bucketCount)
        let current = now.millisecondsSinceEpoch / bucketWidthMs
        let age = current - newestBucket
        guard age < n else { return 0 }
        // Buckets newestBucket, newestBucket-1, ... still inside (current - n, current].
        let valid = Int(n - max(age, 0))
        var total = 0
        for k in 0..<valid {
            let b = newestBucket - Int64(k)
            total += Int(bucket(Int(((b % n) + n) % n)))
        }
        return total
    }

    /// Running, cycling or in a vehicle right now: someone going past a door, not through it (a runner
    /// slows to a walk at the door, a cyclist gets off the bike).
    public var isPassingBy: Bool {
        lastActivity == .running || lastActivity == .cycling || lastActivity == .automotive
    }

    /// Walking/running within `recentActivityMs`, or at least `minSteps` steps in the window.
    public func isSatisfied(at now: Timestamp) -> Bool {
        if now - lastActiveAt <= config.recentActivityMs && lastActiveAt != .distantPast { return true }
        return steps(at: now) >= config.minSteps
    }
}
