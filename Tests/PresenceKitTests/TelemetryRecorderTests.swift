import Testing

@testable import PresenceKit

@Suite("The app's telemetry")
struct TelemetryRecorderTests {
    static func at(_ seconds: Int64) -> Timestamp { Timestamp(millisecondsSinceEpoch: 1_767_571_200_000 + seconds * 1_000) }

    static func checkIn() -> AttendanceEvent {
        AttendanceEvent(
            id: "e", type: .checkIn, idempotencyKey: IdempotencyKey(hex: String(repeating: "a", count: 64)),
            nonce: "n", userId: "u", deviceId: "d", siteId: "S",
            beacon: BeaconIdentity("F7826DA6-4FA2-4E98-8024-BC5B71E0893E", major: 1, minor: 2),
            timestamp: at(0), tStart: at(0), decidedAt: at(0), sessionKey: "s", rssiSeries: [], reason: .rangingConfirmed,
            motion: .init(state: .walking, steps2min: 10), geofence: .init(inside: true, radius: 200), handshake: nil,
            network: .init(online: true))
    }

    @Test func aSearchRunsFromTheScanStartToTheCheckInAndMonitoringAfterItIsNotRanging() throws {
        var recorder = TelemetryRecorder(installId: 0xABC, launchId: 0x12)
        recorder.observe([.startScanning(.continuous)], at: Self.at(0))
        recorder.observe(.beaconRegionEntered, at: Self.at(3))
        recorder.observe(.motionActivity(.walking), at: Self.at(4))
        recorder.observe(
            [.postCheckIn(Self.checkIn()), .persistSnapshot(PresenceSnapshot(session: nil, insideSiteIds: [], savedAt: Self.at(12)))],
            at: Self.at(12))
        recorder.observe([.stopScanning(.continuous)], at: Self.at(600)) // leaving: no second ranging_stop
        #expect(recorder.pending.map(\.name) == ["ranging_start", "region_enter", "motion_query", "ranging_stop"])
        let stop = try #require(recorder.pending.last)
        #expect(stop.value == 12_000 && stop.attributes == ["mode": "continuous"])
        #expect(recorder.pending.map(\.eventId) == ["abc-12-1", "abc-12-2", "abc-12-3", "abc-12-4"])
    }

    @Test func recordsAreStampedLikeTheEventsAndDurationsMeasuredOnSteadyTime() throws {
        var recorder = TelemetryRecorder(installId: 2, launchId: 3)
        recorder.observe([.startScanning(.continuous)], at: Self.at(0))
        // The server's clock reads an hour ahead of the phone's steady clock.
        recorder.observe(.serverClockKnown(offsetMs: 3_600_000, phoneAheadMs: -3_600_000), at: Self.at(5))
        recorder.observe(.beaconRegionEntered, at: Self.at(6))
        recorder.observe([.postCheckIn(Self.checkIn())], at: Self.at(12))
        #expect(recorder.pending.map(\.name) == ["ranging_start", "region_enter", "ranging_stop"])
        // The first, stamped with the phone's clock before the server's was known, is corrected onto it.
        #expect(recorder.pending.map(\.at) == [Self.at(3_600), Self.at(3_606), Self.at(3_612)])
        #expect(recorder.pending.last?.value == 12_000)
        #expect(recorder.clockOffsetMs == 3_600_000)
        // Back on the phone's wall clock (the server's not known in a new process, say).
        recorder.observe(.clockOffsetChanged(offsetMs: 60_000), at: Self.at(13))
        #expect(recorder.clockOffsetMs == 60_000)
    }

    /// A phone restarted with its clock a month behind: what it records before the server's clock is
    /// known moves with a setting of its clock and then onto the server's, so no upload carries a time
    /// the gateway refuses.
    @Test func recordsStampedWithThePhonesClockAreCorrectedLikeTheOutbox() throws {
        let month: Int64 = 30 * 86_400_000
        var recorder = TelemetryRecorder(installId: 2, launchId: 4)
        recorder.observe(.clockOffsetChanged(offsetMs: -month), at: Self.at(0))
        recorder.recordBattery(level: 0.5, at: Self.at(1))
        // The user sets the clock forward by a day, still a month minus a day behind.
        recorder.observe(.clockOffsetChanged(offsetMs: -month + 86_400_000), at: Self.at(2))
        #expect(recorder.pending.first?.at == Self.at(1) + (-month + 86_400_000))
        recorder.observe(.beaconRegionEntered, at: Self.at(3))
        recorder.observe(.serverClockKnown(offsetMs: 0, phoneAheadMs: -month + 86_400_000), at: Self.at(4))
        recorder.observe(.beaconRegionExited, at: Self.at(5))
        #expect(recorder.pending.map(\.at) == [Self.at(1), Self.at(3), Self.at(5)])
        // Once on the server's clock, a later setting of the phone's moves nothing already recorded.
        recorder.observe(.clockOffsetChanged(offsetMs: 3_600_000), at: Self.at(6))
        #expect(recorder.pending.map(\.at) == [Self.at(1), Self.at(3), Self.at(5)])
    }

    @Test("a recorder kept across launches moves nothing at a relaunch, and still corrects the earlier launch's records")
    func aRelaunchIsNotAClockSetting() throws {
        let day: Int64 = 86_400_000
        var recorder = TelemetryRecorder(installId: 2, launchId: 6)
        recorder.observe(.clockOffsetChanged(offsetMs: -20 * day), at: Self.at(0))
        recorder.recordBattery(level: 0.5, at: Self.at(1))
        // The next launch's steady clock starts over: its offset differs, the phone's clock did not move.
        recorder.relaunched(clockOffsetMs: -20 * day + 5_000)
        #expect(recorder.pending.first?.at == Self.at(1) - 20 * day)
        recorder.observe(.serverClockKnown(offsetMs: 0, phoneAheadMs: -20 * day), at: Self.at(3))
        #expect(recorder.pending.first?.at == Self.at(1))
    }

    @Test("after a relaunch that restored an open session, its scan is presence monitoring, not a search")
    func aRestoredSessionsScanIsNotASearch() throws {
        var recorder = TelemetryRecorder(installId: 2, launchId: 5, sessionOpen: true)
        recorder.observe([.startScanning(.continuous)], at: Self.at(0))
        recorder.observe([.postCheckOut(Self.checkIn())], at: Self.at(3_600))
        recorder.observe([.stopScanning(.continuous)], at: Self.at(3_610))
        // The only search is the one after the check-out: 10 s, not the hour of the stay.
        #expect(recorder.pending.map(\.name) == ["ranging_start", "ranging_stop"])
        #expect(recorder.pending.last?.value == 10_000)
    }

    @Test func aScanStoppedWithoutACheckInEndsTheSearchAndACheckOutStartsAnother() throws {
        var recorder = TelemetryRecorder(installId: 1)
        recorder.observe([.startScanning(.ranging)], at: Self.at(0))
        recorder.observe([.stopScanning(.ranging)], at: Self.at(8))
        recorder.observe([.startScanning(.continuous)], at: Self.at(20))
        recorder.observe([.postCheckIn(Self.checkIn())], at: Self.at(25))
        recorder.observe([.postCheckOut(Self.checkIn())], at: Self.at(300))
        let names = recorder.pending.map(\.name)
        #expect(names == ["ranging_start", "ranging_stop", "ranging_start", "ranging_stop", "ranging_start"])
        #expect(recorder.pending.compactMap(\.value) == [8_000, 5_000])
    }

    @Test func attemptsOutboxBatteryAndTheBound() throws {
        var recorder = TelemetryRecorder(installId: 2, capacity: 5)
        for result in [
            DeliveryResult.response(status: 201), .response(status: 503), .timeout, .transportError("offline"), .response(status: 409),
        ] {
            recorder.recordAttempt(result, at: Self.at(1))
        }
        #expect(recorder.pending.map(\.name) == ["api_201", "api_5xx", "api_timeout", "api_409"])
        recorder.recordBattery(level: 1.4, at: Self.at(2))
        recorder.recordOutboxSent(backlog: 3, at: Self.at(3))
        #expect(recorder.pending.count == 5 && recorder.dropped == 1)
        #expect(recorder.pending.first?.name == "api_5xx")
        #expect(recorder.pending.first { $0.name == "battery" }?.value == 1)
        recorder.acknowledge(2)
        #expect(recorder.pending.map(\.name) == ["api_409", "battery", "outbox_sent"])
        recorder.acknowledge(99)
        #expect(recorder.pending.isEmpty)
    }

    @Test func recordIdsOfTwoLaunchesOfOneInstallDiffer() throws {
        var first = TelemetryRecorder(installId: 0xABC)
        var relaunched = TelemetryRecorder(installId: 0xABC)
        first.recordBackgroundTimeout(at: Self.at(0))
        relaunched.recordBackgroundTimeout(at: Self.at(60))
        let ids = [try #require(first.pending.first).eventId, try #require(relaunched.pending.first).eventId]
        #expect(ids[0] != ids[1])
        #expect(ids.allSatisfy { $0.hasPrefix("abc-") && $0.hasSuffix("-1") })
    }

    @Test func acknowledgingByIdKeepsWhatArrivedDuringTheUploadEvenWhenTheBoundDroppedRecords() {
        var recorder = TelemetryRecorder(installId: 3, launchId: 1, capacity: 3)
        for s in 0..<3 { recorder.recordBattery(level: 0.5, at: Self.at(Int64(s))) }
        let uploaded = recorder.pending
        recorder.recordBackgroundTimeout(at: Self.at(10)) // during the upload: the oldest is dropped
        #expect(recorder.dropped == 1)
        recorder.acknowledge(eventIds: uploaded.map(\.eventId))
        #expect(recorder.pending.map(\.name) == ["bg_timeout"])
        recorder.acknowledge(eventIds: ["3-1-99"])
        #expect(recorder.pending.count == 1)
    }
}
