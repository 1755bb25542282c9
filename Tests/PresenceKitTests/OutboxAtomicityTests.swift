import Foundation
import Testing

@testable import PresenceKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A decision is never in the machine without its post on disk: one `handle` call's posts and
/// snapshots are stored all or nothing, and a host that stores through the agent keeps the machine as
/// it was when the outbox cannot store (a full disk).
@Suite("Outbox: one decision stored all or nothing")
struct OutboxAtomicityTests {
    /// A check-in decided by a harness, to store by hand.
    static func decidedCheckIn() throws -> (AttendanceEvent, PresenceSnapshot) {
        var d = try DeviceHarness(config: World.config { $0.flags.continuousScan = true })
        try d.arrive()
        try d.run(seconds: 8) { _ in -62 }
        let checkIn = try #require(d.checkIns.first)
        return (checkIn, d.machine.snapshot(at: d.now))
    }

    @Test func aBatchWithAPostTooLargeStoresNothingOfIt() throws {
        try withTempDir { dir in
            let path = dir + "/o.wal"
            let box = try Outbox(path: path)
            let (checkIn, snapshot) = try Self.decidedCheckIn()
            var huge = checkIn
            huge.rssiSeries = Array(repeating: -70, count: 30_000)
            let error = #expect(throws: OutboxError.self) {
                try box.store([.postCheckIn(checkIn), .persistSnapshot(snapshot), .postHeartbeat(huge), .persistSnapshot(snapshot)])
            }
            let tooLarge = if case .payloadTooLarge? = error { true } else { false }
            #expect(tooLarge, "expected payloadTooLarge, got \(String(describing: error))")
            #expect(box.count == 0 && box.checkpoint == nil)
            box.close()
            let reopened = try Outbox(path: path)
            #expect(reopened.count == 0 && reopened.checkpoint == nil && reopened.recovery.truncatedBytes == 0)
        }
    }

    @Test func evictionsABatchNeedsArePartOfItsWriteAndAFullOutboxTakesNothing() throws {
        try withTempDir { dir in
            let path = dir + "/o.wal"
            let box = try Outbox(path: path, options: OutboxOptions(maxLiveEntries: 3))
            try box.append([1], evictable: true)
            try box.append([2], evictable: true)
            try box.append([3])
            // Two events into a full outbox: both heartbeats go, in the same write.
            let stored = try box.write([
                .event([4], kind: 0, evictable: false, stampedWithPhoneClock: false, checkpoint: nil),
                .event([5], kind: 0, evictable: false, stampedWithPhoneClock: false, checkpoint: [9]),
            ])
            #expect(stored.count == 2)
            #expect(try box.entries().map { try box.payload(of: $0.id) } == [[3], [4], [5]])
            // Nothing left to evict: the batch is refused whole, the checkpoint unchanged.
            #expect(throws: OutboxError.full(limit: 3)) {
                try box.write([.checkpoint([8]), .event([6], kind: 0, evictable: false, stampedWithPhoneClock: false, checkpoint: nil)])
            }
            #expect(box.count == 3 && box.checkpoint == [9])
            box.close()
            let reopened = try Outbox(path: path)
            #expect(try reopened.entries().map { try reopened.payload(of: $0.id) } == [[3], [4], [5]])
            #expect(reopened.checkpoint == [9])
        }
    }

    /// A batch with a checkpoint of its own may compact the file, which moves every entry: the entries it
    /// answers are the ones the outbox now holds.
    @Test func theEntriesABatchAnswersAreTheOnesItHoldsAfterACompaction() throws {
        try withTempDir { dir in
            let box = try Outbox(path: dir + "/o.wal", options: OutboxOptions(compactionMinDeadBytes: 64))
            var compactions = 0
            for i in 0..<40 {
                let sizeBefore = box.fileSize
                // Each batch's checkpoint makes the one before it dead bytes: now and then a compaction runs.
                let stored = try box.write([
                    .event([UInt8(i)], kind: 1, evictable: false, stampedWithPhoneClock: false, checkpoint: nil),
                    .checkpoint(Array(repeating: UInt8(i), count: 300)),
                ])
                if box.fileSize < sizeBefore { compactions += 1 }
                let held = box.entries()
                #expect(stored.allSatisfy { held.contains($0) }, "batch \(i)")
                #expect(try box.payload(of: try #require(stored.first).id) == [UInt8(i)])
            }
            #expect(compactions > 0, "no compaction ran")
        }
    }

    /// A post and a clock correction in one call, the correction's compaction refused by the disk: none
    /// of the call is stored, so the host, which keeps its machine as it was, stores the post once when
    /// it repeats the call. Before, the post was written first and then stored a second time, with
    /// another idempotency key, by the repeat.
    @Test func aRefusedClockCorrectionStoresNoneOfItsCall() throws {
        try withTempDir { dir in
            let path = dir + "/o.wal"
            let disk = FailingDirectorySync(errno: ENOSPC)
            let box = try disk.outbox(path: path)
            var d = try DeviceHarness(config: WallClockTests.config)
            try d.arrive()
            try d.run(seconds: 400) { _ in -60 }
            let checkIn = try #require(d.checkIns.first)
            let heartbeat = try #require(d.heartbeats.first)
            #expect(checkIn.phoneClock != nil && heartbeat.phoneClock != nil)
            try box.store([.postCheckIn(checkIn)])
            let call: [PresenceEffect] = [.postHeartbeat(heartbeat), .correctPhoneClockStamps(phoneAheadMs: 60_000)]
            disk.failing = true
            #expect(throws: OutboxError.io(operation: "fsync", path: path, errno: ENOSPC)) { try box.store(call) }
            #expect(box.count == 1)
            disk.failing = false
            try box.store(call)
            let stored = try box.entries().map { try PresenceCoding.decodeEvent(box.payload(of: $0.id)) }
            #expect(stored.map(\.type) == [.checkIn, .heartbeat])
            #expect(stored.allSatisfy { $0.phoneClock == nil })
            #expect(stored.last?.timestamp == heartbeat.timestamp - 60_000)
        }
    }

    /// The disk refuses every durable write for a while (here: a directory sync that fails after a
    /// compaction, which fails every fsynced write until it succeeds). The device arrives meanwhile:
    /// its check-in cannot be stored, so the machine does not take it, and once the disk takes writes
    /// again the next readings decide it again and it is stored. Before, the machine went on checked in
    /// with nothing on disk, and the check-in was never sent.
    @Test func aCheckInTheDiskRefusedIsDecidedAgainNotLost() throws {
        try withTempDir { dir in
            let path = dir + "/o.wal"
            let disk = FailingDirectorySync(errno: ENOSPC)
            let box = try disk.outbox(path: path)
            var d = try DeviceHarness(config: World.config { $0.flags.continuousScan = true }, outbox: box)
            try d.arrive()
            disk.failing = true
            #expect(throws: OutboxError.io(operation: "fsync", path: path, errno: ENOSPC)) { try box.compact() }
            var refused = 0
            for _ in 0..<20 {
                do { try d.run(seconds: 1) { _ in -62 } } catch { refused += 1 }
            }
            #expect(refused > 0, "the disk refused nothing")
            #expect(d.checkIns.isEmpty && box.count == 0)
            #expect(d.machine.session == nil, "the machine took a check-in the outbox did not store")

            disk.failing = false
            try d.run(seconds: 10) { _ in -62 }
            #expect(d.checkIns.count == 1 && box.count == 1)
            let stored = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(stored.sessionKey == d.machine.session?.key)
            #expect(box.lastSnapshot()?.session?.sessionKey == stored.sessionKey)
        }
    }
}
