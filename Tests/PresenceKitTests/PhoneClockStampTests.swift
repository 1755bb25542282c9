import Foundation
import Testing

@testable import PresenceKit

/// Until an answer has told the device the server's clock it stamps with the phone's own clock and
/// marks those stamps; `.serverClockKnown` moves them onto the server's clock, in the machine and in
/// the outbox, and the drainer never sends a marked entry, so that a check-in decided offline on a
/// wrong clock is neither refused nor recorded at the wrong time.
@Suite("Stamps made on the phone's clock")
struct PhoneClockStampTests {
    static let hour: Int64 = 3_600_000
    static let day: Int64 = 86_400_000
    static let allMarks: [AttendanceEvent.StampedTime] = [.timestamp, .tStart, .decidedAt]

    /// A check-in decided on the phone's clock (an hour fast, say), with its outbox in a temporary directory.
    static func withCheckInOnThePhonesClock(_ body: (inout DeviceHarness, Outbox, AttendanceEvent) throws -> Void) throws {
        try withTempDir { dir in
            let box = try Outbox(path: dir + "/outbox.wal")
            var d = try WallClockTests.checkedIn(outbox: box)
            try body(&d, box, try #require(d.checkIns.first))
        }
    }

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
        #expect(checkIn.phoneClock == Self.allMarks)
        #expect(d.machine.openSession?.phoneClockStart == true && d.machine.openSession?.phoneClockLastPresent == true)
        try d.run(seconds: 60) { _ in -62 }

        let fx = try d.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(fx.first == .correctPhoneClockStamps(phoneAheadMs: Self.hour))
        let saved = try #require(Self.snapshot(in: fx)?.session)
        #expect(saved.tStart == checkIn.tStart - Self.hour)
        #expect(saved.phoneClockStart == nil && saved.phoneClockLastPresent == nil)
        #expect(d.machine.stampsWithServerClock)

        // A moved estimate: nothing is marked any more; what is stamped next takes it.
        let again = try d.send(.serverClockKnown(offsetMs: -Self.hour + 800, phoneAheadMs: Self.hour - 800))
        #expect(again == [.correctPhoneClockStamps(phoneAheadMs: Self.hour - 800)])
        let lastSeen = d.now
        try d.run(seconds: 400) { _ in nil }
        let out = try #require(d.checkOuts.first)
        #expect(out.phoneClock == nil)
        #expect(out.timestamp == lastSeen - Self.hour + 800)
        #expect(out.tStart == checkIn.tStart - Self.hour && out.sessionKey == checkIn.sessionKey)
    }

    @Test("the phone's clock set before the first answer: marked stamps move with it, and one correction fits them all")
    func phoneClockSetBeforeTheAnswer() throws {
        // A phone reset to 20 days ago (a flat battery) checks in offline; then the network's time
        // service sets its clock right, and only then is the launch request answered.
        try Self.withCheckInOnThePhonesClock { d, box, checkIn in
            let fx = try d.send(.clockOffsetChanged(offsetMs: 20 * Self.day))
            let epoch = PresenceStateMachine.epochText(d.machine.clockEpoch)
            #expect(fx.first == .phoneClockSet(byMs: 20 * Self.day, epoch: epoch))
            #expect(checkIn.phoneClockEpoch == epoch)
            #expect(Self.snapshot(in: fx)?.session?.tStart == checkIn.tStart + 20 * Self.day)
            let moved = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(moved.timestamp == checkIn.timestamp + 20 * Self.day && moved.phoneClock == Self.allMarks)
            #expect(box.first()?.stampedWithPhoneClock == true)

            // The phone's clock is now right: the correction is nothing, and the times are the server's.
            try d.send(.serverClockKnown(offsetMs: 20 * Self.day, phoneAheadMs: 0))
            let corrected = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(corrected.timestamp == checkIn.timestamp + 20 * Self.day && corrected.phoneClock == nil)
            #expect(d.machine.openSession?.tStart == checkIn.tStart + 20 * Self.day)
        }
    }

    @Test("the outbox moves its marked entries, keeps their keys, and leaves the server's stamps alone")
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
            #expect(entries.allSatisfy { !$0.stampedWithPhoneClock } && !box.hasPhoneClockStamps)
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

    @Test("the drainer holds a marked entry until it is corrected, then sends it")
    func drainerHoldsMarkedEntries() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("presencekit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let box = try Outbox(path: dir + "/outbox.wal")
        var d = try WallClockTests.checkedIn(outbox: box)
        let clock = ManualClock(d.now)
        let drainer = OutboxDrainer(outbox: box, clock: clock, sleep: { ms in clock.advance(by: ms) })
        var random = SplitMix64(seed: 1)
        var sent: [AttendanceEvent] = []
        let held = try await drainer.drain(deadline: nil, random: &random) { _, payload in
            if let event = try? PresenceCoding.decodeEvent(payload) { sent.append(event) }
            return .response(status: 201)
        }
        #expect(held.stop == .awaitingServerClock && held.attempts == 0 && box.count == 1)

        try d.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        let report = try await drainer.drain(deadline: nil, random: &random) { _, payload in
            if let event = try? PresenceCoding.decodeEvent(payload) { sent.append(event) }
            return .response(status: 201)
        }
        #expect(report.stop == .empty && box.isEmpty)
        #expect(sent.map(\.timestamp) == d.checkIns.map { $0.timestamp - Self.hour })
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
        var relaunched = try DeviceHarness(
            config: WallClockTests.config, clock: ManualClock(offline.now + 60_000), restoring: phoneSnapshot)
        try relaunched.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(relaunched.machine.openSession?.tStart == phoneCheckIn.tStart - Self.hour)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        #expect(out.tStart == phoneCheckIn.tStart - Self.hour && out.phoneClock == nil)
        #expect(out.timestamp == (try #require(phoneSnapshot.session)).lastPresentAt - Self.hour)

        // Checked in by a process that knew the server's clock: a relaunch that learns it again moves nothing.
        let serverSnapshot = try Self.serverClockSnapshot()
        let saved = try #require(serverSnapshot.session)
        var again = try DeviceHarness(config: WallClockTests.config, clock: ManualClock(World.start + Self.hour), restoring: serverSnapshot)
        let fx = try again.send(.serverClockKnown(offsetMs: -Self.hour, phoneAheadMs: Self.hour))
        #expect(fx == [.correctPhoneClockStamps(phoneAheadMs: Self.hour)])
        #expect(again.machine.openSession == saved)
    }

    @Test("a session restored on the server's clock by a process without an answer marks only what it stamps itself")
    func mixedClocksAfterARelaunch() throws {
        // The phone is 20 days slow. The first process knew the server's clock; the relaunched one has no
        // answer yet and ends the session, dated by the restored presence.
        let serverSnapshot = try Self.serverClockSnapshot()
        let saved = try #require(serverSnapshot.session)
        var relaunched = try DeviceHarness(
            config: WallClockTests.config, clock: ManualClock(World.start + Self.hour), restoring: serverSnapshot)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        #expect(out.timestamp == saved.lastPresentAt && out.tStart == saved.tStart)
        #expect(out.phoneClock == [.decidedAt])

        // Corrected once the server's clock is known: only the decision time moves.
        try withTempDir { dir in
            let box = try Outbox(path: dir + "/outbox.wal")
            try box.store([.postCheckOut(out)])
            try box.store([.correctPhoneClockStamps(phoneAheadMs: -20 * Self.day)])
            let stored = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(stored.timestamp == out.timestamp && stored.tStart == out.tStart)
            #expect(stored.decidedAt == out.decidedAt + 20 * Self.day && stored.phoneClock == nil)
        }
    }

    @Test("a setting of the phone's clock moves only what this process stamped; a restored start keeps its stamp")
    func settingMovesOnlyThisProcesssStamps() throws {
        // The first process stamped a check-in on the phone's clock and was ended before any answer.
        try Self.withCheckInOnThePhonesClock { offline, box, checkIn in
            let snapshot = try #require(Self.snapshot(in: try offline.send(.appTerminated(forceQuit: false))))
            // The next process (another epoch) sees the phone's clock set a day forward.
            var relaunched = try DeviceHarness(
                config: WallClockTests.config, seed: 43, clock: ManualClock(offline.now + 60_000), outbox: box, restoring: snapshot)
            #expect(relaunched.machine.clockEpoch != offline.machine.clockEpoch)
            let fx = try relaunched.send(.clockOffsetChanged(offsetMs: Self.day))
            #expect(fx == [.phoneClockSet(byMs: Self.day, epoch: PresenceStateMachine.epochText(relaunched.machine.clockEpoch))])
            #expect(relaunched.machine.openSession?.tStart == checkIn.tStart)
            let stored = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(stored.timestamp == checkIn.timestamp && stored.phoneClock != nil)
            // A setting within a reading's jitter moves nothing.
            #expect(try relaunched.send(.clockOffsetChanged(offsetMs: Self.day + 2)).isEmpty)
        }
    }

    @Test("an event dated by an earlier process's phone-clock time names no epoch: corrected, never moved")
    func earlierProcesssTimeIsNeverMoved() throws {
        try Self.withCheckInOnThePhonesClock { offline, box, checkIn in
            try offline.run(seconds: 30) { _ in -62 }
            let snapshot = try #require(Self.snapshot(in: try offline.send(.appTerminated(forceQuit: false))))
            let saved = try #require(snapshot.session)
            // The next process never hears the site again: the check-out is dated by the restored presence.
            var relaunched = try DeviceHarness(
                config: WallClockTests.config, seed: 43, clock: ManualClock(offline.now + 60_000), restoring: snapshot)
            try relaunched.send(.appLaunched)
            try relaunched.run(seconds: 400) { _ in nil }
            let out = try #require(relaunched.checkOuts.first)
            #expect(out.timestamp == saved.lastPresentAt && out.tStart == checkIn.tStart)
            #expect(out.phoneClock == [.timestamp, .tStart] && out.phoneClockEpoch == nil)
            let epoch = PresenceStateMachine.epochText(relaunched.machine.clockEpoch)
            try box.store([.postCheckOut(out), .phoneClockSet(byMs: Self.day, epoch: epoch)])
            let entry = try #require(box.entries().last)
            #expect(try PresenceCoding.decodeEvent(try box.payload(of: entry.id)).timestamp == out.timestamp)
            try box.store([.correctPhoneClockStamps(phoneAheadMs: Self.hour)])
            let corrected = try PresenceCoding.decodeEvent(try box.payload(of: entry.id))
            #expect(corrected.timestamp == out.timestamp - Self.hour && corrected.tStart == out.tStart - Self.hour)
            #expect(corrected.decidedAt == out.decidedAt && corrected.phoneClock == nil)
        }
    }

    @Test("a session restored on the server's clock and left through the geofence is checked out at the phone's time, marked")
    func restoredServerStartCheckedOutOnThePhonesClock() throws {
        // The phone is 20 days slow; the process that checked in knew the server's clock; the relaunched
        // one has no answer when the person leaves.
        let serverSnapshot = try Self.serverClockSnapshot()
        let saved = try #require(serverSnapshot.session)
        var relaunched = try DeviceHarness(
            config: WallClockTests.config, seed: 43, clock: ManualClock(World.start + Self.hour), restoring: serverSnapshot)
        try relaunched.send(.appLaunched)
        try relaunched.run(seconds: 30) { _ in nil }
        let leftAt = relaunched.now
        try relaunched.send(.geofenceExited(siteId: "S_HQ"))
        try relaunched.run(seconds: 400) { _ in nil }
        let out = try #require(relaunched.checkOuts.first)
        // Its own time on the phone's clock (not the restored start on the server's, 20 days on).
        #expect(out.phoneClock == [.timestamp, .decidedAt] && out.tStart == saved.tStart)
        #expect(out.timestamp >= leftAt && out.timestamp < leftAt + 400_000)
        // Corrected, it lies after the start, on the server's clock.
        try withTempDir { dir in
            let box = try Outbox(path: dir + "/outbox.wal")
            try box.store([.postCheckOut(out), .correctPhoneClockStamps(phoneAheadMs: -20 * Self.day)])
            let stored = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(stored.timestamp == out.timestamp + 20 * Self.day && stored.timestamp > saved.tStart)
        }
    }

    @Test("back on the phone's clock, stamps are marked again and the next answer corrects them")
    func backOnThePhonesClock() throws {
        var d = try DeviceHarness(config: WallClockTests.config)
        try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: 0))
        #expect(try d.send(.clockOffsetChanged(offsetMs: 2 * Self.hour)).isEmpty)
        #expect(!d.machine.stampsWithServerClock)
        try d.arrive()
        try d.run(seconds: 5) { _ in -60 }
        #expect(d.checkIns.first?.phoneClock == Self.allMarks)
        let fx = try d.send(.serverClockKnown(offsetMs: 0, phoneAheadMs: 2 * Self.hour))
        #expect(fx.first == .correctPhoneClockStamps(phoneAheadMs: 2 * Self.hour))
        #expect(d.machine.openSession?.tStart == d.checkIns.first.map { $0.tStart - 2 * Self.hour })
    }

    /// A process that knew the server's clock (20 days ahead of the phone's) checks in, and is ended.
    static func serverClockSnapshot() throws -> PresenceSnapshot {
        var online = try DeviceHarness(config: WallClockTests.config)
        try online.send(.serverClockKnown(offsetMs: 20 * Self.day, phoneAheadMs: -20 * Self.day))
        try online.arrive()
        try online.run(seconds: 5) { _ in -60 }
        #expect(online.checkIns.first?.phoneClock == nil)
        try online.run(seconds: 30) { _ in -62 }
        let snapshot = try #require(Self.snapshot(in: try online.send(.appTerminated(forceQuit: false))))
        #expect(snapshot.session?.phoneClockStart == nil && snapshot.session?.phoneClockLastPresent == nil)
        return snapshot
    }
}
