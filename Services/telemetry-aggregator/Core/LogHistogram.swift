/// A mergeable latency histogram in the style of HdrHistogram: logarithmic buckets, each power of
/// two split into `2^subBucketBits` linear sub-buckets.
///
/// Values are non-negative integers (milliseconds here). Values below `2^subBucketBits` (128) each
/// have a bucket of their own and are exact. Above, a bucket covering `[2^e, 2^(e+1))` is split into
/// 128 equal parts, so a bucket is never wider than `1/128` of its lowest value: every reported value
/// (the bucket's highest equivalent value, as HdrHistogram reports it) is at most 0.79 % above the
/// true one and never below it. Values above `maxValue` (about 35 years in ms) are clamped.
///
/// Buckets are integer counts keyed by an index that depends only on the value, so histograms of
/// different minutes, dimensions or replicas merge by adding counts, in any order, exactly. That is
/// what lets PostgreSQL keep them as `(bucket, count)` rows upserted with `count = count + excluded`.
package struct LogHistogram: Sendable, Hashable {
    package static let subBucketBits = 7
    package static let subBucketCount = 1 << subBucketBits
    /// The largest recordable value (2^40 - 1).
    package static let maxValue: UInt64 = (1 << 40) - 1
    /// The worst-case relative error of a reported value: 1 / 128.
    package static let maxRelativeError = 1.0 / Double(subBucketCount)

    /// Bucket index → count (sparse: a minute's latencies occupy few buckets).
    package private(set) var counts: [Int: Int64] = [:]
    package private(set) var totalCount: Int64 = 0

    package init() {}

    /// The bucket of `value` (clamped to `0...maxValue`).
    @inlinable
    package static func bucketIndex(for value: UInt64) -> Int {
        let v = min(value, maxValue)
        if v < UInt64(subBucketCount) { return Int(v) }
        let exponent = 63 - v.leadingZeroBitCount // 2^exponent <= v < 2^(exponent+1)
        let shift = exponent - subBucketBits // bucket width is 2^shift
        let mantissa = Int(v >> UInt64(shift)) // in [128, 256)
        return (shift + 1) * subBucketCount + (mantissa - subBucketCount)
    }

    /// The values a bucket stands for.
    package static func bucketRange(_ index: Int) -> ClosedRange<UInt64> {
        precondition(index >= 0, "bucket indexes are non-negative")
        if index < subBucketCount { return UInt64(index)...UInt64(index) }
        let shift = index / subBucketCount - 1
        let mantissa = UInt64(index % subBucketCount + subBucketCount)
        let low = mantissa << UInt64(shift)
        return low...(low + (UInt64(1) << UInt64(shift)) - 1)
    }

    /// Whether an index read back from storage can be a bucket of this layout.
    package static func isValidBucket(_ index: Int) -> Bool {
        index >= 0 && index <= bucketIndex(for: maxValue)
    }

    /// Records a value; negative values (a device clock ahead of the server) count as 0.
    package mutating func record(_ value: Int64, count: Int64 = 1) {
        record(bucket: Self.bucketIndex(for: UInt64(max(0, value))), count: count)
    }

    package mutating func record(bucket: Int, count: Int64) {
        guard count > 0 else { return }
        counts[bucket, default: 0] += count
        totalCount += count
    }

    /// Adds another histogram's counts (exact, commutative, associative).
    package mutating func merge(_ other: LogHistogram) {
        for (bucket, count) in other.counts { record(bucket: bucket, count: count) }
    }

    /// The value at a quantile given in permyriad (5000 = p50, 9990 = p99.9), HdrHistogram's
    /// definition: the highest equivalent value of the bucket holding the `ceil(N * q)`-th smallest
    /// recorded value (at least the 1st). Integer rank arithmetic, so p99.9 of 1000 values is the
    /// 999th, never off by one through floating-point rounding. `nil` when empty.
    package func value(atPermyriad permyriad: Int) -> UInt64? {
        guard totalCount > 0 else { return nil }
        let q = Int64(min(max(permyriad, 0), 10_000))
        let rank = max(1, (totalCount * q + 9_999) / 10_000)
        var seen: Int64 = 0
        for bucket in counts.keys.sorted() {
            seen += counts[bucket]!
            if seen >= rank { return Self.bucketRange(bucket).upperBound }
        }
        return Self.bucketRange(counts.keys.max()!).upperBound
    }

    /// The mean of the buckets' midpoints (within the same relative error as the percentiles).
    package var mean: Double? {
        guard totalCount > 0 else { return nil }
        var sum = 0.0
        for (bucket, count) in counts {
            let range = Self.bucketRange(bucket)
            sum += (Double(range.lowerBound) + Double(range.upperBound)) / 2 * Double(count)
        }
        return sum / Double(totalCount)
    }
}

/// The percentiles the API and the status page report.
package struct LatencyPercentiles: Codable, Hashable, Sendable {
    package var count: Int64
    package var p50Ms: UInt64?
    package var p90Ms: UInt64?
    package var p99Ms: UInt64?
    package var p999Ms: UInt64?
}

extension LatencyPercentiles {
    package init(_ histogram: LogHistogram) {
        self.init(
            count: histogram.totalCount,
            p50Ms: histogram.value(atPermyriad: 5_000), p90Ms: histogram.value(atPermyriad: 9_000),
            p99Ms: histogram.value(atPermyriad: 9_900), p999Ms: histogram.value(atPermyriad: 9_990))
    }
}
