import AttendanceProtocol
import Foundation
import TelemetryAggregatorCore

// Telemetry events aggregated per second on one core (`make bench-telemetry` pins it with taskset),
// against a baseline measured in the same run over the same messages: decoding alone. The measured
// loop is what the aggregator does in memory per polled batch: decode, drop repeated event ids,
// aggregate into the minute rollup delta (counters, values, battery drain), plus the verdict
// latency histogram. The PostgreSQL upsert of each batch is not part of it (it is one statement per
// table per batch; see the service README for the database's own ceilings).

let uploads = Int(ProcessInfo.processInfo.environment["BENCH_UPLOADS"] ?? "") ?? 20_000
let eventsPerUpload = 25
let batchSize = 1_000 // messages per polled batch, as TELEMETRY_MAX_BATCH
let rounds = 3

let names: [TelemetryEventName] = [
    .regionEnter, .rangingStart, .rangingStop, .motionQuery, .gattOk, .api201, .outboxSent, .battery, .regionExit,
    .bgTimeout, .offlineEnqueue, .api200, .api409,
]
let sites = (0..<20).map { "site-\($0)" }
let versions = ["2.4.0", "2.4.1", "2.5.0"]
let models = ["iPhone15,2", "iPhone14,5", "Pixel 8", "SM-S911B"]
let base = Date(timeIntervalSince1970: 1_763_800_000)

func makeMessages() throws -> [[UInt8]] {
    var messages: [[UInt8]] = []
    messages.reserveCapacity(uploads)
    for u in 0..<uploads {
        let device = "device-\(u % 5_000)"
        let start = base.addingTimeInterval(Double(u))
        var events: [TelemetryEvent] = []
        for e in 0..<eventsPerUpload {
            let name = names[(u + e) % names.count]
            let value: Double? =
                switch name {
                case .rangingStop: Double(800 + (u * 7 + e) % 4_000)
                case .battery: 0.9 - Double(e) * 0.001
                case .outboxSent, .offlineEnqueue: Double((u + e) % 5)
                default: nil
                }
            events.append(
                TelemetryEvent(eventId: "\(device)-\(u)-\(e)", name: name, at: start.addingTimeInterval(Double(e) * 10), value: value))
        }
        let batch = DeviceTelemetryBatch(
            batchId: "b-\(u)", deviceId: device, siteId: sites[u % sites.count], appVersion: versions[u % versions.count],
            deviceModel: models[u % models.count], receivedAt: start.addingTimeInterval(400), events: events)
        messages.append(try ProtocolCodec.wire.encode(batch))
    }
    return messages
}

struct DeviceEvent: Hashable {
    var device: String
    var event: String
}

/// Baseline: decode only.
func decodeOnly(_ messages: [[UInt8]]) throws -> Int {
    var events = 0
    for message in messages {
        events += try ProtocolCodec.wire.decode(DeviceTelemetryBatch.self, from: message).events.count
    }
    return events
}

/// Decode + dedupe + aggregate, one delta per polled batch.
func aggregate(_ messages: [[UInt8]]) throws -> (events: Int, rows: Int) {
    var events = 0, rows = 0
    var start = 0
    while start < messages.count {
        let end = min(start + batchSize, messages.count)
        var delta = RollupDelta()
        var seen = Set<DeviceEvent>()
        for index in start..<end {
            let batch = try ProtocolCodec.wire.decode(DeviceTelemetryBatch.self, from: messages[index])
            events += batch.events.count
            Aggregation.addTelemetry(
                batch, isNew: { seen.insert(DeviceEvent(device: batch.deviceId, event: $0.eventId)).inserted }, into: &delta)
            // Each upload also stands for one verdict latency sample (trigger → verdict).
            delta.latency(
                LatencyMetric.triggerToVerdict, minute: EpochMinute.of(batch.receivedAt),
                Dimensions(site: batch.siteId, appVersion: batch.appVersion, deviceModel: batch.deviceModel),
                milliseconds: Int64(200 + index % 3_000))
        }
        rows += delta.counters.count + delta.histograms.values.reduce(0) { $0 + $1.counts.count }
        start = end
    }
    return (events, rows)
}

func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let clock = ContinuousClock()
    var result: T?
    let elapsed = try clock.measure { result = try body() }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (result!, seconds)
}

func rate(_ count: Int, _ seconds: Double) -> String {
    String(format: "%.0f", Double(count) / seconds)
}

do {
    print("TelemetryBenchmark: \(uploads) uploads x \(eventsPerUpload) events, batches of \(batchSize) messages, best of \(rounds) rounds")
    let messages = try makeMessages()
    let bytes = messages.reduce(0) { $0 + $1.count }
    print("messages: \(messages.count), \(bytes / messages.count) bytes each on average")
    var bestDecode = Double.infinity, bestAggregate = Double.infinity
    var events = 0, rows = 0
    for _ in 0..<rounds {
        let (decoded, decodeSeconds) = try measure { try decodeOnly(messages) }
        let (aggregated, aggregateSeconds) = try measure { try aggregate(messages) }
        precondition(decoded == aggregated.events)
        events = decoded
        rows = aggregated.rows
        bestDecode = min(bestDecode, decodeSeconds)
        bestAggregate = min(bestAggregate, aggregateSeconds)
    }
    print("baseline decode only:        \(rate(events, bestDecode)) events/s (\(String(format: "%.3f", bestDecode)) s)")
    print(
        "decode + dedupe + aggregate: \(rate(events, bestAggregate)) events/s (\(String(format: "%.3f", bestAggregate)) s), \(rows) rollup rows"
    )
    print(
        String(
            format: "ratio aggregate / decode-only: %.2f (aggregation overhead %.0f %%)", bestDecode / bestAggregate,
            (bestAggregate / bestDecode - 1) * 100))
    let target = 50_000.0
    let achieved = Double(events) / bestAggregate
    print("target >= 50000 events/s: \(achieved >= target ? "met" : "NOT met")")
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
