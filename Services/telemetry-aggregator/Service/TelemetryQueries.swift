import Foundation
import Logging
import PostgresNIO
import ServiceRuntime
import TelemetryAggregatorCore

/// The dimension filter of a query: `nil` is "every value".
package struct MetricsFilter: Hashable, Sendable, Codable {
    package var site: String?
    package var appVersion: String?
    package var deviceModel: String?
}

/// A dimension to break numbers down by.
package enum DimensionName: String, CaseIterable, Sendable, Codable {
    case site, appVersion, deviceModel

    var column: String {
        switch self {
        case .site: return "site"
        case .appVersion: return "app_version"
        case .deviceModel: return "device_model"
        }
    }
}

/// One hour of a chart series (hour = hours since 1970).
package struct HourlySLI: Sendable, Hashable {
    package var hour: Int64
    package var count: SLICount
}

package struct HourlyLatency: Sendable, Hashable {
    package var hour: Int64
    package var histogram: LogHistogram
}

/// One site's attendance events over a minute range (minutes since 1970).
package struct SiteSLI: Sendable, Hashable {
    package var site: String
    package var count: SLICount
    /// The first and the last minute holding an attendance event of this site.
    package var firstMinute: Int64
    package var lastMinute: Int64
}

/// The span of minutes holding attendance events and their good / total, over every site of a filter.
package struct DataCoverage: Sendable, Hashable {
    package var firstMinute: Int64
    package var lastMinute: Int64
    package var count: SLICount
}

/// Attendance events per site over a minute range: at most `limit` sites (those with the most events),
/// sorted by site id, and the number and totals of every site with an event.
package struct SiteSLIBreakdown: Sendable, Hashable {
    /// By site id; only sites with at least one event.
    package var sites: [SiteSLI]
    /// Sites with at least one event, those left out by the limit included.
    package var siteCount: Int
    /// Over every site; `nil` when the range holds no attendance event.
    package var coverage: DataCoverage?

    /// Sites with events that `sites` leaves out.
    package var omittedSiteCount: Int { max(0, siteCount - sites.count) }
}

/// Reads the minute rollups (`/v1/slo`, `/v1/metrics/summary`, the status page, the SLO gauges).
package protocol TelemetryQueryRepository: Sendable {
    /// Counter totals over `minutes`, per value of `groupBy` (one group "" when nil).
    func counters(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: CounterCell]]
    /// Latency histograms merged over `minutes`, per value of `groupBy` (one group "" when nil).
    func histograms(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: LogHistogram]]
    /// The SLO's good / total of each window ending at `now`, counted in minutes of `filing`.
    func sloCounts(filter: MetricsFilter, windows: [SLOWindow], now: Date, filedBy filing: SLOFiling) async throws -> [SLOWindow: SLICount]
    /// Good / total per hour over the last `hours` hours.
    func hourlySLI(filter: MetricsFilter, hours: Int, now: Date) async throws -> [HourlySLI]
    /// A latency metric per hour over the last `hours` hours.
    func hourlyLatency(filter: MetricsFilter, metric: String, hours: Int, now: Date) async throws -> [HourlyLatency]
    /// Good / total ('slo.good' / 'slo.events') per site over `minutes`: the `limit` sites with the most events
    /// (ties by site id; `limit` below 1 counts as 1), returned by site id, with the count, totals and span of every site.
    func siteSLI(filter: MetricsFilter, minutes: ClosedRange<Int64>, limit: Int) async throws -> SiteSLIBreakdown
    /// A latency metric merged over `minutes` for each of `sites` (a site without samples is absent).
    func siteLatency(
        filter: MetricsFilter, metric: String, minutes: ClosedRange<Int64>, sites: [String]
    ) async throws -> [String: LogHistogram]
}

extension TelemetryQueryRepository {
    /// The SLO report of the windows ending at `now`: windows and budget by trigger minute, alerts by
    /// receipt minute (read over the alerts' windows only: 6 hours, not 30 days). The windows of `known`
    /// (counts by trigger minute read a moment ago) are not read again.
    package func sloReport(
        filter: MetricsFilter, now: Date, objective: SLOObjective, known: [SLOWindow: SLICount] = [:]
    ) async throws -> SLOReport {
        let alertWindows = Set(BurnRateAlertRule.standard.flatMap { [$0.longWindow, $0.shortWindow] })
        let unknown = SLOWindow.allCases.filter { known[$0] == nil }
        async let byTrigger = sloCounts(filter: filter, windows: unknown, now: now, filedBy: .trigger)
        async let byReceipt = sloCounts(filter: filter, windows: Array(alertWindows), now: now, filedBy: .receipt)
        let counts = try await byTrigger.merging(known) { read, _ in read }
        return SLOReport(counts: counts, alertCounts: try await byReceipt, objective: objective)
    }
}

package struct PostgresTelemetryQueryRepository: TelemetryQueryRepository {
    let client: PostgresClient
    let logger: Logger

    /// `WHERE` conditions for the minute range and the filter, binds appended to `binds`.
    private func conditions(_ filter: MetricsFilter, minutes: ClosedRange<Int64>, binds: inout PostgresBindings) -> String {
        binds.append(EpochMinute.date(minutes.lowerBound))
        binds.append(EpochMinute.date(minutes.upperBound))
        var sql = "minute >= $\(binds.count - 1) AND minute <= $\(binds.count)"
        for (value, column) in [(filter.site, "site"), (filter.appVersion, "app_version"), (filter.deviceModel, "device_model")] {
            guard let value else { continue }
            binds.append(value)
            sql += " AND \(column) = $\(binds.count)"
        }
        return sql
    }

    package func counters(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: CounterCell]] {
        var binds = PostgresBindings()
        let group = groupBy?.column ?? "''::text"
        let sql = """
            SELECT \(group), metric, sum(count)::int8, \(TelemetryStore.int8Bounded("sum(sum_micros)")) FROM rollup_minute
            WHERE \(conditions(filter, minutes: minutes, binds: &binds)) GROUP BY 1, 2
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [String: [String: CounterCell]] = [:]
        for try await (value, metric, count, micros) in rows.decode((String, String, Int64, Int64).self) {
            result[value, default: [:]][metric] = CounterCell(count: count, sumMicros: micros)
        }
        return result
    }

    package func histograms(
        filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?
    ) async throws -> [String: [String: LogHistogram]] {
        var binds = PostgresBindings()
        let group = groupBy?.column ?? "''::text"
        let sql = """
            SELECT \(group), metric, bucket, sum(count)::int8 FROM latency_minute
            WHERE \(conditions(filter, minutes: minutes, binds: &binds)) GROUP BY 1, 2, 3
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [String: [String: LogHistogram]] = [:]
        for try await (value, metric, bucket, count) in rows.decode((String, String, Int32, Int64).self) {
            guard LogHistogram.isValidBucket(Int(bucket)) else { continue }
            result[value, default: [:]][metric, default: LogHistogram()].record(bucket: Int(bucket), count: count)
        }
        return result
    }

    package func sloCounts(
        filter: MetricsFilter, windows: [SLOWindow], now: Date, filedBy filing: SLOFiling
    ) async throws -> [SLOWindow: SLICount] {
        guard let widest = windows.max(by: { $0.minutes < $1.minutes }) else { return [:] }
        var binds = PostgresBindings()
        let whereSQL = conditions(filter, minutes: widest.minuteRange(endingAt: now), binds: &binds)
        var columns: [String] = []
        for window in windows {
            binds.append(EpochMinute.date(window.minuteRange(endingAt: now).lowerBound))
            let start = "$\(binds.count)"
            columns.append("coalesce(sum(count) FILTER (WHERE metric = '\(filing.goodMetric)' AND minute >= \(start)), 0)::int8")
            columns.append("coalesce(sum(count) FILTER (WHERE metric = '\(filing.eventsMetric)' AND minute >= \(start)), 0)::int8")
        }
        let sql = """
            SELECT \(columns.joined(separator: ", ")) FROM rollup_minute
            WHERE metric IN ('\(filing.goodMetric)', '\(filing.eventsMetric)') AND \(whereSQL)
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [SLOWindow: SLICount] = [:]
        for try await row in rows {
            var cells = row.makeIterator()
            for window in windows {
                let good = try cells.next()!.decode(Int64.self)
                let total = try cells.next()!.decode(Int64.self)
                result[window] = SLICount(good: good, total: total)
            }
        }
        return result
    }

    private func hourRange(hours: Int, now: Date) -> ClosedRange<Int64> {
        let last = EpochMinute.of(now)
        let firstHour = last / 60 - Int64(hours) + 1
        return (firstHour * 60)...last
    }

    package func hourlySLI(filter: MetricsFilter, hours: Int, now: Date) async throws -> [HourlySLI] {
        var binds = PostgresBindings()
        let sql = """
            SELECT floor(extract(epoch FROM minute) / 3600)::int8 AS hour,
                   coalesce(sum(count) FILTER (WHERE metric = 'slo.good'), 0)::int8,
                   coalesce(sum(count) FILTER (WHERE metric = 'slo.events'), 0)::int8
            FROM rollup_minute
            WHERE metric IN ('slo.good', 'slo.events') AND \(conditions(filter, minutes: hourRange(hours: hours, now: now), binds: &binds))
            GROUP BY 1 ORDER BY 1
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [HourlySLI] = []
        for try await (hour, good, total) in rows.decode((Int64, Int64, Int64).self) {
            result.append(HourlySLI(hour: hour, count: SLICount(good: good, total: total)))
        }
        return result
    }

    package func hourlyLatency(filter: MetricsFilter, metric: String, hours: Int, now: Date) async throws -> [HourlyLatency] {
        var binds = PostgresBindings()
        binds.append(metric)
        let sql = """
            SELECT floor(extract(epoch FROM minute) / 3600)::int8 AS hour, bucket, sum(count)::int8
            FROM latency_minute
            WHERE metric = $1 AND \(conditions(filter, minutes: hourRange(hours: hours, now: now), binds: &binds))
            GROUP BY 1, 2
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var byHour: [Int64: LogHistogram] = [:]
        for try await (hour, bucket, count) in rows.decode((Int64, Int32, Int64).self) {
            guard LogHistogram.isValidBucket(Int(bucket)) else { continue }
            byHour[hour, default: LogHistogram()].record(bucket: Int(bucket), count: count)
        }
        return byHour.sorted { $0.key < $1.key }.map { HourlyLatency(hour: $0.key, histogram: $0.value) }
    }

    package func siteSLI(filter: MetricsFilter, minutes: ClosedRange<Int64>, limit: Int) async throws -> SiteSLIBreakdown {
        var binds = PostgresBindings()
        let whereSQL = conditions(filter, minutes: minutes, binds: &binds)
        // At least one row, as the totals over every site are read from the rows returned.
        binds.append(Int64(max(1, limit)))
        let limitBind = "$\(binds.count)"
        // One pass: per site, then the totals over every site (window functions) before the limit cuts rows.
        let sql = """
            WITH per_site AS (
                SELECT site,
                       coalesce(sum(count) FILTER (WHERE metric = 'slo.good'), 0)::int8 AS good,
                       coalesce(sum(count) FILTER (WHERE metric = 'slo.events'), 0)::int8 AS total,
                       min(minute) FILTER (WHERE metric = 'slo.events' AND count > 0) AS first_minute,
                       max(minute) FILTER (WHERE metric = 'slo.events' AND count > 0) AS last_minute
                FROM rollup_minute
                WHERE metric IN ('slo.good', 'slo.events') AND \(whereSQL)
                GROUP BY site
            ), with_events AS (
                SELECT * FROM per_site WHERE total > 0 AND first_minute IS NOT NULL
            ), ranked AS (
                SELECT site, good, total,
                       floor(extract(epoch FROM first_minute) / 60)::int8 AS first_minute,
                       floor(extract(epoch FROM last_minute) / 60)::int8 AS last_minute,
                       (count(*) OVER ())::int8 AS site_count,
                       (sum(good) OVER ())::int8 AS all_good,
                       (sum(total) OVER ())::int8 AS all_total,
                       floor(extract(epoch FROM min(first_minute) OVER ()) / 60)::int8 AS all_first,
                       floor(extract(epoch FROM max(last_minute) OVER ()) / 60)::int8 AS all_last
                FROM with_events
            )
            SELECT site, good, total, first_minute, last_minute, site_count, all_good, all_total, all_first, all_last
            FROM (SELECT * FROM ranked ORDER BY total DESC, site LIMIT \(limitBind)) AS top ORDER BY site
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var sites: [SiteSLI] = []
        var siteCount = 0
        var coverage: DataCoverage?
        let columns = (String, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64).self
        for try await (site, good, total, first, last, sitesWithEvents, allGood, allTotal, allFirst, allLast) in rows.decode(columns) {
            sites.append(SiteSLI(site: site, count: SLICount(good: good, total: total), firstMinute: first, lastMinute: last))
            siteCount = Int(sitesWithEvents)
            coverage = DataCoverage(firstMinute: allFirst, lastMinute: allLast, count: SLICount(good: allGood, total: allTotal))
        }
        return SiteSLIBreakdown(sites: sites, siteCount: siteCount, coverage: coverage)
    }

    package func siteLatency(
        filter: MetricsFilter, metric: String, minutes: ClosedRange<Int64>, sites: [String]
    ) async throws -> [String: LogHistogram] {
        guard !sites.isEmpty else { return [:] }
        var binds = PostgresBindings()
        binds.append(metric)
        binds.append(sites)
        let sql = """
            SELECT site, bucket, sum(count)::int8 FROM latency_minute
            WHERE metric = $1 AND site = ANY($2) AND \(conditions(filter, minutes: minutes, binds: &binds))
            GROUP BY 1, 2
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [String: LogHistogram] = [:]
        for try await (site, bucket, count) in rows.decode((String, Int32, Int64).self) {
            guard LogHistogram.isValidBucket(Int(bucket)) else { continue }
            result[site, default: LogHistogram()].record(bucket: Int(bucket), count: count)
        }
        return result
    }
}
