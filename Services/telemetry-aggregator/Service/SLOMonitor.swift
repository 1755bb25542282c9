import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import ServiceRuntime
import Synchronization
import TelemetryAggregatorCore

/// The aggregator's own series on `/metrics`: what the pipeline counted and, recomputed every
/// `sloRefreshInterval` from PostgreSQL (so every replica reports the same numbers), the SLO over all
/// sites, its budget and the burn-rate alerts: `telemetry_slo_alert_firing{alert,severity}` is 1 while
/// an alert fires, for Prometheus/Alertmanager to route.
package final class TelemetryServiceMetrics: Sendable {
    let newMessages: [AggregatedKind: Counter]
    let duplicates: Counter
    let deadLetters: Counter
    let compliance: [SLOWindow: Gauge]
    let burnRate: [SLOWindow: Gauge]
    let budgetRemaining: Gauge
    let sloTarget: Gauge
    let alertFiring: [String: Gauge]
    /// What each alert compares: its long and short windows' burn rates, counted by arrival minute. The
    /// `telemetry_slo_burn_rate` of a window counts by trigger minute, so its short windows stay low
    /// while late events arrive: an on-call reads these against the thresholds.
    let alertBurnRate: [String: (long: Gauge, short: Gauge)]
    let lastEvaluation: Gauge

    package init(registry: PrometheusCollectorRegistry, rules: [BurnRateAlertRule] = BurnRateAlertRule.standard) {
        /// A metric's whole name (its unit, `total` or `seconds`, included) and its help line.
        func metric(metricName: String, help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: metricName, unitName: "", helpText: help)
        }
        let aggregated = metric(metricName: "telemetry_aggregated_total", help: "Messages counted into the rollups for the first time")
        var newMessages: [AggregatedKind: Counter] = [:]
        for kind in AggregatedKind.allCases {
            newMessages[kind] = registry.makeCounter(descriptor: aggregated, labels: [("kind", kind.rawValue)])
        }
        self.newMessages = newMessages
        duplicates = registry.makeCounter(
            descriptor: metric(metricName: "telemetry_duplicates_total", help: "Messages or events seen before, not counted again"))
        deadLetters = registry.makeCounter(
            descriptor: metric(metricName: "telemetry_dead_letters_total", help: "Undecodable messages sent to the DLQ"))
        let complianceMetric = metric(metricName: "telemetry_slo_compliance", help: "Share of events received within the SLO threshold")
        let burnRateMetric = metric(metricName: "telemetry_slo_burn_rate", help: "Error rate divided by the error budget fraction")
        var compliance: [SLOWindow: Gauge] = [:], burnRate: [SLOWindow: Gauge] = [:]
        for window in SLOWindow.allCases {
            compliance[window] = registry.makeGauge(descriptor: complianceMetric, labels: [("window", window.rawValue)])
            burnRate[window] = registry.makeGauge(descriptor: burnRateMetric, labels: [("window", window.rawValue)])
        }
        self.compliance = compliance
        self.burnRate = burnRate
        budgetRemaining = registry.makeGauge(
            descriptor: metric(
                metricName: "telemetry_slo_error_budget_remaining", help: "Share of the 30-day error budget left (negative: overspent)"))
        sloTarget = registry.makeGauge(descriptor: metric(metricName: "telemetry_slo_target", help: "The SLO target (0.99)"))
        let firing = metric(metricName: "telemetry_slo_alert_firing", help: "1 while the multi-window burn-rate alert fires")
        var alertFiring: [String: Gauge] = [:]
        for rule in rules {
            alertFiring[rule.name] = registry.makeGauge(descriptor: firing, labels: [("alert", rule.name), ("severity", rule.severity)])
        }
        self.alertFiring = alertFiring
        let alertBurn = metric(
            metricName: "telemetry_slo_alert_burn_rate",
            help: "Burn rate an alert compares with its threshold, over its long or short window, by the minute events arrived")
        var alertBurnRate: [String: (long: Gauge, short: Gauge)] = [:]
        for rule in rules {
            alertBurnRate[rule.name] = (
                registry.makeGauge(descriptor: alertBurn, labels: [("alert", rule.name), ("window", rule.longWindow.rawValue)]),
                registry.makeGauge(descriptor: alertBurn, labels: [("alert", rule.name), ("window", rule.shortWindow.rawValue)])
            )
        }
        self.alertBurnRate = alertBurnRate
        lastEvaluation = registry.makeGauge(
            descriptor: metric(metricName: "telemetry_slo_last_evaluation_seconds", help: "Unix time of the last SLO evaluation"))
    }

    func record(_ result: TelemetryBatchResult) {
        for (kind, count) in result.new { newMessages[kind]?.increment(by: Int64(count)) }
        duplicates.increment(by: Int64(result.duplicates))
        deadLetters.increment(by: Int64(result.deadLetters))
    }

    package func update(_ report: SLOReport, at now: Date) {
        sloTarget.set(report.target)
        for window in report.windows {
            guard let w = SLOWindow(rawValue: window.window) else { continue }
            compliance[w]?.set(window.compliance)
            burnRate[w]?.set(window.burnRate)
        }
        budgetRemaining.set(report.errorBudget.remaining)
        for alert in report.alerts {
            alertFiring[alert.name]?.set(to: alert.firing ? 1.0 : 0.0)
            alertBurnRate[alert.name]?.long.set(alert.longBurnRate)
            alertBurnRate[alert.name]?.short.set(alert.shortBurnRate)
        }
        lastEvaluation.set(now.timeIntervalSince1970)
    }
}

/// Recomputes the SLO gauges periodically, and prunes old rollups less often.
///
/// The day and 30-day windows (the budget; no alert reads them) are read again every
/// `longWindowsInterval` only: each sums a month of per-minute rows, which at a large deployment is
/// tens of millions of rows, while the alerts' windows (6 hours at most) change by the minute.
package struct SLOMonitor: Service {
    let repository: any TelemetryQueryRepository
    let metrics: TelemetryServiceMetrics
    let objective: SLOObjective
    let interval: Duration
    let pruneInterval: Duration
    let prune: (@Sendable () async throws -> Void)?
    let logger: Logger
    /// How often the windows of `slowWindows` are read again.
    var longWindowsInterval: Duration = .seconds(300)
    let longWindows = LongWindows()

    /// The windows read every `longWindowsInterval` rather than every `interval`.
    package static let slowWindows: Set<SLOWindow> = [.day1, .days30]

    /// The long windows' counts and when they were read (monotonic).
    final class LongWindows: Sendable {
        let read = Mutex<(counts: [SLOWindow: SLICount], at: ContinuousClock.Instant)?>(nil)
    }

    /// One evaluation: the alerts' and short windows now, the long ones when they are older than
    /// `longWindowsInterval` (and at the first evaluation).
    @discardableResult
    package func evaluate(now: Date = Date()) async throws -> SLOReport {
        let filter = MetricsFilter()
        let uptime = ContinuousClock.now
        var long = longWindows.read.withLock { read in read.flatMap { uptime - $0.at < longWindowsInterval ? $0.counts : nil } }
        if long == nil {
            let counts = try await repository.sloCounts(filter: filter, windows: Array(Self.slowWindows), now: now, filedBy: .trigger)
            longWindows.read.withLock { $0 = (counts, uptime) }
            long = counts
        }
        let report = try await repository.sloReport(filter: filter, now: now, objective: objective, known: long ?? [:])
        metrics.update(report, at: now)
        return report
    }

    package func run() async throws {
        let clock = ContinuousClock()
        var nextPrune = clock.now
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await evaluate()
            } catch {
                logger.warning("SLO evaluation failed", metadata: ["error": .string(PostgresFailure.description(of: error))])
            }
            if let prune, clock.now >= nextPrune {
                nextPrune = clock.now.advanced(by: pruneInterval)
                do { try await prune() } catch {
                    logger.warning("pruning old rollups failed", metadata: ["error": .string(PostgresFailure.description(of: error))])
                }
            }
            try? await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
        }
    }
}
