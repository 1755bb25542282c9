import Foundation

/// "99 % of events reach the server within 5 minutes of the trigger, offline cases included"
/// (docs/SPECIFICATION.md, "8. Telemetry and the SLO"). The target is kept in permyriad so every
/// comparison is integer arithmetic: a burn rate exactly at an alert threshold fires, one event fewer
/// does not, with no rounding.
package struct SLOObjective: Hashable, Sendable, Codable {
    /// 9900 = 99 %.
    package var targetPermyriad: Int
    /// An event is good when the gateway received it at most this long after the trigger.
    package var thresholdSeconds: Int
    /// The error budget's window, in minutes (30 days).
    package var budgetWindowMinutes: Int

    /// The threshold as the objective's sentence says it: "5 minutes", "1 minute", "90 seconds".
    package var thresholdText: String {
        if thresholdSeconds % 60 != 0 { return "\(thresholdSeconds) seconds" }
        return thresholdSeconds == 60 ? "1 minute" : "\(thresholdSeconds / 60) minutes"
    }

    package init(targetPermyriad: Int = 9_900, thresholdSeconds: Int = 300, budgetWindowMinutes: Int = 30 * 24 * 60) {
        precondition((1..<10_000).contains(targetPermyriad), "the target must be within (0 %, 100 %)")
        self.targetPermyriad = targetPermyriad
        self.thresholdSeconds = thresholdSeconds
        self.budgetWindowMinutes = budgetWindowMinutes
    }

    package static let standard = SLOObjective()

    package var target: Double { Double(targetPermyriad) / 10_000 }
    /// The allowed share of bad events (0.01).
    package var errorBudgetFraction: Double { Double(10_000 - targetPermyriad) / 10_000 }

    package func isGood(latencyMs: Int64) -> Bool { latencyMs <= Int64(thresholdSeconds) * 1000 }
}

/// Good and total events of one window.
package struct SLICount: Hashable, Sendable, Codable {
    package var good: Int64
    package var total: Int64

    package init(good: Int64, total: Int64) {
        self.good = good
        self.total = total
    }

    package var bad: Int64 { max(0, total - good) }
    /// good / total; 1 when nothing happened (no events, nothing wrong).
    package var compliance: Double { total == 0 ? 1 : Double(good) / Double(total) }
    package var errorRate: Double { total == 0 ? 0 : Double(bad) / Double(total) }

    /// How many times faster than allowed the budget burns: error rate / (1 - target).
    package func burnRate(_ objective: SLOObjective) -> Double {
        // bad * 10000 / (total * (10000 - target)): integers until the one division, so a burn rate of
        // exactly 20 prints as 20, not 20.000000000000004.
        total == 0 ? 0 : Double(bad) * 10_000 / (Double(total) * Double(10_000 - objective.targetPermyriad))
    }

    /// `burnRate >= thresholdTenths / 10`, exactly: bad * 10000 * 10 >= threshold * (10000 - target) * total.
    package func burnRate(_ objective: SLOObjective, atLeastTenths thresholdTenths: Int) -> Bool {
        guard total > 0 else { return false }
        let lhs = Int64(bad) * 10_000 * 10
        let rhs = Int64(thresholdTenths) * Int64(10_000 - objective.targetPermyriad) * total
        return lhs >= rhs
    }
}

/// The error budget over the budget window.
package struct ErrorBudget: Hashable, Sendable, Codable {
    /// Bad events the window may hold: (1 - target) * total.
    package var allowedBad: Double
    package var bad: Int64
    /// 1 - bad / allowed: 1 untouched, 0 spent, negative overspent. 1 when there were no events.
    package var remaining: Double

    package init(_ count: SLICount, objective: SLOObjective) {
        allowedBad = Double(count.total) * objective.errorBudgetFraction
        bad = count.bad
        remaining = count.total == 0 ? 1 : 1 - count.burnRate(objective)
    }
}

/// A multi-window burn-rate alert (Google SRE workbook, "Alerting on SLOs", multiwindow,
/// multi-burn-rate): it fires when BOTH the long and the short window burn at least `threshold`.
/// The long window gives significance, the short one makes the alert stop soon after the burn does.
package struct BurnRateAlertRule: Hashable, Sendable, Codable {
    package var name: String
    /// `page` or `ticket`.
    package var severity: String
    package var longWindow: SLOWindow
    package var shortWindow: SLOWindow
    /// The burn-rate threshold in tenths (144 = 14.4).
    package var thresholdTenths: Int

    package var threshold: Double { Double(thresholdTenths) / 10 }

    /// 14.4 over 1 h and 5 min: 2 % of a 30-day budget spent in one hour.
    package static let fast = BurnRateAlertRule(
        name: "fast-burn", severity: "page", longWindow: .hour1, shortWindow: .minutes5, thresholdTenths: 144)
    /// 6 over 6 h and 30 min: 5 % of the budget spent in six hours.
    package static let slow = BurnRateAlertRule(
        name: "slow-burn", severity: "ticket", longWindow: .hours6, shortWindow: .minutes30, thresholdTenths: 60)
    package static let standard: [BurnRateAlertRule] = [.fast, .slow]

    package func isFiring(long: SLICount, short: SLICount, objective: SLOObjective) -> Bool {
        long.burnRate(objective, atLeastTenths: thresholdTenths) && short.burnRate(objective, atLeastTenths: thresholdTenths)
    }
}

/// The windows the SLO is evaluated over: the alert windows and the summary windows.
package enum SLOWindow: String, CaseIterable, Hashable, Sendable, Codable {
    case minutes5 = "5m"
    case minutes30 = "30m"
    case hour1 = "1h"
    case hours6 = "6h"
    case day1 = "1d"
    case days30 = "30d"

    package var minutes: Int {
        switch self {
        case .minutes5: return 5
        case .minutes30: return 30
        case .hour1: return 60
        case .hours6: return 360
        case .day1: return 1_440
        case .days30: return 43_200
        }
    }

    /// The windows `/v1/metrics/summary` accepts: 5 minutes, 1 hour, 1 day, 30 days.
    package static let summaryWindows: [SLOWindow] = [.minutes5, .hour1, .day1, .days30]

    /// The minutes `[first, last]` a window ending at `now` covers: the current (partial) minute and
    /// the `minutes - 1` before it.
    package func minuteRange(endingAt now: Date) -> ClosedRange<Int64> {
        let last = EpochMinute.of(now)
        return (last - Int64(minutes) + 1)...last
    }
}

/// One window's SLO numbers.
package struct SLOWindowReport: Hashable, Sendable, Codable {
    package var window: String
    package var good: Int64
    package var total: Int64
    package var compliance: Double
    package var burnRate: Double
}

package struct BurnRateAlertState: Hashable, Sendable, Codable {
    package var name: String
    package var severity: String
    package var longWindow: String
    package var shortWindow: String
    package var threshold: Double
    package var longBurnRate: Double
    package var shortBurnRate: Double
    package var firing: Bool
}

/// The SLO, its budget and its alerts, from the good/total counts of each window.
package struct SLOReport: Hashable, Sendable, Codable {
    package var objective: String
    package var target: Double
    package var thresholdSeconds: Int
    package var budgetWindow: String
    package var windows: [SLOWindowReport]
    package var errorBudget: ErrorBudget
    package var alerts: [BurnRateAlertState]

    /// `counts` are filed by trigger minute (the windows, the budget); `alertCounts` by receipt minute
    /// (the alerts: a bad event is only known once it arrives, at least the SLO threshold after its
    /// trigger, so a short window of trigger minutes can never hold one). Without `alertCounts` the
    /// alerts read `counts`.
    package init(
        counts: [SLOWindow: SLICount], alertCounts: [SLOWindow: SLICount]? = nil, objective: SLOObjective = .standard,
        rules: [BurnRateAlertRule] = BurnRateAlertRule.standard
    ) {
        func count(_ window: SLOWindow) -> SLICount { counts[window] ?? SLICount(good: 0, total: 0) }
        func alertCount(_ window: SLOWindow) -> SLICount { (alertCounts ?? counts)[window] ?? SLICount(good: 0, total: 0) }
        self.objective =
            "\(Double(objective.targetPermyriad) / 100) % of events reach the server within \(objective.thresholdText) of the trigger, offline cases included"
        target = objective.target
        thresholdSeconds = objective.thresholdSeconds
        budgetWindow = SLOWindow.days30.rawValue
        windows = SLOWindow.allCases.map { window in
            let c = count(window)
            return SLOWindowReport(
                window: window.rawValue, good: c.good, total: c.total, compliance: c.compliance, burnRate: c.burnRate(objective))
        }
        errorBudget = ErrorBudget(count(.days30), objective: objective)
        alerts = rules.map { rule in
            let long = alertCount(rule.longWindow), short = alertCount(rule.shortWindow)
            return BurnRateAlertState(
                name: rule.name, severity: rule.severity, longWindow: rule.longWindow.rawValue, shortWindow: rule.shortWindow.rawValue,
                threshold: rule.threshold, longBurnRate: long.burnRate(objective), shortBurnRate: short.burnRate(objective),
                firing: rule.isFiring(long: long, short: short, objective: objective))
        }
    }

    package func window(_ window: SLOWindow) -> SLOWindowReport? { windows.first { $0.window == window.rawValue } }
}
