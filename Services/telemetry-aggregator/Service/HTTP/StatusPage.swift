import Foundation
import TelemetryAggregatorCore

/// The human-readable status page: the SLO, the error budget, the alerts and the latency, as plain
/// HTML with SVG charts drawn here on the server. No JavaScript, nothing to build, readable with any
/// browser (and by a headless one in the tests).
struct StatusPage {
    let now: Date
    let filter: MetricsFilter
    let report: SLOReport
    let summary: MetricsSummary
    let hourlySLI: [HourlySLI]
    let hourlyLatency: [HourlyLatency]
    let objective: SLOObjective

    func html() -> String {
        let budget = report.errorBudget
        let firing = report.alerts.filter(\.firing)
        let filterText = [("site", filter.site), ("app version", filter.appVersion), ("device model", filter.deviceModel)]
            .compactMap { name, value in value.map { "\(name) \(Self.escape($0))" } }.joined(separator: ", ")
        var body = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>Beacon attendance: telemetry and SLO</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:24px;color:#1d2433;max-width:1000px}
            h1{font-size:22px} h2{font-size:17px;margin-top:28px}
            table{border-collapse:collapse} td,th{padding:4px 10px;border-bottom:1px solid #dde;text-align:right}
            th:first-child,td:first-child{text-align:left}
            .ok{color:#17803d} .bad{color:#b42318} .muted{color:#667}
            svg text{font-size:11px;fill:#334}
            </style></head><body>
            <h1>Telemetry and SLO</h1>
            <p class="muted">Generated \(TelemetryJSON.timestamp(now)) · \(filterText.isEmpty ? "all sites, app versions and device models" : filterText)</p>
            <h2>Service level objective</h2>
            <p id="slo-objective">SLO: \(Self.escape(report.objective)).</p>
            <p id="slo-30d">30-day compliance: <strong>\(Self.percent(report.window(.days30)?.compliance))</strong>
            (\(report.window(.days30)?.good ?? 0) of \(report.window(.days30)?.total ?? 0) events within \(objective.thresholdSeconds / 60) min; target \(Self.percent(report.target)))</p>
            <p id="error-budget">Error budget remaining (30 days): <strong class="\(budget.remaining >= 0 ? "ok" : "bad")">\(Self.percent(budget.remaining))</strong>
            (\(budget.bad) bad events of \(Self.number(budget.allowedBad)) allowed)</p>
            \(Self.budgetBar(budget.remaining))
            <p id="alerts">Burn-rate alerts: \(firing.isEmpty ? "<strong class=\"ok\">none firing</strong>" : firing.map { "<strong class=\"bad\">\(Self.escape($0.name)) (\(Self.escape($0.severity))) FIRING</strong>" }.joined(separator: ", "))</p>
            <table id="alert-table"><tr><th>alert</th><th>severity</th><th>windows</th><th>threshold</th><th>long burn</th><th>short burn</th><th>state</th></tr>
            """
        for alert in report.alerts {
            body += "<tr><td>\(Self.escape(alert.name))</td><td>\(Self.escape(alert.severity))</td><td>\(alert.longWindow) + \(alert.shortWindow)</td>"
            body += "<td>\(Self.number(alert.threshold))</td><td>\(Self.number(alert.longBurnRate))</td><td>\(Self.number(alert.shortBurnRate))</td>"
            body += "<td class=\"\(alert.firing ? "bad" : "ok")\">\(alert.firing ? "firing" : "ok")</td></tr>\n"
        }
        body += "</table>\n<h2>Burn rate by window</h2>\n" + burnRateChart()
        body += "<h2>Compliance per hour (last 24 h)</h2>\n" + complianceChart()
        body += "<h2>Trigger-to-verdict latency per hour (last 24 h)</h2>\n" + latencyChart()
        let latency = summary.triggerToVerdict
        body += """
            <h2>Last hour</h2>
            <table id="summary-table">
            <tr><td>check-in success rate</td><td>\(Self.percent(summary.checkInSuccessRate))</td></tr>
            <tr><td>trigger→verdict p50 / p90 / p99 / p99.9</td><td>\(Self.ms(latency.p50Ms)) / \(Self.ms(latency.p90Ms)) / \(Self.ms(latency.p99Ms)) / \(Self.ms(latency.p999Ms))</td></tr>
            <tr><td>outbox backlog (mean reported)</td><td>\(summary.outboxBacklog.averageReported.map(Self.number) ?? "–")</td></tr>
            <tr><td>average ranging time</td><td>\(summary.averageRangingMs.map { Self.number($0) + " ms" } ?? "–")</td></tr>
            <tr><td>battery impact</td><td>\(summary.batteryImpactPercentPerHour.map { Self.number($0) + " %/h" } ?? "–")</td></tr>
            <tr><td>bg_timeout rate</td><td>\(Self.percent(summary.bgTimeoutRate))</td></tr>
            <tr><td>offline rate</td><td>\(Self.percent(summary.offlineRate))</td></tr>
            </table>
            <p class="muted">JSON: <a href="/v1/slo">/v1/slo</a> · <a href="/v1/metrics/summary?window=1h">/v1/metrics/summary</a> · <a href="/metrics">/metrics</a></p>
            </body></html>
            """
        return body
    }

    // MARK: Charts

    static let width = 720.0, height = 200.0, left = 56.0, bottom = 24.0, top = 12.0

    static func budgetBar(_ remaining: Double) -> String {
        let share = min(max(remaining, 0), 1)
        let color = remaining > 0.5 ? "#17803d" : (remaining > 0 ? "#c27c0e" : "#b42318")
        return """
            <svg id="chart-budget" role="img" aria-label="error budget remaining \(percent(remaining))" width="\(Int(width))" height="28" xmlns="http://www.w3.org/2000/svg">
            <rect x="0" y="4" width="\(Int(width))" height="20" fill="#eef"/>
            <rect x="0" y="4" width="\(format(width * share))" height="20" fill="\(color)"/>
            <text x="6" y="18" style="fill:#fff">\(percent(remaining)) left</text></svg>
            """
    }

    func burnRateChart() -> String {
        let maxRate = max(16, report.windows.map(\.burnRate).max() ?? 0)
        let plotHeight = Self.height - Self.bottom - Self.top
        let barWidth = (Self.width - Self.left) / Double(report.windows.count)
        func y(_ rate: Double) -> Double { Self.top + plotHeight * (1 - min(rate, maxRate) / maxRate) }
        var svg = "<svg id=\"chart-burn-rate\" role=\"img\" aria-label=\"burn rate by window\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        for (index, window) in report.windows.enumerated() {
            let x = Self.left + Double(index) * barWidth + 8
            let top = y(window.burnRate)
            svg += "<rect class=\"bar\" x=\"\(Self.format(x))\" y=\"\(Self.format(top))\" width=\"\(Self.format(barWidth - 16))\" height=\"\(Self.format(Self.top + plotHeight - top))\" fill=\"#3b6fd8\"><title>\(window.window): \(Self.number(window.burnRate))</title></rect>\n"
            svg += "<text x=\"\(Self.format(x))\" y=\"\(Self.format(Self.height - 8))\">\(window.window) \(Self.number(window.burnRate))</text>\n"
        }
        for rule in report.alerts {
            let ly = y(rule.threshold)
            svg += "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.width))\" y1=\"\(Self.format(ly))\" y2=\"\(Self.format(ly))\" stroke=\"#b42318\" stroke-dasharray=\"4 3\"/>"
            svg += "<text x=\"2\" y=\"\(Self.format(ly + 4))\">\(Self.number(rule.threshold))×</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// Hours of the last 24 as x positions.
    private func hourX(_ hour: Int64) -> Double {
        let lastHour = EpochMinute.of(now) / 60
        let index = Double(hour - (lastHour - 23))
        return Self.left + (Self.width - Self.left - 10) * index / 23
    }

    func complianceChart() -> String {
        let floor = min(0.95, (hourlySLI.filter { $0.count.total > 0 }.map(\.count.compliance).min() ?? 1) - 0.01)
        let plotHeight = Self.height - Self.bottom - Self.top
        func y(_ value: Double) -> Double { Self.top + plotHeight * (1 - (max(value, floor) - floor) / (1 - floor)) }
        var svg = "<svg id=\"chart-compliance\" role=\"img\" aria-label=\"compliance per hour\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        svg += axis(labels: [(1, "100 %"), (objective.target, Self.percent(objective.target)), (floor, Self.percent(floor))], y: y)
        let points = hourlySLI.filter { $0.count.total > 0 }.map { "\(Self.format(hourX($0.hour))),\(Self.format(y($0.count.compliance)))" }
        if points.isEmpty {
            svg += "<text x=\"\(Self.format(Self.left + 10))\" y=\"\(Self.format(Self.height / 2))\">no events in the last 24 h</text>\n"
        } else {
            svg += "<polyline class=\"series\" fill=\"none\" stroke=\"#3b6fd8\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>\n"
            for point in hourlySLI where point.count.total > 0 {
                svg += "<circle cx=\"\(Self.format(hourX(point.hour)))\" cy=\"\(Self.format(y(point.count.compliance)))\" r=\"3\" fill=\"#3b6fd8\"><title>\(Self.percent(point.count.compliance)) of \(point.count.total)</title></circle>\n"
            }
        }
        let target = y(objective.target)
        svg += "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.width))\" y1=\"\(Self.format(target))\" y2=\"\(Self.format(target))\" stroke=\"#b42318\" stroke-dasharray=\"4 3\"/>\n"
        return svg + "</svg>\n"
    }

    func latencyChart() -> String {
        let series: [(name: String, permyriad: Int, color: String)] = [("p50", 5_000, "#17803d"), ("p90", 9_000, "#c27c0e"), ("p99", 9_900, "#b42318")]
        let values = hourlyLatency.map { point in series.map { Double(point.histogram.value(atPermyriad: $0.permyriad) ?? 0) } }
        let maxValue = max(1_000, values.flatMap { $0 }.max() ?? 0)
        let plotHeight = Self.height - Self.bottom - Self.top
        func y(_ value: Double) -> Double { Self.top + plotHeight * (1 - min(value, maxValue) / maxValue) }
        var svg = "<svg id=\"chart-latency\" role=\"img\" aria-label=\"trigger-to-verdict latency per hour\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" xmlns=\"http://www.w3.org/2000/svg\">\n"
        svg += axis(labels: [(maxValue, Self.ms(UInt64(maxValue))), (maxValue / 2, Self.ms(UInt64(maxValue / 2))), (0, "0")], y: y)
        if hourlyLatency.isEmpty {
            svg += "<text x=\"\(Self.format(Self.left + 10))\" y=\"\(Self.format(Self.height / 2))\">no verdicts in the last 24 h</text>\n"
        }
        for (index, line) in series.enumerated() where !hourlyLatency.isEmpty {
            let points = zip(hourlyLatency, values).map { "\(Self.format(hourX($0.hour))),\(Self.format(y($1[index])))" }
            svg += "<polyline class=\"series\" data-series=\"\(line.name)\" fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>\n"
            // Markers too: an hour with data must show even when it is the only one (a one-point polyline draws nothing).
            for (point, value) in zip(hourlyLatency, values) {
                svg += "<circle cx=\"\(Self.format(hourX(point.hour)))\" cy=\"\(Self.format(y(value[index])))\" r=\"3\" fill=\"\(line.color)\"><title>\(line.name) \(Self.ms(UInt64(value[index])))</title></circle>\n"
            }
            svg += "<text x=\"\(Self.format(Self.width - 40))\" y=\"\(Self.format(Self.top + 12 + Double(index) * 13))\" style=\"fill:\(line.color)\">\(line.name)</text>\n"
        }
        return svg + "</svg>\n"
    }

    private func axis(labels: [(Double, String)], y: (Double) -> Double) -> String {
        var svg = "<line x1=\"\(Self.format(Self.left))\" x2=\"\(Self.format(Self.left))\" y1=\"\(Self.format(Self.top))\" y2=\"\(Self.format(Self.height - Self.bottom))\" stroke=\"#99a\"/>\n"
        for (value, label) in labels {
            svg += "<text x=\"2\" y=\"\(Self.format(y(value) + 4))\">\(label)</text>\n"
        }
        svg += "<text x=\"\(Self.format(Self.left))\" y=\"\(Self.format(Self.height - 6))\">−23 h</text>"
        svg += "<text x=\"\(Self.format(Self.width - 40))\" y=\"\(Self.format(Self.height - 6))\">now</text>\n"
        return svg
    }

    // MARK: Formatting

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e12 ? String(Int64(value)) : String(format: "%.2f", value)
    }

    static func percent(_ value: Double?) -> String {
        guard let value else { return "–" }
        return String(format: "%.2f %%", value * 100)
    }

    static func ms(_ value: UInt64?) -> String {
        guard let value else { return "–" }
        return value >= 10_000 ? String(format: "%.1f s", Double(value) / 1000) : "\(value) ms"
    }
}
