import Foundation
import Logging
import PostgresNIO

/// PostgreSQL's CPU split by whose backend spent it: each service's pool names its connections
/// (`application_name`, see `PostgresConfiguration.applicationName`), pgbench names its own, and the
/// server's own processes (WAL writer, checkpointer, ...) go by their backend type. While the merger
/// alone is measured, the telemetry aggregator also writes (it reads the verdicts): its backends'
/// CPU is PostgreSQL's, but not the merger's.
///
/// From `/proc/<pid>/stat` of the backends `pg_stat_activity` lists at the start and at the end; a
/// backend that began and ended in between is missed, which is why the total stays `StackCPU`'s.
struct PostgresCPU {
    struct Backend {
        var owner: String
        var seconds: Double
    }

    typealias Snapshot = [Int32: Backend]

    static func snapshot(_ postgres: PostgresClient, logger: Logger) async -> Snapshot {
        var snapshot: Snapshot = [:]
        guard
            let rows = try? await postgres.query(
                "SELECT pid, coalesce(nullif(application_name, ''), backend_type, 'server processes') FROM pg_stat_activity", logger: logger
            )
        else { return snapshot }
        do {
            for try await (pid, owner) in rows.decode((Int32, String).self) {
                guard let process = ProcessStat.read(pid: pid) else { continue }
                snapshot[pid] = Backend(owner: owner, seconds: process.ownSeconds)
            }
        } catch {
            return snapshot
        }
        return snapshot
    }

    /// CPU seconds per owner between the snapshots.
    static func usage(from start: Snapshot, to end: Snapshot) -> [String: Double] {
        var byOwner: [String: Double] = [:]
        for (pid, backend) in end {
            byOwner[backend.owner, default: 0] += max(0, backend.seconds - (start[pid]?.seconds ?? 0))
        }
        return byOwner
    }

    /// The connections named after a service or after this benchmark (`application_name`).
    static let serviceNames: Set<String> = [
        "beacon-registry", "ingest-gateway", "policy-service", "session-merger", "telemetry-aggregator", "pipeline-bench",
    ]

    /// Seconds spent by the connections of services other than `own`.
    static func othersSeconds(_ usage: [String: Double], own: String) -> Double {
        usage.filter { serviceNames.contains($0.key) && $0.key != own }.values.reduce(0, +)
    }

    /// PostgreSQL's CPU per row in µs, without what the connections of services other than `own`
    /// spent meanwhile.
    static func ownMicrosecondsPerRow(cpu: StackCPU.Usage, byOwner usage: [String: Double], own: String, rows: Int) -> Double {
        guard rows > 0 else { return 0 }
        return max(0, cpu.seconds(of: .postgres, perUnit: rows) - othersSeconds(usage, own: own) / Double(rows)) * 1e6
    }

    /// "session-merger 61 µs, telemetry-aggregator 33 µs, …" per `units`, largest first.
    static func line(_ usage: [String: Double], perUnits units: Int) -> String {
        guard units > 0 else { return "" }
        return usage.filter { $0.value > 0 }.sorted { $0.value > $1.value }
            .map { "\($0.key) \(String(format: "%.0f", $0.value / Double(units) * 1e6)) µs" }.joined(separator: ", ")
    }
}
