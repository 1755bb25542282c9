import Foundation
import Logging
import PostgresNIO
import TelemetryAggregatorCore

/// The dimension filter of a query: `nil` is "every value".
public struct MetricsFilter: Hashable, Sendable, Codable {
    public var site: String?
    public var appVersion: String?
    public var deviceModel: String?

    public init(site: String? = nil, appVersion: String? = nil, deviceModel: String? = nil) {
        self.site = site
        self.appVersion = appVersion
        self.deviceModel = deviceModel
    }
}

/// A dimension to break numbers down by.
public enum DimensionName: String, CaseIterable, Sendable, Codable {
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
public struct HourlySLI: Sendable, Hashable {
    public var hour: Int64
    public var count: SLICount
}

public struct HourlyLatency: Sendable, Hashable {
    public var hour: Int64
    public var histogram: LogHistogram
}

/// Reads the minute rollups (`/v1/slo`, `/v1/metrics/summary`, the status page, the SLO gauges).
public protocol TelemetryQueryRepository: Sendable {
    /// Counter totals over `minutes`, per value of `groupBy` (one group "" when nil).
    func counters(filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?) async throws -> [String: [String: CounterCell]]
    /// Latency histograms merged over `minutes`, per value of `groupBy` (one group "" when nil).
    func histograms(filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?) async throws -> [String: [String: LogHistogram]]
    /// The SLO's good / total of each window ending at `now`.
    func sloCounts(filter: MetricsFilter, windows: [SLOWindow], now: Date) async throws -> [SLOWindow: SLICount]
    /// Good / total per hour over the last `hours` hours.
    func hourlySLI(filter: MetricsFilter, hours: Int, now: Date) async throws -> [HourlySLI]
    /// A latency metric per hour over the last `hours` hours.
    func hourlyLatency(filter: MetricsFilter, metric: String, hours: Int, now: Date) async throws -> [HourlyLatency]
}

public struct PostgresTelemetryQueryRepository: TelemetryQueryRepository {
    let client: PostgresClient
    let schema: String
    let logger: Logger

    public init(client: PostgresClient, schema: String = "telemetry", logger: Logger) {
        precondition(TelemetrySchema.isValidName(schema), "invalid schema name \(schema)")
        self.client = client
        self.schema = schema
        self.logger = logger
    }

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

    public func counters(filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?) async throws -> [String: [String: CounterCell]] {
        var binds = PostgresBindings()
        let group = groupBy?.column ?? "''::text"
        let sql = """
            SELECT \(group), metric, sum(count)::int8, sum(sum_micros)::int8 FROM \(schema).rollup_minute
            WHERE \(conditions(filter, minutes: minutes, binds: &binds)) GROUP BY 1, 2
            """
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        var result: [String: [String: CounterCell]] = [:]
        for try await (value, metric, count, micros) in rows.decode((String, String, Int64, Int64).self) {
            result[value, default: [:]][metric] = CounterCell(count: count, sumMicros: micros)
        }
        return result
    }

    public func histograms(filter: MetricsFilter, minutes: ClosedRange<Int64>, groupBy: DimensionName?) async throws -> [String: [String: LogHistogram]] {
        var binds = PostgresBindings()
        let group = groupBy?.column ?? "''::text"
        let sql = """
            SELECT \(group), metric, bucket, sum(count)::int8 FROM \(schema).latency_minute
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

    public func sloCounts(filter: MetricsFilter, windows: [SLOWindow], now: Date) async throws -> [SLOWindow: SLICount] {
        guard let widest = windows.max(by: { $0.minutes < $1.minutes }) else { return [:] }
        var binds = PostgresBindings()
        let whereSQL = conditions(filter, minutes: widest.minuteRange(endingAt: now), binds: &binds)
        var columns: [String] = []
        for window in windows {
            binds.append(EpochMinute.date(window.minuteRange(endingAt: now).lowerBound))
            let start = "$\(binds.count)"
            columns.append("coalesce(sum(count) FILTER (WHERE metric = 'slo.good' AND minute >= \(start)), 0)::int8")
            columns.append("coalesce(sum(count) FILTER (WHERE metric = 'slo.events' AND minute >= \(start)), 0)::int8")
        }
        let sql = """
            SELECT \(columns.joined(separator: ", ")) FROM \(schema).rollup_minute
            WHERE metric IN ('slo.good', 'slo.events') AND \(whereSQL)
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

    public func hourlySLI(filter: MetricsFilter, hours: Int, now: Date) async throws -> [HourlySLI] {
        var binds = PostgresBindings()
        let sql = """
            SELECT floor(extract(epoch FROM minute) / 3600)::int8 AS hour,
                   coalesce(sum(count) FILTER (WHERE metric = 'slo.good'), 0)::int8,
                   coalesce(sum(count) FILTER (WHERE metric = 'slo.events'), 0)::int8
            FROM \(schema).rollup_minute
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

    public func hourlyLatency(filter: MetricsFilter, metric: String, hours: Int, now: Date) async throws -> [HourlyLatency] {
        var binds = PostgresBindings()
        binds.append(metric)
        let sql = """
            SELECT floor(extract(epoch FROM minute) / 3600)::int8 AS hour, bucket, sum(count)::int8
            FROM \(schema).latency_minute
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
}
