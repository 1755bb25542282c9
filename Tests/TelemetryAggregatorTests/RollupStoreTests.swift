import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// The batch processor on the real local PostgreSQL, each test in a schema of its own.
@Suite("Rollups in PostgreSQL: idempotent, restart-safe, late and duplicated telemetry", .serialized)
struct RollupStoreTests {
    /// A fixture stream over the four topics: 40 check-ins at one site (two of them 6 min late, one
    /// offline), their verdicts, telemetry uploads (one re-uploaded), session changes.
    static func fixture(_ configuration: TelemetryConfiguration, site: String) throws -> MessageLog {
        var log = MessageLog(configuration: configuration)
        let t0 = fixtureNow.addingTimeInterval(-1_800)
        for index in 0..<40 {
            let key = newKey()
            let trigger = t0.addingTimeInterval(Double(index) * 20)
            let delay: TimeInterval = index < 2 ? 360 : 2
            try log.raw(Make.raw(key: key, site: site, trigger: trigger, delay: delay, offline: index == 5))
            if index == 7 { try log.raw(Make.raw(key: key, site: site, trigger: trigger, delay: 30)) } // a gateway retry
            try log.verdict(Make.verdict(key: key, site: site, trigger: trigger, decidedAfter: delay + 0.5, base: t0))
        }
        let upload = Make.telemetry(
            device: "dev-\(site)", site: site, received: fixtureNow,
            events: [
                Make.event("e1", .regionEnter, at: t0), Make.event("e2", .rangingStart, at: t0),
                Make.event("e3", .rangingStop, at: t0.addingTimeInterval(2), value: 1_500),
                Make.event("e4", .api201, at: t0.addingTimeInterval(3)),
            ])
        try log.telemetry(upload)
        try log.session(Make.session(site: site, version: 1, at: t0))
        try log.telemetry(upload) // the device re-uploads the same batch
        try log.session(Make.session(site: site, version: 1, at: t0)) // and a session change is redelivered
        return log
    }

    @Test("hand-computed SLO counts, latency and counters from the fixture stream")
    func fixtureNumbers() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            let log = try Self.fixture(db.configuration, site: site)
            let result = try await db.processor().process(log.messages)
            #expect(result.new == [.rawEvent: 40, .verdict: 40, .telemetryEvent: 4, .sessionChange: 1])
            #expect(result.duplicates == 1 + 4 + 1)

            let counts = try await db.repository.sloCounts(
                filter: MetricsFilter(site: site), windows: [.hour1, .days30], now: fixtureNow, filedBy: .trigger)
            #expect(counts[.hour1] == SLICount(good: 38, total: 40))
            let report = SLOReport(counts: counts)
            // 2 bad of 40 = 5 % error rate = burn 5.
            #expect(abs((report.window(.hour1)?.burnRate ?? 0) - 5) < 1e-9)
            // 30 days: allowed 0.4 bad events, 2 spent: remaining 1 - 2 / 0.4 = -4.
            #expect(abs(report.errorBudget.remaining - -4) < 1e-9)

            let minutes = SLOWindow.hour1.minuteRange(endingAt: fixtureNow)
            let totals = try await db.repository.counters(filter: MetricsFilter(site: site), minutes: minutes, groupBy: nil)[""] ?? [:]
            let histograms =
                try await db.repository.histograms(filter: MetricsFilter(site: site), minutes: minutes, groupBy: nil)[""] ?? [:]
            let summary = MetricsSummary(counters: totals, histograms: histograms)
            #expect(summary.checkInSuccessRate == 1)
            #expect(summary.offlineRate == 0.025)
            #expect(summary.averageRangingMs == 1_500)
            #expect(summary.counts["telemetry.region_enter"] == 1)
            #expect(summary.counts["session.opened"] == 1)
            // Verdict latencies: 38 x 2500 ms, 2 x 360 500 ms. p50 = 2500 ms (2048...4095, width 16: 2496...2511).
            #expect(summary.triggerToVerdict.count == 40)
            #expect(summary.triggerToVerdict.p50Ms == 2_511)
            #expect(summary.triggerToVerdict.p90Ms == 2_511)
            // rank ceil(40 * 0.99) = 40 -> 360 500 ms in 262 144...524 287, width 2048: 360 500 >> 11 = 176 -> 360 448...362 495.
            #expect(summary.triggerToVerdict.p99Ms == 362_495)
            #expect(db.deadLetters.all.isEmpty)
        }
    }

    @Test("replaying everything, and a restart in the middle, change no number")
    func restartInTheMiddle() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            let log = try Self.fixture(db.configuration, site: site)
            let messages = log.messages

            // Run 1: everything in batches of 7.
            let first = db.processor()
            for start in stride(from: 0, to: messages.count, by: 7) {
                try await first.process(Array(messages[start..<min(start + 7, messages.count)]))
            }
            let reference = try await db.snapshot()
            #expect(!reference.isEmpty)

            // The same stream again, in other batch boundaries, by a "restarted" processor: a crash after
            // the commit of batch N but before the broker commit re-reads from the stored offset or earlier.
            let restarted = db.processor()
            try await restarted.process(Array(messages[0..<20]))
            try await restarted.process(Array(messages[13...]))
            try await restarted.process(messages)
            #expect(try await db.snapshot() == reference)

            // The stored offsets are where a new owner seeks: one past the last message of each partition.
            let partitions = [
                db.configuration.topics[.rawEvents], db.configuration.topics[.verdicts], db.configuration.topics[.deviceTelemetry],
                db.configuration.topics[.sessions],
            ]
            .map { TopicPartition(topic: $0, partition: 0) }
            let stored = try await restarted.storedOffsets(for: partitions)
            #expect(stored[TopicPartition(topic: db.configuration.topics[.rawEvents], partition: 0)] == 41)
            #expect(stored[TopicPartition(topic: db.configuration.topics[.verdicts], partition: 0)] == 40)
            #expect(stored[TopicPartition(topic: db.configuration.topics[.deviceTelemetry], partition: 0)] == 2)
        }
    }

    @Test("a restart mid-stream (first half, new processor, second half) equals one pass")
    func halfAndHalf() async throws {
        try await TelemetryDB.run { db in
            let siteA = "site-\(token())"
            let log = try Self.fixture(db.configuration, site: siteA)
            let messages = log.messages
            try await db.processor().process(messages)
            let onePass = try await db.snapshot()
            try await db.client.query(
                "TRUNCATE rollup_minute, latency_minute, seen_telemetry, attendance_events, seen_session_changes, consumer_offsets",
                logger: TelemetryDB.logger)
            let half = messages.count / 2
            try await db.processor().process(Array(messages[..<half]))
            // "crash": the new process re-reads a few messages before the stored offset, then the rest.
            try await db.processor().process(Array(messages[(half - 5)...]))
            #expect(try await db.snapshot() == onePass)
        }
    }

    @Test("late telemetry lands in its own minute; duplicated events and uploads count once; garbage goes to the DLQ")
    func lateAndDuplicated() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            var log = MessageLog(configuration: db.configuration)
            let lateTime = fixtureNow.addingTimeInterval(-2 * 86_400 - 95) // two days late
            let lateMinute = EpochMinute.of(lateTime)
            let current = Make.event("now-1", .bgTimeout, at: fixtureNow.addingTimeInterval(-10))
            let late = Make.event("late-1", .bgTimeout, at: lateTime)
            try log.telemetry(Make.telemetry(device: "d1", site: site, received: fixtureNow, events: [current, late, late]))
            log.garbage()
            // The same event id from another device is another event.
            try log.telemetry(
                Make.telemetry(device: "d2", site: site, received: fixtureNow, events: [Make.event("late-1", .bgTimeout, at: lateTime)]))
            let result = try await db.processor().process(log.messages)
            #expect(result.new[.telemetryEvent] == 3)
            #expect(result.deadLetters == 1)
            #expect(db.deadLetters.all.count == 1)
            #expect(db.deadLetters.all.first?.reason == .decodeFailed)

            // A second upload of the late event a day later (device retry): still once.
            var again = MessageLog(configuration: db.configuration)
            try again.telemetry(Make.telemetry(device: "d1", site: site, received: fixtureNow.addingTimeInterval(86_400), events: [late]))
            #expect(try await db.processor().process(again.messages).new[.telemetryEvent, default: 0] == 0)

            #expect(try await db.counter("telemetry.bg_timeout", site: site, minute: lateMinute) == 2)
            #expect(
                try await db.counter("telemetry.bg_timeout", site: site, minute: EpochMinute.of(fixtureNow.addingTimeInterval(-10))) == 1)
            #expect(try await db.counter("telemetry.bg_timeout", site: site) == 3)
            // The late minute is outside the 1 h window and inside the 30-day one.
            let hour = try await db.repository.counters(
                filter: MetricsFilter(site: site), minutes: SLOWindow.hour1.minuteRange(endingAt: fixtureNow), groupBy: nil)
            #expect(hour[""]?["telemetry.bg_timeout"]?.count == 1)
            let month = try await db.repository.counters(
                filter: MetricsFilter(site: site), minutes: SLOWindow.days30.minuteRange(endingAt: fixtureNow), groupBy: nil)
            #expect(month[""]?["telemetry.bg_timeout"]?.count == 3)
        }
    }

    @Test("value sums past int8 stay at its bound: every batch is stored and the summary reads without trapping")
    func valueSumsSaturate() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            let at = fixtureNow.addingTimeInterval(-30)
            // Values beyond what the gateway accepts (a message from elsewhere): each is held at 10⁹, so
            // 10,000 of them in one minute row sum past int8's 9.2 * 10¹⁸ millionths.
            for round in 0..<2 {
                var log = MessageLog(configuration: db.configuration)
                for upload in 0..<5 {
                    let events = (0..<1_000).map { Make.event("v\(round)-\(upload)-\($0)", .offlineEnqueue, at: at, value: 1e300) }
                    try log.telemetry(Make.telemetry(device: "d1", site: site, received: fixtureNow, events: events))
                    try log.telemetry(
                        Make.telemetry(
                            device: "d1", site: site, received: fixtureNow,
                            events: [Make.event("s\(round)-\(upload)", .outboxSent, at: at, value: 9e18)]))
                }
                #expect(try await db.processor().process(log.messages).new[.telemetryEvent] == 5_005)
            }
            let minutes = SLOWindow.hour1.minuteRange(endingAt: fixtureNow)
            let totals = try await db.repository.counters(filter: MetricsFilter(site: site), minutes: minutes, groupBy: nil)[""] ?? [:]
            let enqueued = try #require(totals["value.offline_enqueue"])
            #expect(enqueued.count == 10_000)
            #expect(enqueued.sumMicros == Int64.max)
            let summary = MetricsSummary(counters: totals, histograms: [:])
            #expect(summary.outboxBacklog.averageReported ?? 0 > 0)
        }
    }

    /// An accepted verdict read before its raw event (triggered ten minutes before the fixture's now), at
    /// a site of its own.
    static func verdictFirst(_ db: TelemetryDB) async throws -> (site: String, key: String, trigger: Date, result: TelemetryBatchResult) {
        let site = "site-\(token())"
        let key = newKey()
        let trigger = fixtureNow.addingTimeInterval(-600)
        var first = MessageLog(configuration: db.configuration)
        try first.verdict(Make.verdict(key: key, site: site, trigger: trigger, decidedAfter: 1, base: trigger))
        return (site, key, trigger, try await db.processor().process(first.messages))
    }

    /// With two aggregators a raw event and its verdict often reach different instances, the verdict
    /// first: it is counted when its raw event is read, under the device's app version and model (it
    /// was counted at once under "unknown", and stayed there).
    @Test("a verdict read before its raw event: counted once, with the raw event's dimensions, when it arrives")
    func verdictBeforeRaw() async throws {
        try await TelemetryDB.run { db in
            let (site, key, trigger, r1) = try await Self.verdictFirst(db)
            #expect(r1.new[.verdict] == 1)
            #expect(try await db.counter("verdict.accepted", site: site) == 0)
            var second = MessageLog(configuration: db.configuration)
            try second.raw(Make.raw(key: key, site: site, trigger: trigger, delay: 0.4))
            try second.verdict(Make.verdict(key: key, site: site, trigger: trigger, decidedAfter: 1, base: trigger, outcome: .duplicate))
            let r2 = try await db.processor().process(second.messages)
            #expect(r2.new[.rawEvent] == 1 && r2.new[.verdict, default: 0] == 0)
            #expect(try await db.counter("slo.events", site: site) == 1)
            #expect(try await db.counter("verdict.accepted", site: site) == 1)
            #expect(try await db.counter("verdict.duplicate", site: site) == 0)
            let byVersion = try await db.repository.counters(
                filter: MetricsFilter(site: site), minutes: SLOWindow.hour1.minuteRange(endingAt: fixtureNow), groupBy: .appVersion)
            #expect(byVersion[Make.version]?["verdict.accepted"]?.count == 1)
            #expect(byVersion[Dimensions.unknown]?["verdict.accepted"] == nil)
        }
    }

    /// A row stored before verdicts waited for their raw event was counted when its verdict was read:
    /// its raw event, read after the upgrade, does not count the verdict a second time.
    @Test("a verdict counted before the upgrade is not counted again by its raw event")
    func aVerdictCountedBeforeTheUpgrade() async throws {
        try await TelemetryDB.run { db in
            let (site, key, trigger, _) = try await Self.verdictFirst(db)
            // As the release before left it (the migration's default for existing rows).
            try await db.client.query(
                "UPDATE attendance_events SET verdict_deferred = false WHERE idempotency_key = \(key)", logger: TelemetryDB.logger)
            var second = MessageLog(configuration: db.configuration)
            try second.raw(Make.raw(key: key, site: site, trigger: trigger, delay: 0.4))
            #expect(try await db.processor().process(second.messages).new[.rawEvent] == 1)
            #expect(try await db.counter("verdict.accepted", site: site) == 0)
            #expect(try await db.counter("slo.events", site: site) == 1)
        }
    }

    @Test("pruning deletes rollups past the retention and keeps the 30-day window")
    func pruning() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            var log = MessageLog(configuration: db.configuration)
            let old = fixtureNow.addingTimeInterval(-40 * 86_400)
            let recent = fixtureNow.addingTimeInterval(-29 * 86_400)
            try log.telemetry(
                Make.telemetry(
                    device: "d1", site: site, received: fixtureNow,
                    events: [
                        Make.event("old", .gattFail, at: old), Make.event("recent", .gattFail, at: recent),
                    ]))
            let processor = db.processor()
            try await processor.process(log.messages)
            #expect(try await db.counter("telemetry.gatt_fail", site: site) == 2)
            try await processor.prune(now: fixtureNow)
            #expect(try await db.counter("telemetry.gatt_fail", site: site) == 1)
            #expect(try await db.counter("telemetry.gatt_fail", site: site, minute: EpochMinute.of(recent)) == 1)
        }
    }

    @Test("groupBy splits the numbers by app version")
    func groupBy() async throws {
        try await TelemetryDB.run { db in
            let site = "site-\(token())"
            var log = MessageLog(configuration: db.configuration)
            let at = fixtureNow.addingTimeInterval(-60)
            try log.telemetry(
                Make.telemetry(
                    device: "d1", site: site, received: fixtureNow, events: [Make.event("1", .regionEnter, at: at)], appVersion: "2.4.0"))
            try log.telemetry(
                Make.telemetry(
                    device: "d2", site: site, received: fixtureNow,
                    events: [Make.event("1", .regionEnter, at: at), Make.event("2", .regionEnter, at: at)], appVersion: "2.5.0"))
            try await db.processor().process(log.messages)
            let grouped = try await db.repository.counters(
                filter: MetricsFilter(site: site), minutes: SLOWindow.minutes5.minuteRange(endingAt: fixtureNow), groupBy: .appVersion)
            #expect(grouped["2.4.0"]?["telemetry.region_enter"]?.count == 1)
            #expect(grouped["2.5.0"]?["telemetry.region_enter"]?.count == 2)
        }
    }
}
