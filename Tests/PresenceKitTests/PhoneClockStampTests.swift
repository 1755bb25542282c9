import Foundation
import Testing

@testable import PresenceKit

/// Until an answer has told the device the server's clock it stamps with the phone's own clock and
/// marks those stamps; the first `.serverClockKnown` moves them onto the server's clock, in the
/// machine and in the outbox, so that a check-in decided offline on a wrong clock is neither refused
/// nor recorded at the wrong time.
@Suite("Stamps made on the phone's clock")
struct PhoneClockStampTests {
    static let config = WallClockTests.config
    static let hour: Int64 = 3_600_000

    static func snapshot(in effects: [PresenceEffect]) -> PresenceSnapshot? {
        effects.reversed().lazy.compactMap { effect -> PresenceSnapshot? in
            if case .persistSnapshot(let s) = effect { return s } else { return nil }
        }.first
    }

    @Test("a check-in decided before any answer moves with its session; the check-out carries the server's time")
    func checkInCorrected() throws {
        // The phone reads an hour fast; its steady clock starts at that reading (offset 0).
        var d = try WallClockTests.checkedIn()
        let checkIn = try #require(d.checkIns.first)
        #expect(checkIn.phoneClock == true)
        #expect(d.machine.openSession?.phoneClockStart == true && d.machine.openSession?.phoneClockLastPresent == true)
        try d.run(seconds: 60) { _ in -62 }

        let fx = try d.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(fx.contains(.correctPhoneClockStamps(phoneAheadMs: Self.hour)))
        let saved = try #require(Self.snapshot(in: fx)?.session)
        #expect(saved.tStart == checkIn.tStart - Self.hour)
        #expect(saved.phoneClockStart == nil && saved.phoneClockLastPresent == nil)
        #expect(d.machine.stampsWithServerClock)

        // Once: a moved estimate changes only what is stamped next.
        #expect(try d.send(.serverClockKnown(offsetMs: -Self.hour + 800, phoneAheadMs: Self.hour - 800)).isEmpty)
        let lastSeen = d.now
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.phoneClock == nil)
        #expect(out.timestamp == lastSeen - Self.hour + 800)
        #expect(out.tStart == checkIn.tStart - Self.hour && out.sessionKey == checkIn.sessionKey)
    }

    @Test("without the correction the session's later events are held at the fast phone's start")
    func uncorrectedStartHoldsLaterEvents() throws {
        // What `.clockOffsetChanged` alone does with the server's offset: the check-out may not be
        // stamped before its session's start, an hour ahead, which the gateway refuses.
        var d = try WallClockTests.checkedIn()
        let checkIn = try #require(d.checkIns.first)
        try d.send(.clockOffsetChanged(offsetMs: -Self.hour))
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.timestamp == checkIn.tStart && out.phoneClock == true)
    }

    @Test("the outbox moves its marked entries once, keeps their keys, and leaves the server's stamps alone")
    func outboxCorrected() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            var d = try WallClockTests.checkedIn(outbox: try Outbox(path: path))
            let checkIn = try #require(d.checkIns.first)
            let box = try #require(d.outbox)
            #expect(box.entries().map(\.stampedWithPhoneClock) == [true])

            try d.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
            try d.run(seconds: 400) { _ in nil }
            let entries = box.entries()
            #expect(entries.allSatisfy { !$0.stampedWithPhoneClock })
            let stored = try entries.map { try PresenceCoding.decodeEvent(try box.payload(of: $0.id)) }
            let corrected = try #require(stored.first)
            let checkOut = try #require(stored.last)
            try #require(stored.count >= 2)
            #expect(corrected.idempotencyKey == checkIn.idempotencyKey && corrected.id == checkIn.id)
            #expect(corrected.timestamp == checkIn.timestamp - Self.hour && corrected.tStart == checkIn.tStart - Self.hour)
            #expect(corrected.decidedAt == checkIn.decidedAt - Self.hour && corrected.phoneClock == nil)
            // The check-out was stamped with the server's clock: untouched, and consistent with its check-in.
            #expect(checkOut == d.checkOuts.first && checkOut.tStart == corrected.tStart)
            #expect(try box.correctPhoneClockStamps(phoneAheadMs: Self.hour) == 0)
            box.close()
            let reopened = try Outbox(path: path)
            #expect(try PresenceCoding.decodeEvent(try reopened.payload(of: entries[0].id)) == corrected)
        }
    }

    @Test("a relaunch corrects a session restored on the phone's clock and keeps one restored on the server's")
    func restoredSessions() throws {
        // Checked in offline on a phone an hour fast, then the app is ended before any answer.
        var offline = try WallClockTests.checkedIn()
        let phoneCheckIn = try #require(offline.checkIns.first)
        try offline.run(seconds: 30) { _ in -62 }
        let phoneSnapshot = try #require(Self.snapshot(in: try offline.send(.appTerminated(forceQuit: false))))
        #expect(phoneSnapshot.session?.phoneClockStart == true)

        // The relaunched process learns the server's clock at launch and is never near the gate again.
        var relaunched = try DeviceHarness(config: Self.config, clock: ManualClock(offline.now + 60_000), restoring: phoneSnapshot)
        try relaunched.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(relaunched.machine.openSession?.tStart == phoneCheckIn.tStart - Self.hour)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        #expect(out.tStart == phoneCheckIn.tStart - Self.hour && out.phoneClock == nil)
        #expect(out.timestamp == (try #require(phoneSnapshot.session)).lastPresentAt - Self.hour)

        // Checked in by a process that knew the server's clock: a relaunch that learns it again moves nothing.
        var online = try DeviceHarness(config: Self.config)
        try online.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        try online.arrive()
        try online.run(seconds: 5) { _ in -60 }
        let serverCheckIn = try #require(online.checkIns.first)
        #expect(serverCheckIn.phoneClock == nil)
        let serverSnapshot = try #require(Self.snapshot(in: try online.send(.appTerminated(forceQuit: false))))
        let saved = try #require(serverSnapshot.session)
        #expect(saved.phoneClockStart == nil && saved.phoneClockLastPresent == nil)
        var again = try DeviceHarness(config: Self.config, clock: ManualClock(online.now + 60_000), restoring: serverSnapshot)
        let fx = try again.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(fx == [.correctPhoneClockStamps(phoneAheadMs: Self.hour)])
        #expect(again.machine.openSession == saved)
    }

    @Test("back on the phone's clock, stamps are marked again and the next answer corrects them")
    func backOnThePhonesClock() throws {
        var d = try DeviceHarness(config: Self.config)
        try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: 0))
        try d.send(.clockOffsetChanged(offsetMs: 2 * Self.hour))
        #expect(!d.machine.stampsWithServerClock)
        try d.arrive()
        try d.run(seconds: 5) { _ in -60 }
        #expect(d.checkIns.first?.phoneClock == true)
        let fx = try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: 2 * Self.hour))
        #expect(fx.contains(.correctPhoneClockStamps(phoneAheadMs: 2 * Self.hour)))
        #expect(d.machine.openSession?.tStart == d.checkIns.first.map { $0.tStart - 2 * Self.hour })
    }
}
