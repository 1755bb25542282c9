import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore
import ServiceRuntime
import TelemetryAggregatorCore

/// `GET /v1/slo` body.
package struct SLOResponse: Codable, Sendable {
    package var generatedAt: String
    package var filter: MetricsFilter
    package var slo: SLOReport
}

/// `GET /v1/metrics/summary` body.
package struct MetricsSummaryResponse: Codable, Sendable {
    package var generatedAt: String
    package var window: String
    /// The first and last minute the window covers (RFC 3339).
    package var from: String
    package var to: String
    package var filter: MetricsFilter
    package var summary: MetricsSummary
    /// With `groupBy`: the same numbers per value of that dimension, by value.
    package var groupBy: String?
    package var groups: [MetricsGroup]?
}

package struct MetricsGroup: Codable, Sendable {
    package var value: String
    package var summary: MetricsSummary
}

enum TelemetryJSON {
    static func response<T: Encodable>(_ value: T) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = try encoder.encode(value)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func timestamp(_ date: Date) -> String { WireTimestamp.string(from: date) }
}

/// `GET /v1/slo?site=&appVersion=&deviceModel=`: the SLO over every window, the 30-day error budget
/// and the burn-rate alerts, for the filtered events.
struct SLOController<Context: RequestContext>: Sendable {
    static var parameters: Set<String> { StrictQuery.telemetryFilterNames }

    let repository: any TelemetryQueryRepository
    let objective: SLOObjective
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<Context>) {
        router.get("v1/slo") { request, _ in
            let query = try StrictQuery(request, allowed: Self.parameters)
            let filter = try query.filter()
            let now = self.now()
            let report = try await repository.sloReport(filter: filter, now: now, objective: objective)
            return try TelemetryJSON.response(SLOResponse(generatedAt: TelemetryJSON.timestamp(now), filter: filter, slo: report))
        }
    }
}

/// `GET /v1/metrics/summary?window=5m|1h|1d|30d&site=&appVersion=&deviceModel=&groupBy=site|appVersion|deviceModel`.
struct MetricsSummaryController<Context: RequestContext>: Sendable {
    static var parameters: Set<String> { StrictQuery.telemetryFilterNames.union(["window", "groupBy"]) }
    static var windows: [String: SLOWindow] { Dictionary(uniqueKeysWithValues: SLOWindow.summaryWindows.map { ($0.rawValue, $0) }) }
    static var dimensions: [String: DimensionName] { Dictionary(uniqueKeysWithValues: DimensionName.allCases.map { ($0.rawValue, $0) }) }

    let repository: any TelemetryQueryRepository
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<Context>) {
        router.get("v1/metrics/summary") { request, _ in
            let query = try StrictQuery(request, allowed: Self.parameters)
            let filter = try query.filter()
            let window = try query.choice("window", Self.windows) ?? .hour1
            let groupBy = try query.choice("groupBy", Self.dimensions)
            let now = self.now()
            let minutes = window.minuteRange(endingAt: now)
            async let totalsQuery = repository.counters(filter: filter, minutes: minutes, groupBy: nil)
            async let histogramsQuery = repository.histograms(filter: filter, minutes: minutes, groupBy: nil)
            let totals = try await totalsQuery
            let histograms = try await histogramsQuery
            var groups: [MetricsGroup]?
            if let groupBy {
                let counters = try await repository.counters(filter: filter, minutes: minutes, groupBy: groupBy)
                let latencies = try await repository.histograms(filter: filter, minutes: minutes, groupBy: groupBy)
                groups = Set(counters.keys).union(latencies.keys).sorted().map { value in
                    MetricsGroup(
                        value: value, summary: MetricsSummary(counters: counters[value] ?? [:], histograms: latencies[value] ?? [:]))
                }
            }
            return try TelemetryJSON.response(
                MetricsSummaryResponse(
                    generatedAt: TelemetryJSON.timestamp(now), window: window.rawValue,
                    from: TelemetryJSON.timestamp(EpochMinute.date(minutes.lowerBound)),
                    to: TelemetryJSON.timestamp(EpochMinute.date(minutes.upperBound)),
                    filter: filter, summary: MetricsSummary(counters: totals[""] ?? [:], histograms: histograms[""] ?? [:]),
                    groupBy: groupBy?.rawValue, groups: groups))
        }
    }
}

/// `GET /?site=&appVersion=&deviceModel=`: the status page (HTML with server-rendered SVG charts): the
/// SLO windows, the last 24 hours per hour, the last hour's summary, and per site the 30-day budget
/// window (the `StatusPage.siteLimit` sites with the most events, their trigger-to-verdict latency).
struct StatusPageController<Context: RequestContext>: Sendable {
    static var parameters: Set<String> { StrictQuery.telemetryFilterNames }

    let repository: any TelemetryQueryRepository
    let objective: SLOObjective
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<Context>) {
        router.get("/") { request, _ in
            let query = try StrictQuery(request, allowed: Self.parameters)
            let filter = try query.filter()
            let now = self.now()
            let repository = self.repository
            let lastHour = SLOWindow.hour1.minuteRange(endingAt: now)
            let budgetWindow = SLOWindow.days30.minuteRange(endingAt: now)
            async let reportQuery = repository.sloReport(filter: filter, now: now, objective: objective)
            async let hourlySLIQuery = repository.hourlySLI(filter: filter, hours: 24, now: now)
            async let hourlyLatencyQuery = repository.hourlyLatency(
                filter: filter, metric: LatencyMetric.triggerToVerdict, hours: 24, now: now)
            async let totalsQuery = repository.counters(filter: filter, minutes: lastHour, groupBy: nil)
            async let histogramsQuery = repository.histograms(filter: filter, minutes: lastHour, groupBy: nil)
            let sites = try await repository.siteSLI(filter: filter, minutes: budgetWindow, limit: StatusPage.siteLimit)
            let siteLatency = try await repository.siteLatency(
                filter: filter, metric: LatencyMetric.triggerToVerdict, minutes: budgetWindow, sites: sites.sites.map(\.site))
            let report = try await reportQuery
            let hourlySLI = try await hourlySLIQuery
            let hourlyLatency = try await hourlyLatencyQuery
            let totals = try await totalsQuery
            let histograms = try await histogramsQuery
            let page = StatusPage(
                now: now, filter: filter, report: report,
                summary: MetricsSummary(counters: totals[""] ?? [:], histograms: histograms[""] ?? [:]),
                hourlySLI: hourlySLI, hourlyLatency: hourlyLatency, objective: objective, sites: sites, siteLatency: siteLatency)
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: page.html())))
        }
    }
}
