import Foundation
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// One `<text>` element of an SVG chart: its position and its text.
struct ChartText: Hashable {
    var x: Double
    var y: Double
    var text: String
}

/// Reads the pages `StatusPage` writes (attributes in the order it writes them).
enum PageReader {
    /// The `<svg id="…">…</svg>` element with that id, or nil.
    static func chart(_ html: String, id: String) -> String? {
        guard let start = html.range(of: "<svg id=\"\(id)\"") else { return nil }
        guard let end = html.range(of: "</svg>", range: start.upperBound..<html.endIndex) else { return nil }
        return String(html[start.lowerBound..<end.upperBound])
    }

    /// The `<text class="className" …>` elements of `svg`, in document order; nil for one whose x or y does not parse.
    static func texts(_ svg: String, className: String) -> [ChartText?] {
        svg.components(separatedBy: "<text class=\"\(className)\"").dropFirst().map { chunk -> ChartText? in
            guard let tagEnd = chunk.firstIndex(of: ">"), let close = chunk.range(of: "</text>") else { return nil }
            let attributes = String(chunk[..<tagEnd])
            guard let x = number(attributes, "x"), let y = number(attributes, "y") else { return nil }
            let textStart = chunk.index(after: tagEnd)
            guard textStart <= close.lowerBound else { return nil }
            return ChartText(x: x, y: y, text: String(chunk[textStart..<close.lowerBound]))
        }
    }

    /// The value of ` name="…"` in an element's attributes, as a number.
    static func number(_ attributes: String, _ name: String) -> Double? {
        guard let start = attributes.range(of: " \(name)=\"") else { return nil }
        guard let end = attributes[start.upperBound...].firstIndex(of: "\"") else { return nil }
        return Double(attributes[start.upperBound..<end])
    }

    /// "99.5 %" → 99.5; nil for anything else.
    static func percent(_ text: String) -> Double? {
        text.hasSuffix(" %") ? Double(text.dropLast(2)) : nil
    }

    /// The page without its tags (and `<style>`), entities left as they are: the text a reader sees.
    static func visibleText(_ html: String) -> String {
        var text = html
        if let style = text.range(of: "<style>"), let end = text.range(of: "</style>"), style.lowerBound <= end.upperBound {
            text.removeSubrange(style.lowerBound..<end.upperBound)
        }
        var result = ""
        var inTag = false
        for character in text {
            if character == "<" {
                inTag = true
            } else if character == ">" {
                inTag = false; result.append(" ")
            } else if !inTag {
                result.append(character)
            }
        }
        return result
    }

    /// A percentage written with a minus sign ("-9900.00 %", "− 5 %") anywhere in `text`.
    static func negativePercentage(in text: String) throws -> String? {
        let pattern = try Regex(#"[-−]\s*\d[\d.,]*\s*%"#)
        return text.firstMatch(of: pattern).map { String(text[$0.range]) }
    }
}

/// Hand-made inputs for `StatusPage` at `fixtureNow` (2026-11-20T10:30:30Z).
enum PageFixture {
    static let nowMinute = EpochMinute.of(fixtureNow)
    static let nowHour = nowMinute / 60
    static let noSites = SiteSLIBreakdown(sites: [], siteCount: 0, coverage: nil)

    /// The same good / total in every window (events of the last five minutes).
    static func counts(good: Int64, total: Int64) -> [SLOWindow: SLICount] {
        Dictionary(uniqueKeysWithValues: SLOWindow.allCases.map { ($0, SLICount(good: good, total: total)) })
    }

    /// One site holding every event of `counts`' 30-day window.
    static func oneSite(good: Int64, total: Int64) -> SiteSLIBreakdown {
        guard total > 0 else { return noSites }
        let count = SLICount(good: good, total: total)
        return SiteSLIBreakdown(
            sites: [SiteSLI(site: "site-1", count: count, firstMinute: nowMinute - 4, lastMinute: nowMinute)],
            siteCount: 1, coverage: DataCoverage(firstMinute: nowMinute - 4, lastMinute: nowMinute, count: count))
    }

    /// Hourly compliance values, one per hour ending with the current one (1000 events each).
    static func hourly(_ compliances: [Double]) -> [HourlySLI] {
        compliances.enumerated().map { index, compliance in
            let count = SLICount(good: Int64((compliance * 1_000).rounded()), total: 1_000)
            return HourlySLI(hour: nowHour - Int64(compliances.count - 1 - index), count: count)
        }
    }

    static func histogram(_ values: [(ms: Int64, count: Int64)]) -> LogHistogram {
        var histogram = LogHistogram()
        for value in values { histogram.record(value.ms, count: value.count) }
        return histogram
    }

    static func page(
        counts: [SLOWindow: SLICount], objective: SLOObjective = .standard, filter: MetricsFilter = MetricsFilter(),
        hourlySLI: [HourlySLI] = [], hourlyLatency: [HourlyLatency] = [], sites: SiteSLIBreakdown? = nil,
        siteLatency: [String: LogHistogram] = [:]
    ) -> StatusPage {
        let days30 = counts[.days30] ?? SLICount(good: 0, total: 0)
        return StatusPage(
            now: fixtureNow, filter: filter, report: SLOReport(counts: counts, objective: objective),
            summary: MetricsSummary(counters: [:], histograms: [:]), hourlySLI: hourlySLI, hourlyLatency: hourlyLatency,
            objective: objective, sites: sites ?? oneSite(good: days30.good, total: days30.total), siteLatency: siteLatency)
    }
}

@Suite("Status page HTML (pure)")
struct StatusPageTests {
    @Test("an overspent budget reads 'exhausted' with the factor, and no percentage on the page is negative")
    func overspentBudget() throws {
        // 198 bad of 202: 2.02 bad events allowed, 98× the budget (remaining would be -9702 %).
        let html = PageFixture.page(counts: PageFixture.counts(good: 4, total: 202)).html()
        #expect(html.contains("exhausted: 198 bad events against 2.02 allowed, 98× the budget"))
        #expect(html.contains("<strong class=\"bad\">exhausted: 198 bad events"))
        #expect(try PageFixture.negativePercentageFree(html))
        let bar = try #require(PageReader.chart(html, id: "chart-budget"))
        #expect(bar.contains("<rect class=\"budget-left\" x=\"0\" y=\"4\" width=\"0.0\""), "an exhausted budget draws no bar")
        #expect(bar.contains(">exhausted: 98× the budget</text>"))
        #expect(!bar.contains("fill:#fff"), "the label of an empty bar is dark, not white on the light background")
        #expect(html.contains("<td class=\"bad\">exhausted (98×)</td>"), "the site table's short form")
    }

    @Test("a budget partly used reads 'remaining x % of y bad events allowed (z used)'")
    func partlyUsedBudget() throws {
        // 1 bad of 2000: 20 allowed, 95 % left.
        let html = PageFixture.page(counts: PageFixture.counts(good: 1_999, total: 2_000)).html()
        #expect(html.contains("<strong class=\"ok\">remaining 95 % of 20 bad events allowed (1 used)</strong>"))
        #expect(html.contains("<td class=\"ok\">95 % left</td>"))
        let bar = try #require(PageReader.chart(html, id: "chart-budget"))
        #expect(bar.contains("<rect class=\"budget-left\" x=\"0\" y=\"4\" width=\"684.0\"")) // 95 % of 720 px
        #expect(bar.contains("style=\"fill:#fff;"), "a long bar holds its label in white")

        // 19 bad of 2000: 5 % left, a bar too short for its label: dark text after the bar.
        let short = PageFixture.page(counts: PageFixture.counts(good: 1_981, total: 2_000)).html()
        #expect(short.contains("remaining 5 % of 20 bad events allowed (19 used)"))
        let shortBar = try #require(PageReader.chart(short, id: "chart-budget"))
        #expect(shortBar.contains("style=\"fill:#1d2433;"))
        #expect(try PageFixture.negativePercentageFree(short))
    }

    @Test("no events: the page says so in the data line, the budget, the charts and the site table")
    func noEvents() throws {
        let html = PageFixture.page(counts: [:]).html()
        #expect(html.contains("<p id=\"data-span\"><strong>No attendance events in the last 30 days.</strong></p>"))
        #expect(html.contains("30-day compliance: <strong>no events</strong>"))
        #expect(html.contains("no events in the last 30 days: the whole budget is left"))
        #expect(html.contains("<p id=\"site-table-empty\">No attendance events in the last 30 days.</p>"))
        #expect(!html.contains("<table id=\"site-table\""))
        #expect(html.contains("no events in the last 24 h"))
        #expect(html.contains("no verdicts in the last 24 h"))
        #expect(try PageFixture.negativePercentageFree(html))
    }

    /// One compliance-axis case: the lowest hourly compliance, the target and the axis' expected lower end.
    struct ComplianceCase: Sendable, CustomTestStringConvertible {
        var lowest: Double
        var targetPermyriad: Int
        var floor: String
        var testDescription: String { "lowest \(lowest), target \(targetPermyriad) ‱ → from \(floor)" }
    }

    static let complianceCases: [ComplianceCase] = [
        ComplianceCase(lowest: 1.0, targetPermyriad: 9_900, floor: "98 %"),
        ComplianceCase(lowest: 0.996, targetPermyriad: 9_900, floor: "98 %"),
        ComplianceCase(lowest: 0.985, targetPermyriad: 9_900, floor: "98 %"),
        ComplianceCase(lowest: 0.96, targetPermyriad: 9_900, floor: "95 %"),
        ComplianceCase(lowest: 0.93, targetPermyriad: 9_900, floor: "90 %"),
        ComplianceCase(lowest: 0.7, targetPermyriad: 9_900, floor: "50 %"),
        ComplianceCase(lowest: 0.3, targetPermyriad: 9_900, floor: "0 %"),
        ComplianceCase(lowest: 0.0, targetPermyriad: 9_900, floor: "0 %"),
        ComplianceCase(lowest: 1.0, targetPermyriad: 9_990, floor: "99.8 %"),
        ComplianceCase(lowest: 0.93, targetPermyriad: 9_500, floor: "90 %"),
        ComplianceCase(lowest: 1.0, targetPermyriad: 5_000, floor: "0 %"),
        ComplianceCase(lowest: 0.999, targetPermyriad: 9_999, floor: "99.8 %"),
    ]

    @Test("the compliance axis starts at a nice value, stays within 0 %…100 %, its labels 12 px apart", arguments: complianceCases)
    func complianceAxis(_ testCase: ComplianceCase) throws {
        let (lowest, targetPermyriad, floor) = (testCase.lowest, testCase.targetPermyriad, testCase.floor)
        let objective = SLOObjective(targetPermyriad: targetPermyriad)
        let hourly = PageFixture.hourly([1, lowest, 1, (1 + lowest) / 2])
        let html = PageFixture.page(counts: PageFixture.counts(good: 990, total: 1_000), objective: objective, hourlySLI: hourly).html()
        let chart = try #require(PageReader.chart(html, id: "chart-compliance"))
        #expect(chart.contains("axis from \(floor) to 100 %"))
        let labels = PageReader.texts(chart, className: "y-label")
        #expect(!labels.contains(nil), "every axis label has a position")
        let parsed = labels.compactMap { $0 }.sorted { $0.y < $1.y }
        #expect(parsed.count >= 2)
        for (upper, lower) in zip(parsed, parsed.dropFirst()) {
            #expect(lower.y - upper.y >= 12, "\(upper.text) at \(upper.y) and \(lower.text) at \(lower.y) overlap")
        }
        for label in parsed {
            let value = try #require(PageReader.percent(label.text), "\(label.text) is not a percentage")
            #expect(value >= 0 && value <= 100, "\(label.text) is outside 0 %…100 %")
        }
        let targetText = StatusPage.axisPercent(objective.target)
        #expect(parsed.contains { $0.text == targetText }, "the target line is labelled \(targetText)")
        // Every plotted hour lies within the axis (between its lower end and 100 %).
        let floorValue = try #require(PageReader.percent(floor))
        #expect(lowest * 100 >= floorValue)
        #expect(objective.target * 100 > floorValue)
    }

    @Test("the time axis reads −24 h … now without overlapping labels")
    func timeAxis() throws {
        let html = PageFixture.page(counts: PageFixture.counts(good: 99, total: 100), hourlySLI: PageFixture.hourly([1, 0.99])).html()
        for id in ["chart-compliance", "chart-latency"] {
            let chart = try #require(PageReader.chart(html, id: id))
            let labels = PageReader.texts(chart, className: "x-label")
            #expect(!labels.contains(nil))
            let parsed = labels.compactMap { $0 }.sorted { $0.x < $1.x }
            #expect(parsed.map(\.text) == ["−24 h", "−18 h", "−12 h", "−6 h", "now"])
            for (left, right) in zip(parsed, parsed.dropFirst()) {
                #expect(right.x - left.x >= 60, "\(left.text) and \(right.text) overlap")
            }
        }
    }

    @Test("the latency axis ends at a nice maximum with matching labels")
    func latencyAxis() throws {
        // p99 of 400 s (6.7 min): the axis runs to 10 min, labelled 10 min, 5 min and 0.
        let slow = PageFixture.histogram([(ms: 1_000, count: 90), (ms: 400_000, count: 10)])
        let html = PageFixture.page(
            counts: PageFixture.counts(good: 90, total: 100),
            hourlyLatency: [HourlyLatency(hour: PageFixture.nowHour, histogram: slow)]
        ).html()
        let chart = try #require(PageReader.chart(html, id: "chart-latency"))
        let labels = PageReader.texts(chart, className: "y-label")
        #expect(labels.compactMap { $0 }.sorted { $0.y < $1.y }.map(\.text) == ["10 min", "5 min", "0"])
        #expect(chart.contains("data-series=\"p99\""))

        #expect(StatusPage.latencyMax(0) == 1_000)
        #expect(StatusPage.latencyMax(1_001) == 2_000)
        #expect(StatusPage.latencyMax(12_000) == 30_000)
        #expect(StatusPage.latencyMax(45_000) == 60_000)
        #expect(StatusPage.latencyMax(61_000) == 120_000)
        #expect(StatusPage.latencyMax(400_000) == 600_000)
        #expect(StatusPage.duration(60_000.0) == "1 min")
        #expect(StatusPage.duration(150_000.0) == "2.5 min")
        #expect(StatusPage.duration(500.0) == "500 ms")
        #expect(StatusPage.duration(1_020.0) == "1.02 s")
    }

    @Test("burn-rate labels: one per bar, apart; the thresholds stay labelled and 12 px apart even when squeezed")
    func burnRateLabels() throws {
        // Every event bad at a 99.5 % target: burn rate 200 everywhere, the 14.4× and 6× lines 7 px apart.
        let objective = SLOObjective(targetPermyriad: 9_950)
        let html = PageFixture.page(counts: PageFixture.counts(good: 0, total: 1_000), objective: objective).html()
        let chart = try #require(PageReader.chart(html, id: "chart-burn-rate"))
        let values = PageReader.texts(chart, className: "bar-value")
        let names = PageReader.texts(chart, className: "bar-label")
        #expect(!values.contains(nil) && !names.contains(nil))
        #expect(values.compactMap { $0?.text } == Array(repeating: "200×", count: 4))
        #expect(names.compactMap { $0?.text } == ["fast-burn 1h", "fast-burn 5m", "slow-burn 6h", "slow-burn 30m"])
        let xs = names.compactMap { $0?.x }
        for (left, right) in zip(xs, xs.dropFirst()) { #expect(right - left >= 60) }
        let axis = PageReader.texts(chart, className: "y-label").compactMap { $0 }.sorted { $0.y < $1.y }
        #expect(axis.contains { $0.text == "14.4×" } && axis.contains { $0.text == "6×" })
        for (upper, lower) in zip(axis, axis.dropFirst()) {
            #expect(lower.y - upper.y >= 12, "\(upper.text) and \(lower.text) overlap")
        }
        #expect(try PageFixture.negativePercentageFree(html))
    }

    @Test("the site table lists each site with its numbers, escaped, and counts the sites left out")
    func siteTable() throws {
        let now = PageFixture.nowMinute
        let hostile = "<b>x&y</b>"
        let sites = SiteSLIBreakdown(
            sites: [
                SiteSLI(site: "site-a", count: SLICount(good: 100, total: 100), firstMinute: now - 89, lastMinute: now - 1),
                SiteSLI(site: hostile, count: SLICount(good: 70, total: 100), firstMinute: now - 50, lastMinute: now - 30),
            ],
            siteCount: 3, coverage: DataCoverage(firstMinute: now - 90, lastMinute: now - 1, count: SLICount(good: 220, total: 250)))
        // site-a: 98 verdicts after 100 ms and 2 after 120 ms (exact buckets below 128 ms): p50 100 ms, p99 120 ms.
        let latency = ["site-a": PageFixture.histogram([(ms: 100, count: 98), (ms: 120, count: 2)])]
        let html = PageFixture.page(counts: PageFixture.counts(good: 220, total: 250), sites: sites, siteLatency: latency).html()

        #expect(
            html.contains(
                "Data from <strong>2026-11-20 09:00 UTC</strong> to <strong>2026-11-20 10:29 UTC</strong> "
                    + "(30-day window; 250 events at 3 sites)"))
        #expect(
            html.contains(
                "<tr data-site=\"site-a\"><td>site-a</td><td>100</td><td>100</td><td class=\"ok\">100.00 %</td>"
                    + "<td class=\"ok\">100 % left</td><td>0</td><td>100 ms</td><td>120 ms</td><td>2026-11-20 10:29</td></tr>"))
        #expect(
            html.contains(
                "<tr data-site=\"&lt;b&gt;x&amp;y&lt;/b&gt;\"><td>&lt;b&gt;x&amp;y&lt;/b&gt;</td><td>100</td><td>70</td>"
                    + "<td class=\"bad\">70.00 %</td><td class=\"bad\">exhausted (30×)</td><td>30</td><td>–</td><td>–</td>"
                    + "<td>2026-11-20 10:00</td></tr>"))
        #expect(!html.contains(hostile), "a site id from the database is escaped")
        // Sorted by site id: "<b>…" before "site-a".
        let hostileRow = try #require(html.range(of: "<tr data-site=\"&lt;b&gt;"))
        let siteARow = try #require(html.range(of: "<tr data-site=\"site-a\""))
        #expect(hostileRow.lowerBound < siteARow.lowerBound)
        #expect(html.contains("and 1 more site with fewer events, not listed"))
        #expect(html.contains("p50 (30 d)") && html.contains("p99 (30 d)"))
        #expect(try PageFixture.negativePercentageFree(html))
    }

    @Test("filter values are escaped")
    func filterEscaped() {
        let html = PageFixture.page(counts: [:], filter: MetricsFilter(site: "<script>alert(1)</script>")).html()
        #expect(!html.contains("<script>"))
        #expect(html.contains("site &lt;script&gt;alert(1)&lt;/script&gt;"))
    }

    @Test("reading helpers: shares never round to 0 % or 100 % when they are neither; factors")
    func formatting() {
        #expect(StatusPage.share(1) == "100 %")
        #expect(StatusPage.share(0.9996) == "> 99.9 %")
        #expect(StatusPage.share(0.495) == "49.5 %")
        #expect(StatusPage.share(0.0004) == "< 0.1 %")
        #expect(StatusPage.share(-3) == "0 %")
        #expect(StatusPage.factor(98.0198) == "98×")
        #expect(StatusPage.factor(1.54) == "1.5×")
        #expect(StatusPage.factor(1) == "1×")
        #expect(StatusPage.axisPercent(0.995) == "99.5 %")
        #expect(StatusPage.number(14.4) == "14.4")
        #expect(StatusPage.minuteText(PageFixture.nowMinute) == "2026-11-20 10:30 UTC")
    }
}

extension PageFixture {
    /// No negative percentage in the page's markup nor in its visible text.
    static func negativePercentageFree(_ html: String) throws -> Bool {
        let inMarkup = try PageReader.negativePercentage(in: html)
        let inText = try PageReader.negativePercentage(in: PageReader.visibleText(html))
        if let found = inMarkup ?? inText { Issue.record("negative percentage on the page: \(found)") }
        return inMarkup == nil && inText == nil
    }
}
