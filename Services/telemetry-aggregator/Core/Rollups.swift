import Foundation

/// The three dimensions every number is broken down by
/// (docs/SPECIFICATION.md, "8. Telemetry and the SLO").
///
/// A value the message does not carry is `unknown`, a value of its own, so totals over all values
/// still add up and a filter can ask for the unattributed part. Values are trimmed and cut to
/// `maxLength` characters (the longest id the registry and the gateway accept): a buggy app cannot
/// create unbounded row keys.
package struct Dimensions: Hashable, Sendable, Codable {
    package static let unknown = "unknown"
    package static let maxLength = 128

    package var site: String
    package var appVersion: String
    package var deviceModel: String

    package init(site: String?, appVersion: String?, deviceModel: String?) {
        self.site = Self.normalize(site)
        self.appVersion = Self.normalize(appVersion)
        self.deviceModel = Self.normalize(deviceModel)
    }

    package static func normalize(_ value: String?) -> String {
        guard let trimmed = value?.trimmingCharacters(in: .whitespacesAndNewlines), !trimmed.isEmpty else { return unknown }
        return trimmed.count > maxLength ? String(trimmed.prefix(maxLength)) : trimmed
    }
}

/// Minutes since 1970-01-01T00:00Z: the rollup grain.
package enum EpochMinute {
    package static func of(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / 60).rounded(.down))
    }

    package static func date(_ minute: Int64) -> Date {
        Date(timeIntervalSince1970: TimeInterval(minute) * 60)
    }
}

/// The counter metrics of the minute rollup (`telemetry.rollup_minute.metric`).
package enum CounterMetric {
    /// Device telemetry event `name`: count, and the sum of its `value` when it has one.
    package static func telemetry(_ name: String) -> String { "telemetry." + name }
    /// Attendance events first received by the gateway (the SLO's denominator).
    package static let sloEvents = "slo.events"
    /// ... of which received within the SLO threshold after the trigger.
    package static let sloGood = "slo.good"
    /// The same two, filed under the minute of the receipt instead of the trigger's: what the burn-rate
    /// alerts count (a late event burns the budget when the server learns of it).
    package static let sloEventsByReceipt = "slo.events_by_receipt"
    package static let sloGoodByReceipt = "slo.good_by_receipt"
    /// Attendance events the device had queued offline (`queuedOffline`).
    package static let offlineEvents = "events.offline"
    /// First verdict of an idempotency key, by outcome (`verdict.accepted`, `verdict.rejected`, ...).
    package static func verdict(_ outcome: String) -> String { "verdict." + outcome }
    /// Session changes by kind (`session.opened`, ...).
    package static func session(_ kind: String) -> String { "session." + kind }
    /// Battery drain between consecutive readings of one upload: sum = percentage points lost.
    package static let batteryDrainPoints = "battery.drain_points"
    /// ... and the hours those readings span (sum = hours).
    package static let batteryDrainHours = "battery.drain_hours"
}

/// The minute an SLO count is filed under, and its two counters.
package enum SLOFiling: Sendable, Hashable {
    /// The trigger's minute: the windows and the error budget.
    case trigger
    /// The receipt's minute: the burn-rate alerts.
    case receipt

    package var goodMetric: String { self == .trigger ? CounterMetric.sloGood : CounterMetric.sloGoodByReceipt }
    package var eventsMetric: String { self == .trigger ? CounterMetric.sloEvents : CounterMetric.sloEventsByReceipt }
}

/// The latency histograms of the minute rollup (`telemetry.latency_minute.metric`).
package enum LatencyMetric {
    /// Device trigger time → the first verdict's decision time.
    package static let triggerToVerdict = "trigger_to_verdict_ms"
    /// Device trigger time → the gateway's first receipt.
    package static let triggerToReceipt = "trigger_to_receipt_ms"
}

/// Where a number lands: one minute, one combination of dimensions, one metric.
package struct RollupKey: Hashable, Sendable {
    package var minute: Int64
    package var dimensions: Dimensions
    package var metric: String
}

/// A count and an integer sum. Sums are kept in millionths of the unit (`sumMicros`) so adding is
/// exact and order-free: replaying messages in other batch boundaries gives the same bits.
package struct CounterCell: Hashable, Sendable {
    package var count: Int64
    package var sumMicros: Int64

    package init(count: Int64 = 0, sumMicros: Int64 = 0) {
        self.count = count
        self.sumMicros = sumMicros
    }

    /// A value in millionths, within the ±10⁹ the gateway accepts (a message from elsewhere is clamped
    /// to it; not finite counts as 0).
    package static func micros(_ value: Double) -> Int64 {
        guard value.isFinite else { return 0 }
        let scaled = (value * 1_000_000).rounded()
        return Int64(max(min(scaled, 1.0e15), -1.0e15))
    }

    package var sum: Double { Double(sumMicros) / 1_000_000 }

    /// Adds another cell; a total beyond `Int64` stays at its bound (it never traps).
    package mutating func add(_ other: CounterCell) {
        count = Self.saturating(count, other.count)
        sumMicros = Self.saturating(sumMicros, other.sumMicros)
    }

    package static func saturating(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard overflow else { return sum }
        return b > 0 ? .max : .min
    }
}

/// What one batch of messages adds to the rollups; merged into PostgreSQL by adding.
package struct RollupDelta: Sendable {
    package var counters: [RollupKey: CounterCell] = [:]
    package var histograms: [RollupKey: LogHistogram] = [:]

    package init() {}

    package var isEmpty: Bool { counters.isEmpty && histograms.isEmpty }

    package mutating func count(_ metric: String, minute: Int64, _ dimensions: Dimensions, count: Int64 = 1, sumMicros: Int64 = 0) {
        counters[RollupKey(minute: minute, dimensions: dimensions, metric: metric), default: CounterCell()]
            .add(CounterCell(count: count, sumMicros: sumMicros))
    }

    package mutating func latency(_ metric: String, minute: Int64, _ dimensions: Dimensions, milliseconds: Int64) {
        histograms[RollupKey(minute: minute, dimensions: dimensions, metric: metric), default: LogHistogram()].record(milliseconds)
    }

    package mutating func merge(_ other: RollupDelta) {
        for (key, cell) in other.counters { counters[key, default: CounterCell()].add(cell) }
        for (key, histogram) in other.histograms { histograms[key, default: LogHistogram()].merge(histogram) }
    }
}
