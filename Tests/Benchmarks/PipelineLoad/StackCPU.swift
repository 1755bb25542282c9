import Foundation

/// Where the machine's CPU went during a benchmark phase, per part of the stack, from `/proc`
/// (Linux). A gap to a ceiling on two shared cores is a CPU budget question: printing each part's
/// CPU per event or row beside the figures shows which part would have to shrink, and by how much.
struct StackCPU {
    /// The parts of the stack, told apart by process name (the kernel keeps 15 characters).
    enum Part: String, CaseIterable {
        case broker, gateway, policy, merger, postgres, telemetry, registry, loadGenerator

        var label: String {
            switch self {
            case .broker: "broker"
            case .gateway: "gateway"
            case .policy: "policy"
            case .merger: "merger"
            case .postgres: "PostgreSQL"
            case .telemetry: "telemetry"
            case .registry: "registry"
            case .loadGenerator: "load generator"
            }
        }

        init?(processName name: String) {
            switch name {
            case "tansu": self = .broker
            case "ingest-gateway": self = .gateway
            case "policy-service": self = .policy
            case "session-merger": self = .merger
            case "postgres": self = .postgres
            case "telemetry-aggre": self = .telemetry
            case "beacon-registry": self = .registry
            case "PipelineLoad": self = .loadGenerator
            default: return nil
            }
        }
    }

    /// CPU seconds so far, per part and for the whole machine.
    struct Snapshot {
        var seconds: [Part: Double]
        var machineBusy: Double
        var machineTotal: Double
    }

    /// CPU used between two snapshots.
    struct Usage {
        var seconds: [Part: Double]
        /// Everything else that ran (the kernel's own work, other processes).
        var otherSeconds: Double
        /// The share of all cores that was busy, 0...1.
        var busyShare: Double
        var cores: Int

        /// "broker 0.67 ms, gateway 0.50 ms, …" per `units` (events or rows), largest first.
        func perUnit(_ units: Int, scale: Double, unit: String) -> String {
            guard units > 0 else { return "no \(unit)" }
            var items = Part.allCases.filter { (seconds[$0] ?? 0) > 0 }.map { ($0.label, seconds[$0] ?? 0) }
            if otherSeconds > 0 { items.append(("other", otherSeconds)) }
            let digits = scale >= 1e6 ? "%.0f" : "%.2f"
            return items.sorted { $0.1 > $1.1 }
                .map { "\($0.0) \(String(format: digits, $0.1 / Double(units) * scale)) \(unit)" }
                .joined(separator: ", ")
        }

        /// One part's CPU seconds per unit.
        func seconds(of part: Part, perUnit units: Int) -> Double {
            units > 0 ? (seconds[part] ?? 0) / Double(units) : 0
        }

        /// All parts and the rest, per unit.
        func total(perUnit units: Int) -> Double {
            units > 0 ? (seconds.values.reduce(0, +) + otherSeconds) / Double(units) : 0
        }
    }

    static func snapshot() -> Snapshot {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var seconds: [Part: Double] = [:]
        for process in ProcessStat.all() {
            guard let part = Part(processName: process.name) else { continue }
            // The children's times matter for PostgreSQL (a backend that exited, pgbench's included,
            // is added to the postmaster's) and for pgbench itself (added to the load generator's).
            seconds[part, default: 0] += process.ownSeconds + process.childrenSeconds
        }
        var busy = 0.0, total = 0.0
        if let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        {
            let values = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
            total = values.reduce(0, +) / ticks
            // idle and iowait
            busy = total - (values.count > 4 ? (values[3] + values[4]) / ticks : 0)
        }
        return Snapshot(seconds: seconds, machineBusy: busy, machineTotal: total)
    }

    /// The running processes of `part`.
    static func pids(of part: Part) -> [Int32] {
        ProcessStat.all().filter { Part(processName: $0.name) == part }.map(\.pid)
    }

    static func usage(from start: Snapshot, to end: Snapshot) -> Usage {
        var seconds: [Part: Double] = [:]
        for part in Part.allCases {
            // A process that was gone by the end took its own time with it (its parent's
            // children's time holds it only if it exited after the start): never negative.
            seconds[part] = max(0, (end.seconds[part] ?? 0) - (start.seconds[part] ?? 0))
        }
        let busy = end.machineBusy - start.machineBusy
        let total = end.machineTotal - start.machineTotal
        return Usage(
            seconds: seconds, otherSeconds: max(0, busy - seconds.values.reduce(0, +)),
            busyShare: total > 0 ? busy / total : 0, cores: ProcessInfo.processInfo.activeProcessorCount)
    }

    /// Runs `body` and tells what it cost.
    static func measure<T>(_ body: () async throws -> T) async rethrows -> (T, Usage) {
        let start = snapshot()
        let value = try await body()
        return (value, usage(from: start, to: snapshot()))
    }
}

/// One process's line of `/proc/<pid>/stat`: its name (the kernel keeps 15 characters) and its CPU
/// time so far.
struct ProcessStat {
    var pid: Int32
    var name: String
    /// Its own user and system time.
    var ownSeconds: Double
    /// The user and system time of its children that exited and were waited for.
    var childrenSeconds: Double

    private static let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func read(pid: Int32) -> ProcessStat? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return nil }
        // After ") ": state is field 3; utime, stime, cutime, cstime are fields 14-17.
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        guard fields.count > 14 else { return nil }
        let times = fields[11...14].map { (Double($0) ?? 0) / ticks }
        return ProcessStat(
            pid: pid, name: String(stat[stat.index(after: open)..<close]), ownSeconds: times[0] + times[1],
            childrenSeconds: times[2] + times[3])
    }

    /// Every process running now.
    static func all() -> [ProcessStat] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0).flatMap { read(pid: $0) } }
    }
}
