import Foundation
import Logging
import PostgresNIO

/// PostgreSQL's time per statement during a benchmark phase, from `pg_stat_statements` (the local
/// stack preloads it): where PostgreSQL's share of a merger row goes, statement by statement. Two
/// snapshots of the counters, subtracted; nothing is reset, so a stack someone else uses is not
/// disturbed. Without the extension (a stack started before it was preloaded) there is no profile.
struct StatementProfile {
    struct Counters {
        var query: String
        var calls: Int64
        var rows: Int64
        var executeMilliseconds: Double
        var planMilliseconds: Double
    }

    /// Counters by query id, for the statements of this database.
    typealias Snapshot = [Int64: Counters]

    static func snapshot(_ postgres: PostgresClient, logger: Logger) async -> Snapshot? {
        do {
            let rows = try await postgres.query(
                """
                SELECT queryid, query, calls, rows, total_exec_time, total_plan_time
                FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
                """,
                logger: logger
            )
            var snapshot: Snapshot = [:]
            for try await (id, query, calls, count, execute, plan) in rows.decode((Int64, String, Int64, Int64, Double, Double).self) {
                // One query id can appear once per role: add them up.
                var counters = snapshot[id] ?? Counters(query: query, calls: 0, rows: 0, executeMilliseconds: 0, planMilliseconds: 0)
                counters.calls += calls
                counters.rows += count
                counters.executeMilliseconds += execute
                counters.planMilliseconds += plan
                snapshot[id] = counters
            }
            return snapshot
        } catch {
            return nil
        }
    }

    /// The statements that ran since `start` (none when there was no snapshot), the costliest first.
    static func difference(_ start: Snapshot?, postgres: PostgresClient, logger: Logger) async -> [Counters] {
        guard let start, let end = await snapshot(postgres, logger: logger) else { return [] }
        return difference(from: start, to: end)
    }

    /// The statements that ran between the snapshots, the costliest first.
    static func difference(from start: Snapshot, to end: Snapshot) -> [Counters] {
        end.compactMap { id, after -> Counters? in
            let before = start[id]
            let calls = after.calls - (before?.calls ?? 0)
            guard calls > 0 else { return nil }
            return Counters(
                query: after.query, calls: calls, rows: after.rows - (before?.rows ?? 0),
                executeMilliseconds: after.executeMilliseconds - (before?.executeMilliseconds ?? 0),
                planMilliseconds: after.planMilliseconds - (before?.planMilliseconds ?? 0))
        }
        .sorted { $0.executeMilliseconds + $0.planMilliseconds > $1.executeMilliseconds + $1.planMilliseconds }
    }

    /// One line per statement, the `limit` costliest: µs per `units` (rows), calls, and the statement's
    /// opening words; then the total, with planning apart.
    static func lines(_ statements: [Counters], perUnits units: Int, limit: Int = 10) -> [String] {
        guard units > 0, !statements.isEmpty else { return ["    (no statement counters: is pg_stat_statements preloaded?)"] }
        let scale = 1_000.0 / Double(units)
        var lines = statements.prefix(limit).map { statement in
            String(
                format: "    %7.1f µs/row  %6d calls  ", (statement.executeMilliseconds + statement.planMilliseconds) * scale,
                statement.calls) + label(statement.query)
        }
        let execute = statements.reduce(0) { $0 + $1.executeMilliseconds }, plan = statements.reduce(0) { $0 + $1.planMilliseconds }
        let calls = statements.reduce(0) { $0 + $1.calls }
        lines.append(
            String(
                format: "    %7.1f µs/row  %6d calls  in all (of which planning %.1f µs/row)", (execute + plan) * scale, calls,
                plan * scale))
        return lines
    }

    /// The statement's opening words on one line: enough to tell which write it is.
    static func label(_ query: String) -> String {
        let words = query.split(whereSeparator: { $0.isWhitespace }).prefix(7).joined(separator: " ")
        return words.count > 70 ? String(words.prefix(70)) + "…" : words
    }
}
