/// How `RssiSmoother.smoothed` is computed. Median and standard deviation over the window are always
/// available; the mode only chooses the single "smoothed RSSI" used for nearest-beacon choice and for
/// the enter/leave hysteresis.
public enum SmoothingMode: Sendable, Hashable {
    /// Median of the sliding window: robust to single outliers and dropouts.
    case median
    /// Exponential moving average, `s = alpha * x + (1 - alpha) * s`, 0 < alpha <= 1.
    case ema(alpha: Float)
    /// One-dimensional Kalman filter on a constant-level model (process noise q, measurement noise r,
    /// both in dB²). Smooth like an EMA but adapts its gain to how settled the estimate is.
    case kalman(processNoise: Float, measurementNoise: Float)
}

/// Sixteen signed bytes packed into two words: a fixed-capacity ring buffer that lives inline in its
/// owner (no heap, no per-sample allocation, trivially copyable).
struct SampleRing: Sendable, Hashable {
    var low: UInt64 = 0
    var high: UInt64 = 0

    static let capacity = 16

    subscript(index: Int) -> Int8 {
        get {
            let word = index < 8 ? low : high
            return Int8(truncatingIfNeeded: word >> (UInt64(index & 7) &* 8))
        }
        set {
            let shift = UInt64(index & 7) &* 8
            let mask = ~(UInt64(0xFF) << shift)
            let bits = UInt64(UInt8(bitPattern: newValue)) << shift
            if index < 8 { low = (low & mask) | bits } else { high = (high & mask) | bits }
        }
    }
}

/// Sliding-window RSSI smoothing: median, standard deviation, plus optional EMA or Kalman.
///
/// Fixed capacity (at most 16 samples) stored inline, running sums for O(1) mean and variance, and a
/// median computed over at most 16 values on the stack: the hot path never allocates.
/// Readings of 0 or 127 (and anything outside -127...-1) are missing data and are ignored.
public struct RssiSmoother: Sendable, Hashable {
    public static let maxWindow = SampleRing.capacity

    var ring = SampleRing()
    /// Index of the next write.
    var head: UInt8 = 0
    var storedCount: UInt8 = 0
    let window: UInt8
    var sum: Int32 = 0
    var sumOfSquares: Int32 = 0
    var filtered: Float = 0
    var variance: Float = 0
    public let mode: SmoothingMode

    /// - Parameter window: samples kept, 1...16.
    public init(window: Int = 5, mode: SmoothingMode = .median) {
        precondition((1...RssiSmoother.maxWindow).contains(window), "window must be 1...16")
        self.window = UInt8(window)
        self.mode = mode
    }

    /// Number of valid samples in the window.
    public var count: Int { Int(storedCount) }
    public var isEmpty: Bool { storedCount == 0 }
    public var windowSize: Int { Int(window) }

    /// Adds one reading. Returns false (and changes nothing) when the reading is missing data.
    @discardableResult
    public mutating func add(_ rssi: Int) -> Bool {
        guard Rssi.isValid(rssi) else { return false }
        let value = Int8(truncatingIfNeeded: rssi)
        let v32 = Int32(value)
        if storedCount == window {
            let old = Int32(ring[Int(head)])
            sum &-= old
            sumOfSquares &-= old &* old
        } else {
            storedCount &+= 1
        }
        ring[Int(head)] = value
        head = head &+ 1 == window ? 0 : head &+ 1
        sum &+= v32
        sumOfSquares &+= v32 &* v32
        updateFilter(Float(value))
        return true
    }

    mutating func updateFilter(_ x: Float) {
        switch mode {
        case .median:
            break
        case .ema(let alpha):
            // `variance` doubles as the "initialised" marker for the EMA (it has no variance of its own).
            filtered = variance == 0 ? x : alpha * x + (1 - alpha) * filtered
            variance = 1
        case .kalman(let q, let r):
            if variance == 0 {
                // First sample: start at the measurement with the measurement's own uncertainty.
                filtered = x
                variance = r
            } else {
                let p = variance + q
                let gain = p / (p + r)
                filtered += gain * (x - filtered)
                variance = (1 - gain) * p
            }
        }
    }

    /// Forgets every sample (used when a beacon has not been heard for a long time: an old window would
    /// otherwise vouch for a presence that is no longer there).
    public mutating func reset() {
        ring = SampleRing()
        head = 0
        storedCount = 0
        sum = 0
        sumOfSquares = 0
        filtered = 0
        variance = 0
    }

    /// Arithmetic mean of the window.
    public var mean: Float? {
        storedCount == 0 ? nil : Float(sum) / Float(storedCount)
    }

    /// Sample standard deviation (n - 1 denominator; 0 for fewer than two samples), in dB.
    /// The n - 1 form is the conservative choice for the tiny windows used here.
    public var standardDeviation: Float {
        let n = Int32(storedCount)
        guard n > 1 else { return 0 }
        // n * sumSq - sum² is exact in integers; divide once.
        let numerator = Float(n &* sumOfSquares &- sum &* sum)
        let v = numerator / Float(n &* (n &- 1))
        return v > 0 ? v.squareRoot() : 0
    }

    /// Median of the window (mean of the two middle values for an even count), or nil when empty.
    public var median: Float? {
        let n = Int(storedCount)
        guard n > 0 else { return nil }
        if n == 1 { return Float(ring[0]) }
        return withUnsafeTemporaryAllocation(of: Int8.self, capacity: RssiSmoother.maxWindow) { buf in
            // Insertion sort of at most 16 values: faster than anything clever at this size.
            for i in 0..<n {
                let v = ring[i]
                var j = i
                while j > 0 && buf[j - 1] > v {
                    buf[j] = buf[j - 1]
                    j -= 1
                }
                buf[j] = v
            }
            if n & 1 == 1 { return Float(buf[n / 2]) }
            return (Float(buf[n / 2 - 1]) + Float(buf[n / 2])) / 2
        }
    }

    /// Median and sample standard deviation of the most recent `k` samples (fewer if the window holds
    /// fewer), or nil when empty. The ranging confidence rule looks at the last few readings only: a
    /// phone walking through a 3-5 m bubble at 2 m/s is inside it for 2-4 readings, and a longer window
    /// would mix the approach into the statistics.
    public func recentStatistics(_ k: Int) -> (median: Float, standardDeviation: Float)? {
        let n = min(k, Int(storedCount))
        guard n > 0 else { return nil }
        let w = Int(window)
        return withUnsafeTemporaryAllocation(of: Int8.self, capacity: RssiSmoother.maxWindow) { buf in
            var sum: Int32 = 0
            var sumSq: Int32 = 0
            var i = (Int(head) - n + w) % w
            for filled in 0..<n {
                let v = ring[i]
                i = i + 1 == w ? 0 : i + 1
                sum += Int32(v)
                sumSq += Int32(v) * Int32(v)
                var j = filled
                while j > 0 && buf[j - 1] > v {
                    buf[j] = buf[j - 1]
                    j -= 1
                }
                buf[j] = v
            }
            let median = n & 1 == 1 ? Float(buf[n / 2]) : (Float(buf[n / 2 - 1]) + Float(buf[n / 2])) / 2
            guard n > 1 else { return (median, 0) }
            let n32 = Int32(n)
            let variance = Float(n32 * sumSq - sum * sum) / Float(n32 * (n32 - 1))
            return (median, variance > 0 ? variance.squareRoot() : 0)
        }
    }

    /// The smoothed RSSI according to `mode`, or nil when there are no samples.
    public var smoothed: Float? {
        guard storedCount > 0 else { return nil }
        switch mode {
        case .median: return median
        case .ema, .kalman: return filtered
        }
    }

    /// The samples in arrival order, oldest first (allocates; used when building a payload's
    /// `rssiSeries`, never on the hot path).
    public var samples: [Int] {
        let n = Int(storedCount)
        var out = [Int]()
        out.reserveCapacity(n)
        let w = Int(window)
        var i = (Int(head) - n + w) % w
        for _ in 0..<n {
            out.append(Int(ring[i]))
            i = i + 1 == w ? 0 : i + 1
        }
        return out
    }
}
