import Foundation

/// The report as one self-contained HTML page; the charts are SVG drawn here (no JavaScript).
package enum HTMLReport {
    package static func render(_ report: FleetReport) -> String {
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
            html +=
                "<tr><td>\(escape(t.name))</td><td>\(escape(t.target))</td><td>\(escape(t.actual))</td><td class=\"\(t.met ? "met" : "missed")\">\(t.met ? "met" : "missed")</td></tr>\n"
        }
        html += "</table>\n<h2>Per site</h2>\n" + siteTable(report)
        let seconds = report.parameters.mode == "real-stack" ? "seconds" : "virtual seconds"
        html += "<h2>Detection latency (reaching the check-in point to the check-in decision, \(seconds))</h2>\n"
        html += histogram(report.detectionLatencyHistogram)
        html += "<h2>Status-code mix (every attempt)</h2>\n"
        let statuses = report.delivery.attemptStatuses.sorted { $0.key < $1.key }
        html += bars(statuses)
        html += "<table id=\"status-legend\"><tr><th>bar</th><th>attempts</th><th>what it means</th></tr>\n"
        for (label, count) in statuses {
            html += "<tr><td>\(escape(label))</td><td>\(count)</td><td>\(escape(statusMeaning(label)))</td></tr>\n"
        }
        html += "</table>\n"
        html +=
            "<h2>Timelines of a sample of people</h2>\n<p>Grey: true gate passes (▲ in, ▼ out); green: check-ins; red: check-outs, at the moment the device decided.</p>\n"
        html += timelines(report.timelines, start: report.start, hours: report.parameters.durationHours)
        html += "<h2>Parameters</h2>\n<pre>\(escape((try? FleetReport.encodeParameters(report.parameters)) ?? ""))</pre>\n</body></html>\n"
        return html
    }

    /// What a bar of the status-code mix means for the phone that saw it.
    package static func statusMeaning(_ label: String) -> String {
        switch label {
        case "201": return "accepted and stored: the event's first arrival; the phone deletes it from its outbox"
        case "200":
            return
                "a repeat of an event the server already stored (same idempotency key): the phone missed the first answer and sent it again; final"
        case "202": return "queued durably, no verdict yet: the phone keeps the event and asks again with the same key"
        case "400": return "refused as invalid; final (the phone drops it and reports it)"
        case "401": return "the device token was refused; the phone keeps the event and re-authenticates"
        case "409": return "refused by a policy rule (final), or the same key still in flight (retried)"
        case "422": return "the same idempotency key with a different payload; final"
        case "429": return "throttled: the phone waits for Retry-After and sends again"
        case "timeout":
            return
                "no answer within the phone's request timeout: it sends again with the same key (the server may have stored it; then the retry gets 200)"
        case "offline": return "no network on the phone: no request left it; the event waits in the outbox until the network is back"
        case "captive_portal":
            return "a Wi-Fi login page answered instead of the gateway (HTML 200): not a verdict, the phone sends again later"
        case "transport_error": return "the connection failed before an answer: the phone sends again with the same key"
        default:
            return label.hasPrefix("5")
                ? "server error: the phone sends again with the same key" : "other answer: the phone keeps the event and sends again"
        }
    }

    static func siteTable(_ report: FleetReport) -> String {
        var html = "<table id=\"site-table\"><tr><th>site</th><th>devices</th><th>arrivals detected</th><th>false check-ins</th>"
        html += "<th>events posted</th><th>at the server</th><th>SLO, this run</th><th>SLO, status page</th></tr>\n"
        func pct(_ good: Int64, _ total: Int64) -> String {
            total == 0 ? "no events" : String(format: "%.2f %% (%lld of %lld)", Double(good) * 100 / Double(total), good, total)
        }
        for row in report.sites {
            let server = row.serverSLOEvents.map { pct(row.serverSLOGood ?? 0, $0) } ?? "not asked"
            html += "<tr><td>\(escape(row.siteId))</td><td>\(row.devices)</td><td>\(row.matchedArrivals) of \(row.arrivals)</td>"
            html += "<td>\(row.falseCheckIns)</td><td>\(row.eventsPosted)</td><td>\(row.eventsAtServer)</td>"
            html += "<td>\(pct(Int64(row.sloGood), Int64(row.sloEvents)))</td><td>\(escape(server))</td></tr>\n"
        }
        return html + "</table>\n"
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;")
    }

    static func histogram(_ counts: [Int]) -> String {
        let width = 640.0, height = 180.0, left = 40.0, bottom = 20.0
        let maxCount = Double(max(counts.max() ?? 1, 1))
        let barWidth = (width - left) / Double(max(counts.count, 1))
        var svg = "<svg width=\"\(Int(width) + 30)\" height=\"\(Int(height + bottom))\" role=\"img\">\n"
        for (i, c) in counts.enumerated() {
            let h = (height - 10) * Double(c) / maxCount
            let x = left + Double(i) * barWidth
            svg +=
                "<rect x=\"\(f(x))\" y=\"\(f(height - h))\" width=\"\(f(barWidth - 1))\" height=\"\(f(h))\" fill=\"#3b6ea8\"><title>\(i)\(i == counts.count - 1 ? "+" : "")-\(i + 1) s: \(c)</title></rect>\n"
            if i % 5 == 0 { svg += "<text x=\"\(f(x))\" y=\"\(f(height + 14))\">\(i) s</text>\n" }
        }
        svg +=
            "<text x=\"0\" y=\"12\">\(Int(maxCount))</text><line x1=\"\(f(left))\" y1=\"\(f(height))\" x2=\"\(f(width))\" y2=\"\(f(height))\" stroke=\"#444\"/>\n</svg>\n"
        return svg
    }

    static func bars(_ items: [(key: String, value: Int)]) -> String {
        let rowHeight = 22.0, labelWidth = 120.0, width = 520.0
        let maxValue = Double(max(items.map(\.value).max() ?? 1, 1))
        var svg =
            "<svg width=\"\(Int(labelWidth + width + 80))\" height=\"\(Int(rowHeight * Double(max(items.count, 1)) + 4))\" role=\"img\">\n"
        for (i, item) in items.enumerated() {
            let y = Double(i) * rowHeight
            let w = width * Double(item.value) / maxValue
            let color = item.key.hasPrefix("2") ? "#2e7d32" : (item.key.hasPrefix("4") ? "#ef6c00" : "#b00020")
            svg +=
                "<text x=\"0\" y=\"\(f(y + 15))\">\(escape(item.key))</text><rect x=\"\(f(labelWidth))\" y=\"\(f(y + 3))\" width=\"\(f(max(w, 1)))\" height=\"16\" fill=\"\(color)\"/><text x=\"\(f(labelWidth + w + 6))\" y=\"\(f(y + 15))\">\(item.value)</text>\n"
        }
        return svg + "</svg>\n"
    }

    static func timelines(_ lines: [FleetReport.Timeline], start: Int64, hours: Double) -> String {
        let rowHeight = 26.0, left = 150.0, width = 820.0
        let spanMs = max(hours * 3_600_000, 1_000)
        func x(_ t: Int64) -> Double { left + width * min(max(Double(t - start) / spanMs, 0), 1) }
        var svg = "<svg width=\"\(Int(left + width + 20))\" height=\"\(Int(rowHeight * Double(lines.count) + 30))\" role=\"img\">\n"
        // About a dozen ticks at a round step: seconds for a short run, hours for days.
        let steps: [(ms: Int64, unit: Int64, suffix: String)] = [
            (10_000, 1_000, "s"), (30_000, 1_000, "s"), (60_000, 60_000, "min"), (300_000, 60_000, "min"), (900_000, 60_000, "min"),
            (3_600_000, 3_600_000, "h"), (7_200_000, 3_600_000, "h"), (21_600_000, 3_600_000, "h"),
        ]
        let step = steps.first { Double($0.ms) * 12 >= spanMs } ?? (Int64(spanMs / 12 / 3_600_000 + 1) * 3_600_000, 3_600_000, "h")
        var tick: Int64 = 0
        while Double(tick) <= spanMs {
            let tx = x(start + tick)
            svg +=
                "<line x1=\"\(f(tx))\" y1=\"0\" x2=\"\(f(tx))\" y2=\"\(f(rowHeight * Double(lines.count)))\" stroke=\"#eee\"/><text x=\"\(f(tx - 8))\" y=\"\(f(rowHeight * Double(lines.count) + 14))\">\(tick / step.unit)\(step.suffix)</text>\n"
            tick += step.ms
        }
        for (i, line) in lines.enumerated() {
            let y = Double(i) * rowHeight + 13
            svg +=
                "<text x=\"0\" y=\"\(f(y + 4))\">#\(line.person) \(escape(line.kind))</text><line x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(left + width))\" y2=\"\(f(y))\" stroke=\"#ccc\"/>\n"
            for mark in line.truth {
                let mx = x(mark.at)
                let path =
                    mark.kind == "arrival"
                    ? "M\(f(mx - 4)) \(f(y + 6)) L\(f(mx)) \(f(y - 2)) L\(f(mx + 4)) \(f(y + 6))Z"
                    : "M\(f(mx - 4)) \(f(y - 6)) L\(f(mx)) \(f(y + 2)) L\(f(mx + 4)) \(f(y - 6))Z"
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
    package func write(to directory: String, name: String = "fleet-report") throws -> (json: String, html: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let jsonPath = "\(directory)/\(name).json", htmlPath = "\(directory)/\(name).html"
        try json().write(toFile: jsonPath, atomically: true, encoding: .utf8)
        try HTMLReport.render(self).write(toFile: htmlPath, atomically: true, encoding: .utf8)
        return (jsonPath, htmlPath)
    }
}
