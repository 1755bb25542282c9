import Foundation

/// The performance bars (README, "Performance"), each figure beside its bar: ratios against the
/// ceilings measured in the same run, and CPU per unit of work, so that runs on other machines compare.
enum PerformanceBars {
    struct Bar {
        var name: String
        var figure: String
        var bar: String
        var met: Bool
    }

    static func bars(
        saturated: (PipelineBench.LoopResult, StackCPU.Usage?)?, bare: Double?, half: PipelineBench.Latency?,
        merger: PipelineBench.StorageRun?, pgbench: PipelineBench.StorageRun?
    ) -> [Bar] {
        var bars: [Bar] = []
        if let merger, let pgbench, pgbench.rowsPerSecond > 0 {
            let ratio = merger.rowsPerSecond / pgbench.rowsPerSecond
            bars.append(
                Bar(
                    name: "merger rows/s vs pgbench, 2 clients",
                    figure: String(format: "%.0f / %.0f = %.3f", merger.rowsPerSecond, pgbench.rowsPerSecond, ratio),
                    bar: ">= 0.35", met: ratio >= 0.35))
            // Without the other services' connections (the telemetry aggregator records the verdicts).
            let times = merger.postgresOwnMicrosecondsPerRow / max(pgbench.postgresOwnMicrosecondsPerRow, 1e-9)
            bars.append(
                Bar(
                    name: "PostgreSQL CPU per row, merger vs pgbench",
                    figure: String(
                        format: "%.0f / %.0f µs = %.3fx", merger.postgresOwnMicrosecondsPerRow, pgbench.postgresOwnMicrosecondsPerRow, times
                    ),
                    bar: "<= 1.5x", met: times <= 1.5))
        }
        if let merger {
            let perRow = merger.cpu.seconds(of: .merger, perUnit: merger.rows) * 1e6
            bars.append(
                Bar(name: "merger process CPU per row", figure: String(format: "%.1f µs", perRow), bar: "<= 50 µs", met: perRow <= 50))
        }
        if let (result, cpu) = saturated, result.accepted > 0 {
            if let cpu {
                let perEvent = cpu.seconds(of: .gateway, perUnit: result.accepted) * 1e3
                bars.append(
                    Bar(
                        name: "gateway CPU per accepted event", figure: String(format: "%.3f ms", perEvent), bar: "<= 0.15 ms",
                        met: perEvent <= 0.15))
            }
            if let bare, bare > 0 {
                let ratio = result.acceptedPerSecond / bare
                bars.append(
                    Bar(
                        name: "end to end vs bare Hummingbird decode",
                        figure: String(format: "%.0f / %.0f = %.3f", result.acceptedPerSecond, bare, ratio), bar: ">= 0.35",
                        met: ratio >= 0.35))
            }
        }
        if let half, half.count > 0 {
            bars.append(
                Bar(name: "request p99 at half load", figure: String(format: "%.1f ms", half.p99), bar: "<= 150 ms", met: half.p99 <= 150))
        }
        return bars
    }

    static func lines(
        saturated: (PipelineBench.LoopResult, StackCPU.Usage?)?, bare: Double?, half: PipelineBench.Latency?,
        merger: PipelineBench.StorageRun?, pgbench: PipelineBench.StorageRun?
    ) -> [String] {
        let bars = bars(saturated: saturated, bare: bare, half: half, merger: merger, pgbench: pgbench)
        guard !bars.isEmpty else { return [] }
        let width = bars.map(\.name.count).max() ?? 0
        let figureWidth = bars.map(\.figure.count).max() ?? 0
        return ["== the performance bars (\(bars.filter(\.met).count) of \(bars.count) met) =="]
            + bars.map { bar in
                bar.name.padding(toLength: width + 2, withPad: ".", startingAt: 0) + " "
                    + bar.figure.padding(toLength: figureWidth, withPad: " ", startingAt: 0) + "   bar " + bar.bar
                    + (bar.met ? "   met" : "   MISSED")
            }
    }
}
