import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Logging
import Prometheus
import ServiceRuntime
import Synchronization
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// A fast burn in progress: 100 check-ins in the last 5 minutes, 20 of them received 6 minutes after
/// their trigger (burn rate 20 over 5 min, 1 h, 30 min and 6 h: both alerts fire).
func seedFastBurn(_ db: TelemetryDB, site: String) async throws {
    var log = MessageLog(configuration: db.configuration)
    for index in 0..<100 {
        let key = newKey()
        // Every event arrived in the last 200 s; one in five 6 minutes after its trigger (a bad event,
        // filed under its trigger's minute for the windows and under its receipt's for the alerts).
        let delay: TimeInterval = index % 5 == 0 ? 360 : 1
        let trigger = fixtureNow.addingTimeInterval(-Double(index) * 2 - delay)
        try log.raw(Make.raw(key: key, site: site, trigger: trigger, delay: delay))
        try log.verdict(Make.verdict(key: key, site: site, trigger: trigger, decidedAfter: delay + Double(index % 10) / 10, base: trigger))
    }
    try log.telemetry(
        Make.telemetry(
            device: "d-\(site)", site: site, received: fixtureNow,
            events: [
                Make.event("b1", .battery, at: fixtureNow.addingTimeInterval(-3_000), value: 0.9),
                Make.event("b2", .battery, at: fixtureNow.addingTimeInterval(-1_200), value: 0.88),
                Make.event("r1", .rangingStop, at: fixtureNow.addingTimeInterval(-100), value: 900),
            ]))
    try await db.processor().process(log.messages)
}

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(response.body.readableBytesView))
}

@Suite("REST API: /v1/slo, /v1/metrics/summary, problem+json on bad input", .serialized)
struct APITests {
    static func withRouter(_ body: @escaping @Sendable (TelemetryDB, any TestClientProtocol) async throws -> Void) async throws {
        try await TelemetryDB.run { db in
            let app = Application(router: buildRouter(repository: db.repository, now: { fixtureNow }))
            try await app.test(.router) { client in try await body(db, client) }
        }
    }

    @Test("/v1/slo reports the windows, the budget and the firing alerts for the filter")
    func slo() async throws {
        try await Self.withRouter { db, client in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            let response = try await client.execute(uri: "/v1/slo?site=\(site)", method: .get)
            #expect(response.status == .ok)
            let body = try decode(SLOResponse.self, response)
            #expect(body.filter.site == site)
            // The windows count by trigger minute: the late events' triggers are 6-9 minutes old.
            let fiveMinutes = try #require(body.slo.windows.first { $0.window == "5m" })
            #expect(fiveMinutes.total == 80 && fiveMinutes.good == 80)
            let hour = try #require(body.slo.windows.first { $0.window == "1h" })
            #expect(hour.total == 100 && hour.good == 80)
            #expect(abs(hour.burnRate - 20) < 1e-9)
            // The alerts count by receipt minute: all 100 arrived in the last 5 minutes, 20 of them late.
            #expect(body.slo.alerts.map(\.firing) == [true, true])
            #expect(body.slo.alerts.map(\.shortBurnRate) == [20, 20])
            #expect(abs(body.slo.errorBudget.remaining - -19) < 1e-9) // 1 - 20 / (0.01 * 100)

            // Another site: nothing, so nothing fires and the budget is whole.
            let other = try decode(SLOResponse.self, try await client.execute(uri: "/v1/slo?site=other-\(token())", method: .get))
            #expect(other.slo.alerts.allSatisfy { !$0.firing })
            #expect(other.slo.errorBudget.remaining == 1)
        }
    }

    @Test("/v1/metrics/summary per window, filter and groupBy")
    func summary() async throws {
        try await Self.withRouter { db, client in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            let response = try await client.execute(
                uri: "/v1/metrics/summary?window=1h&site=\(site)&deviceModel=\(Make.model)", method: .get)
            #expect(response.status == .ok)
            let body = try decode(MetricsSummaryResponse.self, response)
            #expect(body.window == "1h")
            #expect(body.summary.triggerToVerdict.count == 100)
            #expect(body.summary.checkInSuccessRate == 1)
            #expect(body.summary.averageRangingMs == 900)
            // 2 points over 0.5 h.
            #expect(abs((body.summary.batteryImpactPercentPerHour ?? 0) - 4) < 1e-6)
            // 1 h window, by hand: 80 verdicts at 1.0-1.9 s, 20 at 360.0-360.8 s. p50 rank 50 sits in the fast group.
            #expect((body.summary.triggerToVerdict.p50Ms ?? 0) <= 2_000)
            #expect((body.summary.triggerToVerdict.p99Ms ?? 0) >= 360_000)

            // The 5-minute window ends now; the battery readings are older.
            let five = try decode(
                MetricsSummaryResponse.self, try await client.execute(uri: "/v1/metrics/summary?window=5m&site=\(site)", method: .get))
            #expect(five.summary.batteryImpactPercentPerHour == nil)
            #expect(five.summary.counts["slo.events"] == 80)

            let grouped = try decode(
                MetricsSummaryResponse.self,
                try await client.execute(uri: "/v1/metrics/summary?window=1d&site=\(site)&groupBy=appVersion", method: .get))
            #expect(grouped.groups?.map(\.value) == [Make.version])
            #expect(grouped.groups?.first?.summary.counts["slo.events"] == 100)
            // No filter on a model nobody has: empty, not an error.
            let none = try decode(
                MetricsSummaryResponse.self,
                try await client.execute(uri: "/v1/metrics/summary?window=30d&deviceModel=Nokia%203310", method: .get))
            #expect(none.summary.checkInSuccessRate == nil)
        }
    }

    @Test("bad filters, unknown windows and unknown parameters are problem+json 400s, unknown paths 404")
    func badInput() async throws {
        try await Self.withRouter { _, client in
            let long = String(repeating: "x", count: Dimensions.maxLength + 1)
            let cases: [(String, String)] = [
                ("/v1/metrics/summary?window=2h", "window"),
                ("/v1/metrics/summary?window=", "window"),
                ("/v1/metrics/summary?groupBy=user", "groupBy"),
                ("/v1/metrics/summary?site=\(long)", "site"),
                ("/v1/metrics/summary?site=a&site=b", "site"),
                ("/v1/slo?window=1h", "window"),
                ("/v1/slo?appVersion=%01x", "appVersion"),
                ("/v1/slo?deviceModel=%20padded", "deviceModel"),
                ("/?colour=red", "colour"),
            ]
            for (uri, field) in cases {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(response.headers[.contentType] == ProblemDetails.mediaType, "\(uri)")
                let problem = try decode(ProblemDetails.self, response)
                #expect(problem.status == 400)
                #expect(problem.errors?.contains { $0.field == field } == true, "\(uri): \(String(describing: problem.errors))")
            }
            let missing = try await client.execute(uri: "/v1/nothing", method: .get)
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType] == ProblemDetails.mediaType)
        }
    }

    @Test("/metrics carries the SLO gauges and the alert state")
    func prometheus() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            let registry = PrometheusCollectorRegistry()
            let metrics = TelemetryServiceMetrics(registry: registry)
            let monitor = SLOMonitor(
                repository: db.repository, metrics: metrics, objective: .standard, interval: .seconds(60), pruneInterval: .seconds(600),
                prune: nil, logger: TelemetryDB.logger)
            let report = try await monitor.evaluate(now: fixtureNow)
            #expect(report.alerts.allSatisfy { $0.firing })
            let configuration = try LocalStack.serviceConfiguration(service: "telemetry-aggregator")
            let app = buildApplication(
                configuration: configuration, repository: db.repository, objective: .standard, readiness: [], metrics: registry,
                logger: TelemetryDB.logger, now: { fixtureNow })
            try await app.test(.router) { client in
                let response = try await client.execute(uri: "/metrics", method: .get)
                let text = String(decoding: response.body.readableBytesView, as: UTF8.self)
                #expect(text.contains("telemetry_slo_alert_firing{alert=\"fast-burn\",severity=\"page\"} 1.0"))
                #expect(text.contains("telemetry_slo_alert_firing{alert=\"slow-burn\",severity=\"ticket\"} 1.0"))
                #expect(text.contains("telemetry_slo_burn_rate{window=\"1h\"} 20.0"))
                // What each alert compares, by arrival minute: every window of it at or above its threshold.
                for (alert, window, threshold) in [
                    ("fast-burn", "1h", 14.4), ("fast-burn", "5m", 14.4), ("slow-burn", "6h", 6), ("slow-burn", "30m", 6),
                ] {
                    let prefix = "telemetry_slo_alert_burn_rate{alert=\"\(alert)\",window=\"\(window)\"} "
                    let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }
                    let value = try #require(line.flatMap { Double($0.dropFirst(prefix.count)) }, "\(prefix) in \(text)")
                    #expect(value >= threshold, "\(prefix)\(value)")
                }
                #expect(text.contains("telemetry_slo_error_budget_remaining -19.0"))
            }
        }
    }
}

/// The store as the monitor reads it, counting the reads of the day and 30-day windows.
final class CountingSLORepository: TelemetryQueryRepository {
    let base: PostgresTelemetryQueryRepository
    let longReads = Mutex(0)

    init(base: PostgresTelemetryQueryRepository) { self.base = base }

    func counters(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: CounterCell]] {
        try await base.counters(filter: filter, minutes: minutes, groupBy: groupBy)
    }
    func histograms(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: LogHistogram]] {
        try await base.histograms(filter: filter, minutes: minutes, groupBy: groupBy)
    }
    func sloCounts(filter: MetricsFilter, windows: [SLOWindow], now: Date, filedBy filing: SLOFiling) async throws -> [SLOWindow: SLICount]
    {
        if windows.contains(.days30) { longReads.withLock { $0 += 1 } }
        return try await base.sloCounts(filter: filter, windows: windows, now: now, filedBy: filing)
    }
    func hourlySLI(filter: MetricsFilter, hours: Int, now: Date) async throws -> [HourlySLI] {
        try await base.hourlySLI(filter: filter, hours: hours, now: now)
    }
    func hourlyLatency(filter: MetricsFilter, metric: String, hours: Int, now: Date) async throws -> [HourlyLatency] {
        try await base.hourlyLatency(filter: filter, metric: metric, hours: hours, now: now)
    }
    func siteSLI(filter: MetricsFilter, minutes: ClosedRange<Int64>, limit: Int) async throws -> SiteSLIBreakdown {
        try await base.siteSLI(filter: filter, minutes: minutes, limit: limit)
    }
    func siteLatency(
        filter: MetricsFilter, metric: String, minutes: ClosedRange<Int64>, sites: [String]
    ) async throws -> [String: LogHistogram] {
        try await base.siteLatency(filter: filter, metric: metric, minutes: minutes, sites: sites)
    }
}

@Suite("The SLO monitor's long windows")
struct SLOMonitorLongWindowTests {
    /// The day and 30-day windows sum a month of minute rows (tens of millions at a large deployment):
    /// read again every few minutes, not at each 15 s evaluation; the alerts' windows at each one.
    @Test func theLongWindowsAreReadAgainOnlyAfterTheirInterval() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            try await seedFastBurn(db, site: site)
            let repository = CountingSLORepository(base: db.repository)
            // An interval no loaded machine outlasts between two evaluations, then (the same cache) none.
            var monitor = SLOMonitor(
                repository: repository, metrics: TelemetryServiceMetrics(registry: PrometheusCollectorRegistry()), objective: .standard,
                interval: .seconds(15), pruneInterval: .seconds(600), prune: nil, logger: TelemetryDB.logger,
                longWindowsInterval: .seconds(3_600))
            let first = try await monitor.evaluate(now: fixtureNow)
            let second = try await monitor.evaluate(now: fixtureNow)
            #expect(repository.longReads.withLock { $0 } == 1)
            #expect(first.windows.map(\.total) == second.windows.map(\.total))
            #expect(second.alerts.allSatisfy { $0.firing })
            monitor.longWindowsInterval = .zero
            _ = try await monitor.evaluate(now: fixtureNow)
            #expect(repository.longReads.withLock { $0 } == 2)
        }
    }
}
