import Foundation

/// The report as one self-contained HTML page; the charts are SVG drawn here (no JavaScript).
public enum HTMLReport {
    public static func render(_ report: FleetReport) -> String {
        var html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Fleet simulator report</title>
        <style>
        body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
        table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
        .met{color:#176b1f}.missed{color:#b00020;font-weight:bold}pre{background:#f6f6f6;padding:1em;white-space:pre-wrap}
        svg text{font-size:11px;font-family:system-ui,sans-serif}
        </style></head><body>
        <h1>Fleet simulator report</h1>
        <pre>\(escape(report.headline))</pre>
        <h2>Targets</h2>
        <table><tr><th>figure</th><th>target</th><th>actual</th><th></th></tr>
        """
        for t in report.targets {
            html += "<tr><td>\(escape(t.name))</td><td>\(escape(t.target))</td><td>\(escape(t.actual))</td><td class=\"\(t.met ? "met" : "missed")\">\(t.met ? "met" : "missed")</td></tr>\n"
        }
        html += "</table>\n<h2>Detection latency (arrival at the doorway to the check-in decision, virtual seconds)</h2>\n"
        html += histogram(report.detectionLatencyHistogram)
        html += "<h2>Status-code mix (every attempt)</h2>\n"
        html += bars(report.delivery.attemptStatuses.sorted { $0.key < $1.key })
        html += "<h2>Timelines of a sample of people</h2>\n<p>Grey: true gate passes (▲ in, ▼ out); green: check-ins; red: check-outs, at the moment the device decided.</p>\n"
        html += timelines(report.timelines, start: report.start, hours: report.parameters.durationHours)
        html += "<h2>Parameters</h2>\n<pre>\(escape((try? FleetReport.encodeParameters(report.parameters)) ?? ""))</pre>\n</body></html>\n"
        return html
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    static func histogram(_ counts: [Int]) -> String {
        let width = 640.0, height = 180.0, left = 40.0, bottom = 20.0
        let maxCount = Double(max(counts.max() ?? 1, 1))
        let barWidth = (width - left) / Double(max(counts.count, 1))
        var svg = "<svg width=\"\(Int(width))\" height=\"\(Int(height + bottom))\" role=\"img\">\n"
        for (i, c) in counts.enumerated() {
            let h = (height - 10) * Double(c) / maxCount
            let x = left + Double(i) * barWidth
            svg += "<rect x=\"\(f(x))\" y=\"\(f(height - h))\" width=\"\(f(barWidth - 1))\" height=\"\(f(h))\" fill=\"#3b6ea8\"><title>\(i)\(i == counts.count - 1 ? "+" : "")-\(i + 1) s: \(c)</title></rect>\n"
            if i % 5 == 0 { svg += "<text x=\"\(f(x))\" y=\"\(f(height + 14))\">\(i) s</text>\n" }
        }
        svg += "<text x=\"0\" y=\"12\">\(Int(maxCount))</text><line x1=\"\(f(left))\" y1=\"\(f(height))\" x2=\"\(f(width))\" y2=\"\(f(height))\" stroke=\"#444\"/>\n</svg>\n"
        return svg
    }

    static func bars(_ items: [(key: String, value: Int)]) -> String {
        let rowHeight = 22.0, labelWidth = 120.0, width = 520.0
        let maxValue = Double(max(items.map(\.value).max() ?? 1, 1))
        var svg = "<svg width=\"\(Int(labelWidth + width + 80))\" height=\"\(Int(rowHeight * Double(max(items.count, 1)) + 4))\" role=\"img\">\n"
        for (i, item) in items.enumerated() {
            let y = Double(i) * rowHeight
            let w = width * Double(item.value) / maxValue
            let color = item.key.hasPrefix("2") ? "#2e7d32" : (item.key.hasPrefix("4") ? "#ef6c00" : "#b00020")
            svg += "<text x=\"0\" y=\"\(f(y + 15))\">\(escape(item.key))</text><rect x=\"\(f(labelWidth))\" y=\"\(f(y + 3))\" width=\"\(f(max(w, 1)))\" height=\"16\" fill=\"\(color)\"/><text x=\"\(f(labelWidth + w + 6))\" y=\"\(f(y + 15))\">\(item.value)</text>\n"
        }
        return svg + "</svg>\n"
    }

    static func timelines(_ lines: [FleetReport.Timeline], start: Int64, hours: Double) -> String {
        let rowHeight = 26.0, left = 150.0, width = 820.0
        let spanMs = max(hours, 1) * 3_600_000
        func x(_ t: Int64) -> Double { left + width * min(max(Double(t - start) / spanMs, 0), 1) }
        var svg = "<svg width=\"\(Int(left + width + 20))\" height=\"\(Int(rowHeight * Double(lines.count) + 30))\" role=\"img\">\n"
        let tickHours = max(1, Int(hours / 12))
        var h = 0
        while Double(h) <= hours {
            let tx = x(start + Int64(h) * 3_600_000)
            svg += "<line x1=\"\(f(tx))\" y1=\"0\" x2=\"\(f(tx))\" y2=\"\(f(rowHeight * Double(lines.count)))\" stroke=\"#eee\"/><text x=\"\(f(tx - 8))\" y=\"\(f(rowHeight * Double(lines.count) + 14))\">\(h)h</text>\n"
            h += tickHours
        }
        for (i, line) in lines.enumerated() {
            let y = Double(i) * rowHeight + 13
            svg += "<text x=\"0\" y=\"\(f(y + 4))\">#\(line.person) \(escape(line.kind))</text><line x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(left + width))\" y2=\"\(f(y))\" stroke=\"#ccc\"/>\n"
            for mark in line.truth {
                let mx = x(mark.at)
                let path = mark.kind == "arrival" ? "M\(f(mx - 4)) \(f(y + 6)) L\(f(mx)) \(f(y - 2)) L\(f(mx + 4)) \(f(y + 6))Z" : "M\(f(mx - 4)) \(f(y - 6)) L\(f(mx)) \(f(y + 2)) L\(f(mx + 4)) \(f(y - 6))Z"
                svg += "<path d=\"\(path)\" fill=\"#999\"><title>true \(mark.kind)</title></path>\n"
            }
            for mark in line.detected {
                let color = mark.kind == "checkin" ? "#2e7d32" : "#b00020"
                svg += "<circle cx=\"\(f(x(mark.at)))\" cy=\"\(f(y))\" r=\"3.5\" fill=\"\(color)\"><title>\(mark.kind)</title></circle>\n"
            }
        }
        return svg + "</svg>\n"
    }

    static func f(_ v: Double) -> String { String(format: "%.1f", v) }
}

extension FleetReport {
    static func encodeParameters(_ p: Parameters) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(p), as: UTF8.self)
    }

    /// Writes `<directory>/<name>.json` and `<directory>/<name>.html`; returns both paths.
    public func write(to directory: String, name: String = "fleet-report") throws -> (json: String, html: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let jsonPath = "\(directory)/\(name).json", htmlPath = "\(directory)/\(name).html"
        try json().write(toFile: jsonPath, atomically: true, encoding: .utf8)
        try HTMLReport.render(self).write(toFile: htmlPath, atomically: true, encoding: .utf8)
        return (jsonPath, htmlPath)
    }
}
