import Foundation
import TelemetryAggregatorCore

/// The human-readable status page: the time span of the data, the SLO, the error budget in words, the
/// alerts, the charts, the sites and the last hour, as plain HTML with SVG charts drawn here on the
/// server. No JavaScript, nothing to build, readable with any browser (and by a headless one in the tests).
///
/// Every text that comes from outside (filter values, site ids read from the database) is escaped. No
/// percentage on the page is negative: an overspent budget is "exhausted" with the factor it is over.
struct StatusPage {
    /// The per-site table lists at most this many sites (those with the most events).
    static let siteLimit = 50

    let now: Date
    let filter: MetricsFilter
    let report: SLOReport
    let summary: MetricsSummary
    let hourlySLI: [HourlySLI]
    let hourlyLatency: [HourlyLatency]
    let objective: SLOObjective
    /// Attendance events per site over the budget window (30 days ending at `now`) and the span they cover.
    let sites: SiteSLIBreakdown
    /// Trigger-to-verdict latency per site over the same 30 days (a site without verdicts is absent).
    let siteLatency: [String: LogHistogram]

    /// Good / total of the budget window, as the report has them.
    private var budgetWindowCount: SLICount {
        let window = report.window(.days30)
        return SLICount(good: window?.good ?? 0, total: window?.total ?? 0)
    }

    func html() -> String {
        let budget = BudgetState(budgetWindowCount, objective: objective)
        let firing = report.alerts.filter(\.firing)
        let filterText = [("site", filter.site), ("app version", filter.appVersion), ("device model", filter.deviceModel)]
            .compactMap { name, value in value.map { "\(name) \(Self.escape($0))" } }.joined(separator: ", ")
        let days30 = budgetWindowCount
        let alertsText =
            firing.isEmpty
            ? "<strong class=\"ok\">none firing</strong>"
            : firing.map { "<strong class=\"bad\">\(Self.escape($0.name)) (\(Self.escape($0.severity))) FIRING</strong>" }
                .joined(separator: ", ")
        let compliance =
            days30.total == 0
            ? "<strong>no events</strong> (target \(Self.percent(report.target)))"
            : "<strong>\(Self.percent(days30.compliance))</strong> (\(days30.good) of \(days30.total) events within "
                + "\(Self.thresholdText(objective.thresholdSeconds)); target \(Self.percent(report.target)))"
        var body = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>Beacon attendance: telemetry and SLO</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:24px;color:#1d2433;max-width:1000px}
            h1{font-size:22px} h2{font-size:17px;margin-top:28px}
            table{border-collapse:collapse} td,th{padding:4px 10px;border-bottom:1px solid #dde;text-align:right}
            th:first-child,td:first-child{text-align:left}
            #site-table{font-size:14px} #site-table td,#site-table th{white-space:nowrap;padding:4px 6px}
            #site-table td:first-child{white-space:normal;overflow-wrap:anywhere;min-width:110px;max-width:260px}
            .ok{color:#17803d} .warn{color:#a15c07} .bad{color:#b42318} .muted{color:#667}
            svg text{font-size:11px;fill:#334}
            </style></head><body>
            <h1>Telemetry and SLO</h1>
            <p class="muted">Generated \(Self.timeText(now, seconds: true)) · \
            \(filterText.isEmpty ? "all sites, app versions and device models" : filterText)</p>
            \(dataSpanLine())
            <h2>Service level objective</h2>
            <p id="slo-objective">SLO: \(Self.escape(report.objective)).</p>
            <p id="slo-30d">30-day compliance: \(compliance)</p>
            <p id="error-budget">Error budget (30 days, \(Self.axisPercent(objective.errorBudgetFraction)) of events may be bad): \
            <strong class="\(budget.cssClass)">\(budget.sentence)</strong></p>
            \(Self.budgetBar(budget))
            <p id="alerts">Burn-rate alerts: \(alertsText)</p>
            <table id="alert-table"><tr><th>alert</th><th>severity</th><th>windows</th><th>threshold</th><th>long burn</th>\
            <th>short burn</th><th>state</th></tr>

            """
        for alert in report.alerts {
            body += "<tr><td>\(Self.escape(alert.name))</td><td>\(Self.escape(alert.severity))</td>"
            body += "<td>\(Self.escape(alert.longWindow)) + \(Self.escape(alert.shortWindow))</td>"
            body += "<td>\(Self.number(alert.threshold))×</td><td>\(Self.number(alert.longBurnRate))×</td>"
            body += "<td>\(Self.number(alert.shortBurnRate))×</td>"
            body += "<td class=\"\(alert.firing ? "bad" : "ok")\">\(alert.firing ? "firing" : "ok")</td></tr>\n"
        }
        body += "</table>\n<h2>Burn rate the alerts compare</h2>\n"
        body += "<p class=\"muted\">How many times faster than allowed the budget is spent (1× spends it exactly in 30 days), "
        body += "over each alert's long and short window, counting events in the minute they arrived; "
        body += "dashed: the alert thresholds.</p>\n" + burnRateChart()
        body += "<h2>Compliance per hour (last 24 h)</h2>\n" + complianceChart()
        body += "<h2>Trigger-to-verdict latency per hour (last 24 h)</h2>\n"
        body +=
            "<p class=\"muted\">"
            + Self.latencySeries.map {
                "<span style=\"color:\($0.color)\">■ \($0.name)</span>"
            }.joined(separator: " ") + "</p>\n" + latencyChart()
        body += siteTable()
        let latency = summary.triggerToVerdict
        body += """
            <h2>Last hour</h2>
            <table id="summary-table">
            <tr><td>check-in success rate</td><td>\(Self.percent(summary.checkInSuccessRate))</td></tr>
            <tr><td>trigger→verdict p50 / p90 / p99 / p99.9</td><td>\(Self.duration(latency.p50Ms)) / \(Self.duration(latency.p90Ms)) / \
            \(Self.duration(latency.p99Ms)) / \(Self.duration(latency.p999Ms))</td></tr>
            <tr><td>outbox backlog (mean reported)</td><td>\(summary.outboxBacklog.averageReported.map(Self.number) ?? "–")</td></tr>
            <tr><td>average ranging time</td><td>\(summary.averageRangingMs.map { Self.number($0) + " ms" } ?? "–")</td></tr>
            <tr><td>battery impact</td><td>\(summary.batteryImpactPercentPerHour.map { Self.number($0) + " %/h" } ?? "–")</td></tr>
            <tr><td>bg_timeout rate</td><td>\(Self.percent(summary.bgTimeoutRate))</td></tr>
            <tr><td>offline rate</td><td>\(Self.percent(summary.offlineRate))</td></tr>
            </table>
            <p class="muted">JSON: <a href="/v1/slo">/v1/slo</a> · <a href="/v1/metrics/summary?window=1h">/v1/metrics/summary</a> · \
            <a href="/metrics">/metrics</a></p>
            </body></html>
            """
        return body
    }

    /// The time span the attendance events of the budget window cover, or that there are none.
    func dataSpanLine() -> String {
        guard let coverage = sites.coverage, coverage.count.total > 0 else {
            return "<p id=\"data-span\"><strong>No attendance events in the last 30 days.</strong></p>"
        }
        let siteCount = sites.siteCount == 1 ? "1 site" : "\(sites.siteCount) sites"
        return "<p id=\"data-span\">Data from <strong>\(Self.minuteText(coverage.firstMinute))</strong> to "
            + "<strong>\(Self.minuteText(coverage.lastMinute))</strong> (30-day window; "
            + "\(Self.plural(coverage.count.total, "event")) at \(siteCount))</p>"
    }

    // MARK: Error budget

    /// The error budget of an SLI count, decided with the exact integer comparison of `SLICount`: exhausted
    /// when the bad events reach the allowed ones (burn rate at least 1 over the budget window).
    struct BudgetState: Hashable {
        enum Kind: Hashable {
            case noEvents
            /// `remaining` in (0, 1]: the share of the allowed bad events not used yet.
            case left(remaining: Double)
            /// `factor` >= 1: bad events / allowed bad events.
            case exhausted(factor: Double)
        }

        let kind: Kind
        let bad: Int64
        let allowedBad: Double

        init(_ count: SLICount, objective: SLOObjective) {
            let budget = ErrorBudget(count, objective: objective)
            bad = budget.bad
            allowedBad = budget.allowedBad
            if count.total == 0 {
                kind = .noEvents
            } else if count.burnRate(objective, atLeastTenths: 10) {
                kind = .exhausted(factor: count.burnRate(objective))
            } else {
                kind = .left(remaining: min(max(budget.remaining, 0), 1))
            }
        }

        var isExhausted: Bool {
            if case .exhausted = kind { return true }
            return false
        }

        /// The CSS class of its text: `ok` with more than half left, `warn` with half or less, `bad` exhausted.
        var cssClass: String {
            switch kind {
            case .noEvents: return "ok"
            case .left(let remaining): return remaining > 0.5 ? "ok" : "warn"
            case .exhausted: return "bad"
            }
        }

        /// The share of the bar to fill: what is left (all of it without events, none when exhausted).
        var barShare: Double {
            switch kind {
            case .noEvents: return 1
            case .left(let remaining): return remaining
            case .exhausted: return 0
            }
        }

        /// "remaining 49.5 % of 2.02 bad events allowed (1 used)", "exhausted: 198 bad events against 2.02
        /// allowed, 98× the budget", "no events in the last 30 days: the whole budget is left".
        var sentence: String {
            switch kind {
            case .noEvents:
                return "no events in the last 30 days: the whole budget is left"
            case .left(let remaining):
                return "remaining \(StatusPage.share(remaining)) of \(StatusPage.number(allowedBad)) bad "
                    + "\(allowedBad == 1 ? "event" : "events") allowed (\(bad) used)"
            case .exhausted(let factor):
                return "exhausted: \(StatusPage.plural(bad, "bad event")) against \(StatusPage.number(allowedBad)) allowed, "
                    + "\(StatusPage.factor(factor)) the budget"
            }
        }

        /// The same in a table cell: "49.5 % left", "exhausted (98×)", "no events".
        var short: String {
            switch kind {
            case .noEvents: return "no events"
            case .left(let remaining): return "\(StatusPage.share(remaining)) left"
            case .exhausted(let factor): return "exhausted (\(StatusPage.factor(factor)))"
            }
        }

        /// The bar's label.
        var barLabel: String {
            switch kind {
            case .noEvents: return "no events: the whole budget is left"
            case .left(let remaining): return "\(StatusPage.share(remaining)) left"
            case .exhausted(let factor): return "exhausted: \(StatusPage.factor(factor)) the budget"
            }
        }
    }

    /// The budget as a bar of what is left; never drawn negative. The label is white on the bar when the
    /// bar is wide enough to hold it, else dark after the bar's end.
    static func budgetBar(_ budget: BudgetState) -> String {
        let barWidth = width * min(max(budget.barShare, 0), 1)
        let color = budget.barShare > 0.5 ? "#17803d" : "#c27c0e"
        let label = budget.barLabel
        let labelWidth = textWidth(label)
        let inside = barWidth >= labelWidth + 12
        let textX = inside ? 6 : barWidth + 6
        let textColor = inside ? "#fff" : (budget.isExhausted ? "#b42318" : "#1d2433")
        return """
            <svg id="chart-budget" role="img" aria-label="error budget: \(escape(label))" width="\(Int(width))" height="28" \
            xmlns="http://www.w3.org/2000/svg">
            <rect x="0" y="4" width="\(Int(width))" height="20" fill="\(budget.isExhausted ? "#fde2e1" : "#eef")"/>
            <rect class="budget-left" x="0" y="4" width="\(format(barWidth))" height="20" fill="\(color)"/>
            <text class="budget-label" x="\(format(textX))" y="18" style="fill:\(textColor);font-weight:600">\(escape(label))</text></svg>
            """
    }

    // MARK: Charts

    static let width = 720.0, height = 200.0, left = 56.0, right = 10.0, bottom = 24.0, top = 12.0
    static var plotHeight: Double { height - bottom - top }
    static var plotRight: Double { width - right }
    /// Axis labels closer than this (baseline to baseline, in px) overlap at the page's 11 px font.
    static let minLabelGap = 12.0

    /// A y-axis label: the baseline it is drawn at, its text and an optional colour.
    struct AxisLabel: Hashable {
        var y: Double
        var text: String
        var color: String?
    }

    /// The y-axis labels to draw. `required` labels are all kept, moved apart (each as little as
    /// possible, within the plot) to be `minLabelGap` apart; each `optional` one, in the order given, is
    /// kept only when it is at least `minLabelGap` from every label kept before it.
    static func placeYLabels(required: [AxisLabel], optional: [AxisLabel]) -> [AxisLabel] {
        var kept = required.sorted { $0.y < $1.y }
        let highest = height - bottom + 4
        for index in kept.indices.dropFirst() {
            kept[index].y = max(kept[index].y, kept[index - 1].y + minLabelGap)
        }
        if let last = kept.indices.last, kept[last].y > highest {
            kept[last].y = highest
            for index in kept.indices.dropLast().reversed() {
                kept[index].y = min(kept[index].y, kept[index + 1].y - minLabelGap)
            }
        }
        for label in optional where kept.allSatisfy({ abs($0.y - label.y) >= minLabelGap }) {
            kept.append(label)
        }
        return kept.sorted { $0.y < $1.y }
    }

    /// The y axis line, light grid lines at `grid`, and `labels` right-aligned left of the axis.
    private func yAxis(_ labels: [AxisLabel], grid: [Double]) -> String {
        var svg = ""
        for line in grid {
            svg += "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.plotRight))\" y1=\"\(Self.format(line))\" "
            svg += "y2=\"\(Self.format(line))\" stroke=\"#e3e6ef\"/>\n"
        }
        svg += "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.left))\" y1=\"\(Self.format(Self.top))\" "
        svg += "y2=\"\(Self.format(Self.height - Self.bottom))\" stroke=\"#99a\"/>\n"
        for label in labels {
            let style = label.color.map { " style=\"fill:\($0)\"" } ?? ""
            svg += "<text class=\"y-label\" x=\"\(Self.format(Self.left - 6))\" y=\"\(Self.format(label.y))\" text-anchor=\"end\"\(style)>"
            svg += "\(Self.escape(label.text))</text>\n"
        }
        return svg
    }

    /// Start of the 24-hour time axis (seconds since 1970).
    private var axisStart: Double { now.timeIntervalSince1970 - 24 * 3600 }

    /// A moment of the last 24 hours as an x position.
    private func timeX(_ seconds: Double) -> Double {
        let share = (min(max(seconds, axisStart), now.timeIntervalSince1970) - axisStart) / (24 * 3600)
        return Self.left + (Self.plotRight - Self.left) * share
    }

    /// An hour's point (hours since 1970): the middle of the hour, or now for the current hour's first half.
    private func hourX(_ hour: Int64) -> Double { timeX(Double(hour) * 3600 + 1800) }

    /// The time axis: "−24 h" at the left, "now" at the right and the hours between, each dropped when it
    /// would come closer than 8 px to a label already kept (now and −24 h first).
    private func timeAxis() -> String {
        let marks: [(hoursAgo: Int, text: String, anchor: String)] = [
            (0, "now", "end"), (24, "−24 h", "start"), (12, "−12 h", "middle"), (6, "−6 h", "middle"), (18, "−18 h", "middle"),
        ]
        var kept: [(ClosedRange<Double>, String)] = []
        for mark in marks {
            let x = timeX(now.timeIntervalSince1970 - Double(mark.hoursAgo) * 3600)
            let textWidth = Self.textWidth(mark.text)
            let start = mark.anchor == "start" ? x : (mark.anchor == "end" ? x - textWidth : x - textWidth / 2)
            let extent = start...(start + textWidth)
            let isClear = kept.allSatisfy { $0.0.upperBound + 8 <= extent.lowerBound || extent.upperBound + 8 <= $0.0.lowerBound }
            guard isClear else { continue }
            let svg =
                "<text class=\"x-label\" x=\"\(Self.format(x))\" y=\"\(Self.format(Self.height - 6))\" "
                + "text-anchor=\"\(mark.anchor)\">\(mark.text)</text>\n"
            kept.append((extent, svg))
        }
        let baseline =
            "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.plotRight))\" "
            + "y1=\"\(Self.format(Self.height - Self.bottom))\" y2=\"\(Self.format(Self.height - Self.bottom))\" stroke=\"#99a\"/>\n"
        return baseline + kept.sorted { $0.0.lowerBound < $1.0.lowerBound }.map(\.1).joined()
    }

    /// The compliance axis' lower ends, the first one that fits is used.
    static let complianceFloors: [Double] = [0.999, 0.998, 0.995, 0.99, 0.98, 0.95, 0.9, 0.8, 0.5, 0]

    /// The compliance axis' lower end: the highest nice value below both the lowest hourly compliance and
    /// the target (0 when nothing else is below both), so both show above the axis' bottom.
    static func complianceFloor(lowest: Double, target: Double) -> Double {
        complianceFloors.first { $0 < target && $0 < lowest } ?? 0
    }

    /// A tick step giving at most 5 intervals between `floor` and 100 %.
    static func complianceStep(floor: Double) -> Double {
        let span = 1 - floor
        return [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25].first { span / $0 <= 5.000_001 } ?? 0.25
    }

    func complianceChart() -> String {
        let withEvents = hourlySLI.filter { $0.count.total > 0 }
        let floor = Self.complianceFloor(lowest: withEvents.map(\.count.compliance).min() ?? 1, target: objective.target)
        func y(_ value: Double) -> Double {
            Self.top + Self.plotHeight * (1 - (min(max(value, floor), 1) - floor) / (1 - floor))
        }
        let step = Self.complianceStep(floor: floor)
        let intervals = Int(((1 - floor) / step).rounded(.down))
        var ticks = (0...intervals).map { floor + Double($0) * step }.filter { $0 <= 1 + 1e-9 }
        if let last = ticks.last, abs(last - 1) > 1e-9 { ticks.append(1) }
        // The ends first, then the ticks between; none equal to the target (the target has its own label).
        let ordered = [floor, 1] + ticks.filter { abs($0 - floor) > 1e-9 && abs($0 - 1) > 1e-9 }
        let optional = ordered.filter { abs($0 - objective.target) > 1e-9 }.map { AxisLabel(y: y($0) + 4, text: Self.axisPercent($0)) }
        let target = AxisLabel(y: y(objective.target) + 4, text: Self.axisPercent(objective.target), color: "#b42318")
        let labels = Self.placeYLabels(required: [target], optional: optional)
        let grid = ticks.filter { tick in labels.contains { $0.text == Self.axisPercent(tick) } }.map(y)
        var svg = "<svg id=\"chart-compliance\" role=\"img\" "
        svg += "aria-label=\"compliance per hour, axis from \(Self.axisPercent(floor)) to 100 %\" "
        svg += "width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        svg += yAxis(labels, grid: grid) + timeAxis()
        let targetY = y(objective.target)
        svg += "<line class=\"target\" x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.plotRight))\" "
        svg += "y1=\"\(Self.format(targetY))\" y2=\"\(Self.format(targetY))\" stroke=\"#b42318\" stroke-dasharray=\"4 3\">"
        svg += "<title>target \(Self.axisPercent(objective.target))</title></line>\n"
        if withEvents.isEmpty {
            // Clear of the target line: in the upper part when the line is in the lower half, else the lower part.
            let messageY = targetY > Self.top + Self.plotHeight / 2 ? Self.top + 24 : Self.height - Self.bottom - 12
            svg += "<text x=\"\(Self.format(Self.left + 10))\" y=\"\(Self.format(messageY))\">no events in the last 24 h</text>\n"
        } else {
            let points = withEvents.map { "\(Self.format(hourX($0.hour))),\(Self.format(y($0.count.compliance)))" }
            svg += "<polyline class=\"series\" fill=\"none\" stroke=\"#3b6fd8\" stroke-width=\"2\" "
            svg += "points=\"\(points.joined(separator: " "))\"/>\n"
            for point in withEvents {
                svg += "<circle cx=\"\(Self.format(hourX(point.hour)))\" cy=\"\(Self.format(y(point.count.compliance)))\" "
                svg += "r=\"3\" fill=\"#3b6fd8\">"
                svg += "<title>\(Self.percent(point.count.compliance)) of \(point.count.total)</title></circle>\n"
            }
        }
        return svg + "</svg>\n"
    }

    static let latencySeries: [(name: String, permyriad: Int, color: String)] = [
        ("p50", 5_000, "#17803d"), ("p90", 9_000, "#c27c0e"), ("p99", 9_900, "#b42318"),
    ]

    /// The latency axis' upper ends in ms: 1 s, 2 s, 5 s, 10 s, 30 s, 1, 2, 5, 10, 20, 30 min, 1, 2, 6, 12 h, 1, 2, 5, 10 d, ...
    static let latencyMaxima: [Double] = {
        let second = 1_000.0, minute = 60_000.0, hour = 3_600_000.0, day = 86_400_000.0
        return [1, 2, 5, 10, 30].map { $0 * second } + [1, 2, 5, 10, 20, 30].map { $0 * minute } + [1, 2, 6, 12].map { $0 * hour }
            + [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000].map { $0 * day }
    }()

    /// The smallest nice maximum holding `value` ms (1 s at least).
    static func latencyMax(_ value: Double) -> Double {
        latencyMaxima.first { $0 >= value } ?? value
    }

    func latencyChart() -> String {
        let values = hourlyLatency.map { point in Self.latencySeries.map { Double(point.histogram.value(atPermyriad: $0.permyriad) ?? 0) } }
        let maxValue = Self.latencyMax(values.flatMap { $0 }.max() ?? 0)
        func y(_ value: Double) -> Double { Self.top + Self.plotHeight * (1 - min(max(value, 0), maxValue) / maxValue) }
        let ticks = [maxValue, maxValue / 2, 0]
        let tickLabels = ticks.map { AxisLabel(y: y($0) + 4, text: $0 == 0 ? "0" : Self.duration($0)) }
        let labels = Self.placeYLabels(required: [], optional: tickLabels)
        var svg = "<svg id=\"chart-latency\" role=\"img\" "
        svg += "aria-label=\"trigger-to-verdict latency per hour, axis up to \(Self.duration(maxValue))\" "
        svg += "width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        svg += yAxis(labels, grid: ticks.dropLast().map(y)) + timeAxis()
        if hourlyLatency.isEmpty {
            svg += "<text x=\"\(Self.format(Self.left + 10))\" y=\"\(Self.format(Self.height / 2))\">no verdicts in the last 24 h</text>\n"
        }
        for (index, line) in Self.latencySeries.enumerated() where !hourlyLatency.isEmpty {
            let points = zip(hourlyLatency, values).map { "\(Self.format(hourX($0.hour))),\(Self.format(y($1[index])))" }
            svg += "<polyline class=\"series\" data-series=\"\(line.name)\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\" "
            svg += "points=\"\(points.joined(separator: " "))\"/>\n"
            // Markers too: an hour with data must show even when it is the only one (a one-point polyline draws nothing).
            for (point, value) in zip(hourlyLatency, values) {
                svg += "<circle cx=\"\(Self.format(hourX(point.hour)))\" cy=\"\(Self.format(y(value[index])))\" "
                svg += "r=\"3\" fill=\"\(line.color)\">"
                svg += "<title>\(line.name) \(Self.duration(value[index]))</title></circle>\n"
            }
        }
        return svg + "</svg>\n"
    }

    /// The burn-rate axis' upper ends; the first holding every bar and 110 % of every threshold is used.
    static let burnRateMaxima: [Double] = [2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000]

    static func burnRateMax(highestRate: Double, highestThreshold: Double) -> Double {
        let needed = max(highestRate, highestThreshold * 1.1)
        return burnRateMaxima.first { $0 >= needed } ?? needed
    }

    /// The burn rates the alerts compare with their thresholds: each alert's long, then short window.
    func burnRateChart() -> String {
        let bars = report.alerts.flatMap { alert in
            [
                (label: "\(alert.name) \(alert.longWindow)", rate: alert.longBurnRate),
                (label: "\(alert.name) \(alert.shortWindow)", rate: alert.shortBurnRate),
            ]
        }
        let maxRate = Self.burnRateMax(
            highestRate: bars.map(\.rate).max() ?? 0, highestThreshold: report.alerts.map(\.threshold).max() ?? 0)
        let baseline = Self.height - Self.bottom
        let slot = (Self.plotRight - Self.left) / Double(max(bars.count, 1))
        func y(_ rate: Double) -> Double { Self.top + Self.plotHeight * (1 - min(max(rate, 0), maxRate) / maxRate) }
        let thresholds = report.alerts.map { AxisLabel(y: y($0.threshold) + 4, text: "\(Self.number($0.threshold))×", color: "#b42318") }
        let ends = [AxisLabel(y: y(maxRate) + 4, text: "\(Self.number(maxRate))×"), AxisLabel(y: y(0) + 4, text: "0")]
        var svg = "<svg id=\"chart-burn-rate\" role=\"img\" aria-label=\"burn rate the alerts compare\" width=\"\(Int(Self.width))\" "
        svg += "height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        svg += yAxis(Self.placeYLabels(required: thresholds, optional: ends), grid: [y(maxRate)])
        svg += "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.plotRight))\" y1=\"\(Self.format(baseline))\" "
        svg += "y2=\"\(Self.format(baseline))\" stroke=\"#99a\"/>\n"
        // The thresholds behind the bars (seen through them), so no line crosses a bar's value.
        for rule in report.alerts {
            let ly = y(rule.threshold)
            svg += "<line class=\"threshold\" x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.plotRight))\" "
            svg += "y1=\"\(Self.format(ly))\" y2=\"\(Self.format(ly))\" stroke=\"#b42318\" stroke-dasharray=\"4 3\">"
            svg += "<title>\(Self.escape(rule.name)): \(Self.number(rule.threshold))×</title></line>\n"
        }
        for (index, bar) in bars.enumerated() {
            let center = Self.left + (Double(index) + 0.5) * slot
            let barTop = y(bar.rate)
            let value = "\(Self.number(bar.rate))×"
            svg += "<rect class=\"bar\" x=\"\(Self.format(center - slot / 2 + 10))\" y=\"\(Self.format(barTop))\" "
            svg += "width=\"\(Self.format(slot - 20))\" height=\"\(Self.format(baseline - barTop))\" "
            svg += "fill=\"#3b6fd8\" fill-opacity=\"0.85\">"
            svg += "<title>\(Self.escape(bar.label)): \(value)</title></rect>\n"
            // The value inside the bar's top when the bar is tall enough, else just above it.
            let inside = baseline - barTop >= 20
            let valueY = inside ? barTop + 14 : barTop - 4
            svg += "<text class=\"bar-value\" x=\"\(Self.format(center))\" y=\"\(Self.format(valueY))\" text-anchor=\"middle\""
            svg += "\(inside ? " style=\"fill:#fff\"" : "")>\(value)</text>\n"
            svg += "<text class=\"bar-label\" x=\"\(Self.format(center))\" y=\"\(Self.format(Self.height - 8))\" text-anchor=\"middle\">"
            svg += "\(Self.escape(bar.label))</text>\n"
        }
        return svg + "</svg>\n"
    }

    // MARK: Sites

    /// The per-site table of the budget window, sorted by site id (Swift's string order), with a line
    /// counting the sites left out; or a line saying there are no events.
    func siteTable() -> String {
        var html = "<h2>Sites (last 30 days)</h2>\n"
        guard !sites.sites.isEmpty else {
            return html + "<p id=\"site-table-empty\">No attendance events in the last 30 days.</p>\n"
        }
        let listed =
            sites.omittedSiteCount > 0
            ? "The \(sites.sites.count) sites with the most events, by site id"
            : "Every site with events, by site id"
        html += "<p class=\"muted\">\(listed). Every column covers the last 30 days; p50 and p99 are the trigger-to-verdict "
        html += "latency.</p>\n"
        html += "<table id=\"site-table\"><tr><th>site</th><th>events</th><th>within \(Self.thresholdText(objective.thresholdSeconds))</th>"
        html += "<th>compliance</th><th>error budget</th><th>bad events</th><th>p50 (30 d)</th><th>p99 (30 d)</th>"
        html += "<th>last event (UTC)</th></tr>\n"
        for site in sites.sites.sorted(by: { $0.site < $1.site }) {
            let budget = BudgetState(site.count, objective: objective)
            let meetsTarget = site.count.good * 10_000 >= site.count.total * Int64(objective.targetPermyriad)
            let latency = siteLatency[site.site]
            html += "<tr data-site=\"\(Self.escape(site.site))\"><td>\(Self.escape(site.site))</td><td>\(site.count.total)</td>"
            html += "<td>\(site.count.good)</td><td class=\"\(meetsTarget ? "ok" : "bad")\">\(Self.percent(site.count.compliance))</td>"
            html += "<td class=\"\(budget.cssClass)\">\(budget.short)</td><td>\(site.count.bad)</td>"
            html += "<td>\(Self.duration(latency?.value(atPermyriad: 5_000)))</td>"
            html += "<td>\(Self.duration(latency?.value(atPermyriad: 9_900)))</td>"
            html += "<td>\(Self.minuteText(site.lastMinute, zone: false))</td></tr>\n"
        }
        html += "</table>\n"
        if sites.omittedSiteCount > 0 {
            html += "<p id=\"site-table-more\" class=\"muted\">and \(sites.omittedSiteCount) more "
            html += "\(sites.omittedSiteCount == 1 ? "site" : "sites") with fewer events, not listed "
            html += "(<a href=\"/v1/metrics/summary?window=30d&amp;groupBy=site\">every site as JSON</a>)</p>\n"
        }
        return html
    }

    // MARK: Formatting

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// At most two decimals, trailing zeros dropped: "14.4", "2.02", "20".
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e12 ? String(Int64(value)) : trimmed(value, decimals: 2)
    }

    /// A rate as a percentage with two decimals ("80.00 %"); "–" for none.
    static func percent(_ value: Double?) -> String {
        guard let value else { return "–" }
        return String(format: "%.2f %%", value * 100)
    }

    /// `value` with at most `decimals` decimals, trailing zeros dropped ("2.5", "15", "99.95").
    static func trimmed(_ value: Double, decimals: Int) -> String {
        var text = String(format: "%.\(decimals)f", value)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }

    /// An axis value in [0, 1] as a percentage: "100 %", "99.5 %", "50 %".
    static func axisPercent(_ value: Double) -> String { trimmed(min(max(value, 0), 1) * 100, decimals: 2) + " %" }

    /// A share in [0, 1] with one decimal ("49.5 %"), clamped to [0, 1]; never shown as 0 % or 100 %
    /// when it is strictly between ("< 0.1 %", "> 99.9 %").
    static func share(_ value: Double) -> String {
        let clamped = min(max(value, 0), 1)
        if clamped == 0 || clamped == 1 { return clamped == 0 ? "0 %" : "100 %" }
        let tenths = (clamped * 1_000).rounded()
        if tenths < 1 { return "< 0.1 %" }
        if tenths > 999 { return "> 99.9 %" }
        return trimmed(tenths / 10, decimals: 1) + " %"
    }

    /// How many times the budget: "98×" from 10 on, else one decimal ("1.5×", "1×").
    static func factor(_ value: Double) -> String {
        value >= 10 ? "\(Int64(value.rounded()))×" : trimmed(value, decimals: 1) + "×"
    }

    /// "1 event", "2 events".
    static func plural(_ count: Int64, _ noun: String) -> String { count == 1 ? "1 \(noun)" : "\(count) \(noun)s" }

    /// "5 min" for whole minutes, else seconds ("90 s").
    static func thresholdText(_ seconds: Int) -> String { seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s" }

    /// A duration in ms for reading: "850 ms", "1.02 s", "15 s", "6 min", "1.5 h", "2 d"; "–" for none.
    static func duration(_ ms: UInt64?) -> String {
        guard let ms else { return "–" }
        return duration(Double(ms))
    }

    static func duration(_ ms: Double) -> String {
        let seconds = ms / 1_000
        if ms < 1_000 { return "\(Int64(ms.rounded())) ms" }
        if seconds < 60 { return trimmed(seconds, decimals: seconds < 10 ? 2 : 1) + " s" }
        if seconds < 3_600 { return trimmed(seconds / 60, decimals: 1) + " min" }
        if seconds < 86_400 { return trimmed(seconds / 3_600, decimals: 1) + " h" }
        return trimmed(seconds / 86_400, decimals: 1) + " d"
    }

    /// A minute since 1970 as "2026-11-25 10:58 UTC" (without " UTC" when `zone` is false).
    static func minuteText(_ minute: Int64, zone: Bool = true) -> String { timeText(EpochMinute.date(minute), seconds: false, zone: zone) }

    /// "2026-11-25 10:58 UTC", with seconds "2026-11-25 10:58:30 UTC"; without " UTC" when `zone` is false.
    static func timeText(_ date: Date, seconds: Bool, zone: Bool = true) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let day = String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        let time =
            seconds
            ? String(format: "%02d:%02d:%02d", parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0)
            : String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
        return zone ? "\(day) \(time) UTC" : "\(day) \(time)"
    }

    /// The width of `text` at the page's 11 px font, estimated generously (6.5 px a character).
    static func textWidth(_ text: String) -> Double { Double(text.count) * 6.5 }
}
