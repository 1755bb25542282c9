import Synchronization

/// Rate and burst of the per-device token bucket.
package struct TokenBucketConfiguration: Sendable, Hashable {
    /// Tokens added per second (the sustained request rate).
    package var ratePerSecond: Double
    /// Bucket size: requests a quiet device may make at once.
    package var burst: Int

    package init(ratePerSecond: Double, burst: Int) {
        precondition(ratePerSecond > 0 && burst >= 1, "a token bucket needs a positive rate and a burst of at least 1")
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    /// 2 requests/s sustained, 20 at once: a device's outbox draining after a day offline is a
    /// batch call or a few dozen single calls, a flood is not.
    package static let `default` = TokenBucketConfiguration(ratePerSecond: 2, burst: 20)
}

package enum RateDecision: Sendable, Hashable {
    case allowed
    /// Refused; a token is available again after this many whole seconds (at least 1).
    case limited(retryAfterSeconds: Int)
}

/// One token bucket per device, in memory (per gateway instance; a load balancer with device
/// affinity makes it per device overall, without it the limit is per instance).
///
/// Buckets of idle devices are dropped when the table grows past `maxDevices` (a full bucket holds
/// no information), so memory stays bounded by the number of recently active devices.
package final class DeviceRateLimiter: Sendable {
    package let settings: TokenBucketConfiguration
    package let maxDevices: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    package init(settings: TokenBucketConfiguration = .default, maxDevices: Int = 100_000) {
        self.settings = settings
        self.maxDevices = maxDevices
    }

    /// Takes one token for `deviceId`.
    package func acquire(_ deviceId: String, now: ContinuousClock.Instant = .now) -> RateDecision {
        let rate = settings.ratePerSecond
        let burst = Double(settings.burst)
        return buckets.withLock { buckets in
            var bucket = buckets[deviceId] ?? Bucket(tokens: burst, updated: now)
            let elapsed = max(0, Self.seconds(now - bucket.updated))
            bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
            bucket.updated = max(bucket.updated, now)
            let decision: RateDecision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = .allowed
            } else {
                let wait = (1 - bucket.tokens) / rate
                decision = .limited(retryAfterSeconds: max(1, Int(wait.rounded(.up))))
            }
            if buckets[deviceId] == nil, buckets.count >= maxDevices {
                Self.dropFullBuckets(&buckets, now: now, rate: rate, burst: burst)
            }
            buckets[deviceId] = bucket
            return decision
        }
    }

    /// Devices with a bucket in memory.
    package var trackedDevices: Int { buckets.withLock { $0.count } }

    private static func dropFullBuckets(_ buckets: inout [String: Bucket], now: ContinuousClock.Instant, rate: Double, burst: Double) {
        buckets = buckets.filter { _, bucket in bucket.tokens + seconds(now - bucket.updated) * rate < burst }
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
