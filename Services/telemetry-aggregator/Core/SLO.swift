import Foundation

/// "99 % of events reach the server within 5 minutes of the trigger, offline cases included"
/// (docs/SPECIFICATION.md, "8. Telemetry and the SLO"). The target is kept in permyriad so every
/// comparison is integer arithmetic: a burn rate exactly at an alert threshold fires, one event fewer
/// does not, with no rounding.
public struct SLOObjective: Hashable, Sendable, Codable {
    /// 9900 = 99 %.
    public var targetPermyriad: Int
    /// An event is good when the gateway received it at most this long after the trigger.
    public var thresholdSeconds: Int
    /// The error budget's window, in minutes (30 days).
    public var budgetWindowMinutes: Int

    public init(targetPermyriad: Int = 9_900, thresholdSeconds: Int = 300, budgetWindowMinutes: Int = 30 * 24 * 60) {
        precondition((1..<10_000).contains(targetPermyriad), "the target must be within (0 %, 100 %)")
        self.targetPermyriad = targetPermyriad
        self.thresholdSeconds = thresholdSeconds
        self.budgetWindowMinutes = budgetWindowMinutes
    }

    public static let standard = SLOObjective()

    public var target: Double { Double(targetPermyriad) / 10_000 }
    /// The allowed share of bad events (0.01).
    public var errorBudgetFraction: Double { Double(10_000 - targetPermyriad) / 10_000 }

    public func isGood(latencyMs: Int64) -> Bool { latencyMs <= Int64(thresholdSeconds) * 1000 }
}

/// Good and total events of one window.
public struct SLICount: Hashable, Sendable, Codable {
    public var good: Int64
    public var total: Int64

    public init(good: Int64, total: Int64) {
        self.good = good
        self.total = total
    }

    public var bad: Int64 { max(0, total - good) }
    /// good / total; 1 when nothing happened (no events, nothing wrong).
    public var compliance: Double { total == 0 ? 1 : Double(good) / Double(total) }
    public var errorRate: Double { total == 0 ? 0 : Double(bad) / Double(total) }

    /// How many times faster than allowed the budget burns: error rate / (1 - target).
    public func burnRate(_ objective: SLOObjective) -> Double {
        // bad * 10000 / (total * (10000 - target)): integers until the one division, so a burn rate of
        // exactly 20 prints as 20, not 20.000000000000004.
        total == 0 ? 0 : Double(bad) * 10_000 / (Double(total) * Double(10_000 - objective.targetPermyriad))
    }

    /// `burnRate >= thresholdTenths / 10`, exactly: bad * 10000 * 10 >= threshold * (10000 - target) * total.
    public func burnRate(_ objective: SLOObjective, atLeastTenths thresholdTenths: Int) -> Bool {
        guard total > 0 else { return false }
        let lhs = Int64(bad) * 10_000 * 10
        let rhs = Int64(thresholdTenths) * Int64(10_000 - objective.targetPermyriad) * total
        return lhs >= rhs
    }
}

/// The error budget over the budget window.
public struct ErrorBudget: Hashable, Sendable, Codable {
    /// Bad events the window may hold: (1 - target) * total.
    public var allowedBad: Double
    public var bad: Int64
    /// 1 - bad / allowed: 1 untouched, 0 spent, negative overspent. 1 when there were no events.
    public var remaining: Double

    public init(_ count: SLICount, objective: SLOObjective) {
        allowedBad = Double(count.total) * objective.errorBudgetFraction
        bad = count.bad
        remaining = count.total == 0 ? 1 : 1 - count.burnRate(objective)
    }
}

/// A multi-window burn-rate alert (Google SRE workbook, "Alerting on SLOs", multiwindow,
/// multi-burn-rate): it fires when BOTH the long and the short window burn at least `threshold`.
/// The long window gives significance, the short one makes the alert stop soon after the burn does.
public struct BurnRateAlertRule: Hashable, Sendable, Codable {
    public var name: String
    /// `page` or `ticket`.
    public var severity: String
    public var longWindow: SLOWindow
    public var shortWindow: SLOWindow
    /// The burn-rate threshold in tenths (144 = 14.4).
    public var thresholdTenths: Int

    public init(name: String, severity: String, longWindow: SLOWindow, shortWindow: SLOWindow, thresholdTenths: Int) {
        self.name = name
        self.severity = severity
        self.longWindow = longWindow
        self.shortWindow = shortWindow
        self.thresholdTenths = thresholdTenths
    }

    public var threshold: Double { Double(thresholdTenths) / 10 }

    /// 14.4 over 1 h and 5 min: 2 % of a 30-day budget spent in one hour.
    public static let fast = BurnRateAlertRule(
        name: "fast-burn", severity: "page", longWindow: .hour1, shortWindow: .minutes5, thresholdTenths: 144)
    /// 6 over 6 h and 30 min: 5 % of the budget spent in six hours.
    public static let slow = BurnRateAlertRule(
        name: "slow-burn", severity: "ticket", longWindow: .hours6, shortWindow: .minutes30, thresholdTenths: 60)
    public static let standard: [BurnRateAlertRule] = [.fast, .slow]

    public func isFiring(long: SLICount, short: SLICount, objective: SLOObjective) -> Bool {
        long.burnRate(objective, atLeastTenths: thresholdTenths) && short.burnRate(objective, atLeastTenths: thresholdTenths)
    }
}

/// The windows the SLO is evaluated over: the alert windows and the summary windows.
public enum SLOWindow: String, CaseIterable, Hashable, Sendable, Codable {
    case minutes5 = "5m"
    case minutes30 = "30m"
    case hour1 = "1h"
    case hours6 = "6h"
    case day1 = "1d"
    case days30 = "30d"

    public var minutes: Int {
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
    public static let summaryWindows: [SLOWindow] = [.minutes5, .hour1, .day1, .days30]

    /// The minutes `[first, last]` a window ending at `now` covers: the current (partial) minute and
    /// the `minutes - 1` before it.
    public func minuteRange(endingAt now: Date) -> ClosedRange<Int64> {
        let last = EpochMinute.of(now)
        return (last - Int64(minutes) + 1)...last
    }
}

/// One window's SLO numbers.
public struct SLOWindowReport: Hashable, Sendable, Codable {
    public var window: String
    public var good: Int64
    public var total: Int64
    public var compliance: Double
    public var burnRate: Double
}

public struct BurnRateAlertState: Hashable, Sendable, Codable {
    public var name: String
    public var severity: String
    public var longWindow: String
    public var shortWindow: String
    public var threshold: Double
    public var longBurnRate: Double
    public var shortBurnRate: Double
    public var firing: Bool
}

/// The SLO, its budget and its alerts, from the good/total counts of each window.
public struct SLOReport: Hashable, Sendable, Codable {
    public var objective: String
    public var target: Double
    public var thresholdSeconds: Int
    public var budgetWindow: String
    public var windows: [SLOWindowReport]
    public var errorBudget: ErrorBudget
    public var alerts: [BurnRateAlertState]

    public init(counts: [SLOWindow: SLICount], objective: SLOObjective = .standard, rules: [BurnRateAlertRule] = BurnRateAlertRule.standard)
    {
        func count(_ window: SLOWindow) -> SLICount { counts[window] ?? SLICount(good: 0, total: 0) }
        self.objective =
            "\(Double(objective.targetPermyriad) / 100) % of events reach the server within \(objective.thresholdSeconds / 60) minutes of the trigger, offline cases included"
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
            let long = count(rule.longWindow), short = count(rule.shortWindow)
            return BurnRateAlertState(
                name: rule.name, severity: rule.severity, longWindow: rule.longWindow.rawValue, shortWindow: rule.shortWindow.rawValue,
                threshold: rule.threshold, longBurnRate: long.burnRate(objective), shortBurnRate: short.burnRate(objective),
                firing: rule.isFiring(long: long, short: short, objective: objective))
        }
    }

    public func window(_ window: SLOWindow) -> SLOWindowReport? { windows.first { $0.window == window.rawValue } }
}
