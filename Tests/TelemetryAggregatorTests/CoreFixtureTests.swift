import AttendanceProtocol
import Foundation
import Testing

@testable import TelemetryAggregatorCore

@Suite("LogHistogram: buckets, percentiles, merging")
struct HistogramTests {
    @Test("values below 128 ms are exact; above, buckets are 1/128 of their value wide")
    func bucketLayout() {
        #expect(LogHistogram.bucketIndex(for: 0) == 0)
        #expect(LogHistogram.bucketIndex(for: 127) == 127)
        #expect(LogHistogram.bucketRange(127) == 127...127)
        // 128...255: still exact (width 1).
        #expect(LogHistogram.bucketRange(LogHistogram.bucketIndex(for: 200)) == 200...200)
        // 256...511: width 2.
        #expect(LogHistogram.bucketRange(LogHistogram.bucketIndex(for: 257)) == 256...257)
        // 512...1023: width 4; 1000 sits in 1000...1003 (hand-computed: 1000 >> 2 = 250).
        #expect(LogHistogram.bucketIndex(for: 1000) == 3 * 128 + (250 - 128))
        #expect(LogHistogram.bucketRange(LogHistogram.bucketIndex(for: 1000)) == 1000...1003)
        // 300 000 ms (the SLO threshold): 2^18 = 262 144 <= v < 2^19, width 2^11 = 2048.
        #expect(LogHistogram.bucketRange(LogHistogram.bucketIndex(for: 300_000)) == 299_008...301_055)
        // Consecutive buckets tile the value range without gaps.
        for index in 1..<3_000 {
            #expect(LogHistogram.bucketRange(index).lowerBound == LogHistogram.bucketRange(index - 1).upperBound + 1)
        }
    }

    @Test("every reported value is at most 1/128 above the true value and never below it")
    func relativeError() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let value = UInt64.random(in: 0...10_000_000_000, using: &generator)
            let range = LogHistogram.bucketRange(LogHistogram.bucketIndex(for: value))
            #expect(range.contains(value))
            #expect(Double(range.upperBound - value) <= Double(value) * LogHistogram.maxRelativeError)
        }
    }

    @Test("percentiles of 1...100 ms are the hand-computed ranks")
    func percentilesSmall() {
        var histogram = LogHistogram()
        for value in 1...100 { histogram.record(Int64(value)) }
        #expect(histogram.value(atPermyriad: 5_000) == 50)
        #expect(histogram.value(atPermyriad: 9_000) == 90)
        #expect(histogram.value(atPermyriad: 9_900) == 99)
        // rank ceil(100 * 0.999) = 100.
        #expect(histogram.value(atPermyriad: 9_990) == 100)
        #expect(histogram.value(atPermyriad: 0) == 1)
    }

    @Test("p99.9 of 1000 samples is the 999th value, reported as its bucket's highest equivalent value")
    func percentilesLarge() {
        var histogram = LogHistogram()
        // 998 fast verdicts at 1000 ms, one at 5000 ms, one at 60 000 ms.
        for _ in 0..<998 { histogram.record(1_000) }
        histogram.record(5_000)
        histogram.record(60_000)
        #expect(histogram.totalCount == 1_000)
        #expect(histogram.value(atPermyriad: 5_000) == 1_003)
        #expect(histogram.value(atPermyriad: 9_900) == 1_003)
        // rank 999 = 5000 ms; 4096 <= 5000 < 8192, width 32: 4992...5023.
        #expect(histogram.value(atPermyriad: 9_990) == 5_023)
        // rank 1000 = 60 000 ms; 32768 <= v < 65536, width 256: 59 904...60 159.
        #expect(histogram.value(atPermyriad: 10_000) == 60_159)
        let p = LatencyPercentiles(histogram)
        #expect(p.p50Ms == 1_003 && p.p90Ms == 1_003 && p.p99Ms == 1_003 && p.p999Ms == 5_023)
    }

    @Test("merging is exact and order-free; negative latencies count as 0")
    func merging() {
        var a = LogHistogram(), b = LogHistogram(), all = LogHistogram()
        for value in stride(from: -5, through: 100_000, by: 37) {
            if value % 2 == 0 { a.record(Int64(value)) } else { b.record(Int64(value)) }
            all.record(Int64(value))
        }
        var ab = a
        ab.merge(b)
        var ba = b
        ba.merge(a)
        #expect(ab == all && ba == all)
        #expect(all.value(atPermyriad: 0) == 0)
        #expect(LogHistogram().value(atPermyriad: 5_000) == nil)
    }
}

@Suite("SLO: error budget and multi-window burn-rate alerts at their thresholds")
struct SLOTests {
    let objective = SLOObjective.standard

    @Test("the objective's sentence says a threshold that is not whole minutes in seconds")
    func objectiveSentence() {
        func sentence(_ seconds: Int) -> String {
            SLOReport(counts: [:], objective: SLOObjective(thresholdSeconds: seconds)).objective
        }
        #expect(sentence(300).contains("within 5 minutes of the trigger"))
        #expect(sentence(60).contains("within 1 minute of the trigger"))
        #expect(sentence(90).contains("within 90 seconds of the trigger"))
        #expect(sentence(30).contains("within 30 seconds of the trigger"))
    }

    @Test("burn rate = error rate / 1 %; 14.4 exactly at 144 bad of 1000")
    func burnRates() {
        #expect(SLICount(good: 990, total: 1_000).burnRate(objective) == 1.0)
        #expect(abs(SLICount(good: 856, total: 1_000).burnRate(objective) - 14.4) < 1e-9)
        #expect(SLICount(good: 856, total: 1_000).burnRate(objective, atLeastTenths: 144))
        #expect(!SLICount(good: 857, total: 1_000).burnRate(objective, atLeastTenths: 144))
        #expect(SLICount(good: 94, total: 100).burnRate(objective, atLeastTenths: 60))
        #expect(!SLICount(good: 95, total: 100).burnRate(objective, atLeastTenths: 60))
        #expect(!SLICount(good: 0, total: 0).burnRate(objective, atLeastTenths: 1))
        #expect(SLICount(good: 0, total: 0).compliance == 1)
    }

    @Test("error budget over 30 days: 25 bad of 10 000 leaves 75 %; 150 bad overspends by half")
    func budget() {
        let quarter = ErrorBudget(SLICount(good: 9_975, total: 10_000), objective: objective)
        #expect(quarter.allowedBad == 100)
        #expect(quarter.bad == 25)
        #expect(abs(quarter.remaining - 0.75) < 1e-12)
        #expect(abs(ErrorBudget(SLICount(good: 9_850, total: 10_000), objective: objective).remaining - -0.5) < 1e-12)
        #expect(ErrorBudget(SLICount(good: 0, total: 0), objective: objective).remaining == 1)
    }

    @Test("fast burn pages only when both 1 h and 5 min burn at >= 14.4")
    func fastBurn() {
        func report(hourBad: Int64, fiveMinuteBad: Int64) -> SLOReport {
            SLOReport(counts: [
                .hour1: SLICount(good: 1_000 - hourBad, total: 1_000),
                .minutes5: SLICount(good: 100 - fiveMinuteBad, total: 100),
                .hours6: SLICount(good: 5_000, total: 5_000), .minutes30: SLICount(good: 500, total: 500),
                .days30: SLICount(good: 100_000, total: 100_000),
            ])
        }
        func fast(_ r: SLOReport) -> BurnRateAlertState { r.alerts.first { $0.name == "fast-burn" }! }
        // 1 h: 144/1000 = 14.4; 5 min: 15/100 = 15 -> fires.
        #expect(fast(report(hourBad: 144, fiveMinuteBad: 15)).firing)
        // One bad event fewer in the long window: 14.3 -> quiet.
        #expect(!fast(report(hourBad: 143, fiveMinuteBad: 15)).firing)
        // Long window burning but the short one recovered (14 < 14.4) -> quiet (the alert resets soon).
        #expect(!fast(report(hourBad: 200, fiveMinuteBad: 14)).firing)
        #expect(fast(report(hourBad: 144, fiveMinuteBad: 15)).severity == "page")
    }

    @Test("slow burn tickets when both 6 h and 30 min burn at >= 6")
    func slowBurn() {
        func report(sixHourBad: Int64, thirtyMinuteBad: Int64) -> SLOReport {
            SLOReport(counts: [
                .hours6: SLICount(good: 10_000 - sixHourBad, total: 10_000),
                .minutes30: SLICount(good: 1_000 - thirtyMinuteBad, total: 1_000),
            ])
        }
        func slow(_ r: SLOReport) -> BurnRateAlertState { r.alerts.first { $0.name == "slow-burn" }! }
        #expect(slow(report(sixHourBad: 600, thirtyMinuteBad: 60)).firing)
        #expect(!slow(report(sixHourBad: 599, thirtyMinuteBad: 60)).firing)
        #expect(!slow(report(sixHourBad: 600, thirtyMinuteBad: 59)).firing)
        #expect(slow(report(sixHourBad: 600, thirtyMinuteBad: 60)).longBurnRate == 6)
    }

    @Test("window minute ranges end with the current minute")
    func windows() {
        let now = Date(timeIntervalSince1970: 600 * 60 + 30)
        #expect(SLOWindow.minutes5.minuteRange(endingAt: now) == 596...600)
        #expect(SLOWindow.days30.minuteRange(endingAt: now).count == 43_200)
    }
}

@Suite("Aggregation: pure rollup math")
struct AggregationTests {
    let received = Date(timeIntervalSince1970: 1_795_170_630)

    @Test("late telemetry lands in the minute it happened; a device clock ahead is clamped to the receipt")
    func lateTelemetryMinute() {
        let late = received.addingTimeInterval(-3 * 86_400 - 17)
        let future = received.addingTimeInterval(3_600)
        let batch = DeviceTelemetryBatch(
            batchId: "b", deviceId: "d", siteId: "s", appVersion: "1", deviceModel: "m", receivedAt: received,
            events: [
                TelemetryEvent(eventId: "1", name: .regionEnter, at: late), TelemetryEvent(eventId: "2", name: .regionExit, at: future),
            ])
        var delta = RollupDelta()
        Aggregation.addTelemetry(batch, isNew: { _ in true }, into: &delta)
        let dims = Dimensions(site: "s", appVersion: "1", deviceModel: "m")
        #expect(delta.counters[RollupKey(minute: EpochMinute.of(late), dimensions: dims, metric: "telemetry.region_enter")]?.count == 1)
        #expect(delta.counters[RollupKey(minute: EpochMinute.of(received), dimensions: dims, metric: "telemetry.region_exit")]?.count == 1)
    }

    @Test("unknown dimensions are 'unknown'; long values are cut")
    func dimensions() {
        let d = Dimensions(site: nil, appVersion: "  ", deviceModel: String(repeating: "x", count: Dimensions.maxLength + 36))
        #expect(d.site == "unknown" && d.appVersion == "unknown" && d.deviceModel.count == Dimensions.maxLength)
    }

    @Test("summary: success rate, ranging mean, battery %/h, bg_timeout and offline rates, backlog, by hand")
    func summary() {
        let t0 = received.addingTimeInterval(-7_200)
        var delta = RollupDelta()
        let events: [TelemetryEvent] = [
            .init(eventId: "r1", name: .rangingStart, at: t0),
            .init(eventId: "r2", name: .rangingStop, at: t0, value: 1_200),
            .init(eventId: "r3", name: .rangingStart, at: t0),
            .init(eventId: "r4", name: .rangingStop, at: t0, value: 1_800),
            .init(eventId: "r5", name: .rangingStart, at: t0),
            .init(eventId: "r6", name: .rangingStart, at: t0),
            .init(eventId: "t1", name: .bgTimeout, at: t0),
            // 0.80 -> 0.78 over one hour, then charging 0.78 -> 0.90 (ignored), then 0.90 -> 0.89 over 30 min.
            .init(eventId: "b1", name: .battery, at: t0, value: 0.80),
            .init(eventId: "b2", name: .battery, at: t0.addingTimeInterval(3_600), value: 0.78),
            .init(eventId: "b3", name: .battery, at: t0.addingTimeInterval(4_000), value: 0.90),
            .init(eventId: "b4", name: .battery, at: t0.addingTimeInterval(5_800), value: 0.89),
            .init(eventId: "o1", name: .offlineEnqueue, at: t0, value: 3),
            .init(eventId: "o2", name: .offlineEnqueue, at: t0, value: 4),
            .init(eventId: "o3", name: .outboxSent, at: t0, value: 2),
            .init(eventId: "a1", name: .api201, at: t0), .init(eventId: "a2", name: .api201, at: t0),
            .init(eventId: "a3", name: .api200, at: t0), .init(eventId: "a4", name: .api409, at: t0),
        ]
        Aggregation.addTelemetry(
            DeviceTelemetryBatch(batchId: "b", deviceId: "d", appVersion: "1", deviceModel: "m", receivedAt: received, events: events),
            isNew: { _ in true }, into: &delta)
        let dims = Dimensions(site: "s", appVersion: "1", deviceModel: "m")
        for (index, outcome) in [VerdictOutcome.accepted, .accepted, .accepted, .rejected, .duplicate].enumerated() {
            let verdict = AttendanceVerdict(
                requestId: "r", idempotencyKey: "k\(index)", userId: "u", deviceId: "d", outcome: outcome, eventTime: t0,
                decidedAt: t0.addingTimeInterval(Double(index + 1)), gatewayInstance: "g")
            Aggregation.addVerdict(verdict, trigger: nil, dimensions: dims, into: &delta)
        }
        for index in 0..<4 {
            let facts = RawEventFacts(
                idempotencyKey: "k\(index)", triggerAt: t0, receivedAt: t0.addingTimeInterval(index == 3 ? 301 : 300), dimensions: dims,
                queuedOffline: index == 3, eventType: "checkin")
            Aggregation.addRawEvent(facts, objective: .standard, into: &delta)
        }
        var counters: [String: CounterCell] = [:]
        for (key, cell) in delta.counters { counters[key.metric, default: CounterCell()].add(cell) }
        var histograms: [String: LogHistogram] = [:]
        for (key, histogram) in delta.histograms { histograms[key.metric, default: LogHistogram()].merge(histogram) }
        let summary = MetricsSummary(counters: counters, histograms: histograms)

        #expect(summary.checkInSuccessRate == 0.75) // 3 accepted / (3 + 1 rejected); duplicate left out
        #expect(summary.deviceCheckInSuccessRate == 0.75) // (2 + 1) / (2 + 1 + 1)
        #expect(summary.averageRangingMs == 1_500) // (1200 + 1800) / 2
        #expect(summary.bgTimeoutRate == 0.25) // 1 / 4 ranging starts
        // (2 + 1) points over (1 h + 0.5 h) = 2 %/h.
        #expect(abs((summary.batteryImpactPercentPerHour ?? 0) - 2) < 1e-9)
        #expect(summary.outboxBacklog.averageReported == 3) // (3 + 4 + 2) / 3
        #expect(summary.outboxBacklog.netEnqueued == 1)
        #expect(summary.offlineRate == 0.25)
        #expect(summary.counts["slo.events"] == 4 && summary.counts["slo.good"] == 3) // 300 s is good, 301 s is not
        #expect(summary.triggerToVerdict.count == 5)
        #expect(summary.triggerToVerdict.p50Ms == 3_007) // rank 3 = 3000 ms in 2048...4095, width 16: 2992...3007
    }
}
