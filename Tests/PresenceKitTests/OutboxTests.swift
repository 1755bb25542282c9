import Foundation
import Synchronization
import Testing

@testable import PresenceKit

@Suite("Outbox (write-ahead log)")
struct OutboxTests {
    func payload(_ i: Int, size: Int = 40) -> [UInt8] {
        var bytes = Array("event-\(i)-".utf8)
        while bytes.count < size { bytes.append(UInt8(truncatingIfNeeded: i &+ bytes.count)) }
        return bytes
    }

    @Test("append, reopen, states, drain order, done entries leave")
    func roundTrip() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let clock = ManualClock(World.start)
            do {
                let box = try Outbox(path: path, clock: clock)
                #expect(box.recovery.createdNewFile)
                for i in 0..<5 {
                    clock.advance(by: 1_000)
                    try box.append(payload(i), kind: UInt8(i))
                }
                try box.markSent(1)
                try box.markSent(2)
                try box.markDone(2, status: 201)
                try box.saveCheckpoint(Array("ck".utf8))
                #expect(box.entries().map(\.id) == [1, 3, 4, 5])
                box.close()
                #expect(throws: OutboxError.closed) { try box.append([1]) }
            }
            let box = try Outbox(path: path, clock: clock)
            #expect(!box.recovery.createdNewFile && box.recovery.truncatedBytes == 0)
            #expect(box.recovery.recordsRead == 9)
            let entries = box.entries()
            #expect(entries.map(\.id) == [1, 3, 4, 5])
            try #require(entries.count > 1)
            #expect(entries[0].state == .sentAwaitingVerdict)
            #expect(entries[1].state == .pending)
            #expect(entries[1].kind == 2 && entries[1].createdAt == World.start + 3_000)
            #expect(try box.payload(of: 4) == payload(3))
            #expect(box.checkpoint == Array("ck".utf8))
            #expect(box.first()?.id == 1)
            let next = try box.append(payload(9))
            #expect(next.id == 6) // ids keep increasing after a reopen
            #expect(throws: OutboxError.unknownEntry(id: 2)) { try box.markDone(2, status: 200) }
        }
    }

    @Test("a torn last record is cut off at every byte offset; everything before it survives")
    func tornRecordAtEveryOffset() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let clock = ManualClock(World.start)
            let box = try Outbox(path: path, clock: clock)
            for i in 0..<3 { try box.append(payload(i)) }
            let goodSize = Int(box.fileSize)
            try box.append(payload(3, size: 120), checkpoint: Array("checkpoint-with-last".utf8))
            let fullSize = Int(box.fileSize)
            box.close()
            let full = try fileBytes(path)
            try #require(full.count == fullSize && fullSize > goodSize)
            for cut in goodSize..<fullSize {
                try writeFile(path, Array(full[0..<cut]))
                let reopened = try Outbox(path: path, clock: clock)
                #expect(reopened.entries().map(\.id) == [1, 2, 3], "cut at \(cut)")
                #expect(reopened.recovery.truncatedBytes == Int64(cut - goodSize))
                #expect(reopened.fileSize == Int64(goodSize))
                #expect(reopened.checkpoint == nil) // the checkpoint rode on the torn record
                reopened.close()
                #expect(try fileBytes(path).count == goodSize, "file truncated at \(cut)")
            }
            // And the full file keeps all four.
            try writeFile(path, full)
            let all = try Outbox(path: path, clock: clock)
            #expect(all.entries().count == 4 && all.checkpoint == Array("checkpoint-with-last".utf8))
            // Appending after a recovery works and survives another reopen.
            try writeFile(path, Array(full[0..<(goodSize + 7)]))
            let again = try Outbox(path: path, clock: clock)
            try again.append(payload(7))
            again.close()
            #expect(try Outbox(path: path, clock: clock).entries().map(\.id) == [1, 2, 3, 4])
        }
    }

    @Test("a corrupt record (bad CRC) stops recovery there and keeps what precedes it")
    func corruptRecord() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let box = try Outbox(path: path)
            for i in 0..<4 { try box.append(payload(i)) }
            box.close()
            var bytes = try fileBytes(path)
            let recordSize = (bytes.count - 8) / 4
            bytes[8 + 2 * recordSize + 20] ^= 0xFF // inside the third record's body
            try writeFile(path, bytes)
            let reopened = try Outbox(path: path)
            #expect(reopened.entries().map(\.id) == [1, 2])
            #expect(reopened.recovery.truncatedBytes == Int64(2 * recordSize))
            // an absurd length is treated as torn as well
            reopened.close()
            var b2 = try fileBytes(path)
            b2 += [0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0, 1, 2, 3]
            try writeFile(path, b2)
            #expect(try Outbox(path: path).entries().count == 2)
        }
    }

    @Test("torn header, foreign file, leftover compaction file")
    func headerCases() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            try writeFile(path, Array("PKOU".utf8))
            let box = try Outbox(path: path)
            #expect(box.isEmpty && box.fileSize == 8)
            box.close()
            let foreign = dir + "/notes.txt"
            try writeFile(foreign, Array("hello world, not an outbox".utf8))
            #expect(throws: OutboxError.notAnOutbox(path: foreign)) { try Outbox(path: foreign) }
            #expect(try fileBytes(foreign) == Array("hello world, not an outbox".utf8))
            try writeFile(path + ".compact", [1, 2, 3])
            let again = try Outbox(path: path)
            #expect(again.recovery.removedStaleCompactionFile)
            #expect(!FileManager.default.fileExists(atPath: path + ".compact"))
        }
    }

    @Test("compaction keeps live entries, states and the checkpoint; the file stays bounded")
    func compaction() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let box = try Outbox(path: path, options: OutboxOptions(compactionMinDeadBytes: 4_096))
            var maxSize: Int64 = 0
            var live: [UInt64] = []
            for i in 0..<2_000 {
                let e = try box.append(payload(i, size: 200))
                live.append(e.id)
                if live.count > 10 {
                    let old = live.removeFirst()
                    try box.markSent(old)
                    try box.markDone(old, status: 201)
                }
                maxSize = max(maxSize, box.fileSize)
            }
            try box.markSent(live[3])
            try box.saveCheckpoint([9, 9, 9])
            #expect(box.compactionCount > 10)
            // 10 live entries of ~250 bytes: the file never grew past live + slack, far below 2,000 × 250.
            #expect(maxSize < 4_096 * 3)
            try box.compact()
            let size = box.fileSize
            box.close()
            let reopened = try Outbox(path: path)
            let entries = reopened.entries()
            #expect(entries.map(\.id) == live)
            try #require(entries.count > 3)
            #expect(entries[3].state == .sentAwaitingVerdict)
            #expect(reopened.checkpoint == [9, 9, 9])
            #expect(try reopened.payload(of: live[9]) == payload(1_999, size: 200))
            #expect(reopened.fileSize == size)
        }
    }

    @Test("bounded: 10,000 entries for 72 h offline fit; beyond the limit heartbeats are evicted, then append fails")
    func capacity() throws {
        try withTempDir { dir in
            let clock = ManualClock(World.start)
            let box = try Outbox(path: dir + "/big.wal", options: OutboxOptions(maxLiveEntries: 10_500), clock: clock)
            // 10,500 events spread over 72 hours (one every ~25 s), ~600-byte payloads like real events.
            for i in 0..<10_500 {
                clock.advance(by: 24_686)
                try box.append(payload(i, size: 600), kind: i % 10 == 0 ? 1 : 3, evictable: i % 10 != 0)
            }
            #expect(box.count == 10_500)
            #expect(clock.now() - World.start >= 72 * 3_600_000)
            #expect(box.fileSize < 10_500 * 700) // ~6.6 MB: bounded
            // Full: the oldest evictable entry (id 2) makes room.
            let extra = try box.append(payload(-1), kind: 1)
            #expect(box.count == 10_500)
            let entries = box.entries()
            #expect(entries.first?.id == 1)
            try #require(entries.count > 1)
            #expect(entries[1].id == 3)
            #expect(extra.id == 10_501)
            box.close()
            let small = try Outbox(path: dir + "/small.wal", options: OutboxOptions(maxLiveEntries: 3), clock: clock)
            for i in 0..<3 { try small.append(payload(i)) }
            #expect(throws: OutboxError.full(limit: 3)) { try small.append(payload(4)) }
            #expect(throws: OutboxError.payloadTooLarge(size: 70_000, limit: 65_536)) {
                try small.append([UInt8](repeating: 1, count: 70_000))
            }
        }
    }

    @Test("concurrent appends from many tasks are serialised, none lost")
    func concurrentAppends() async throws {
        try await withTempDir { dir in
            let box = try Outbox(path: dir + "/c.wal")
            await withTaskGroup(of: Void.self) { group in
                for t in 0..<8 {
                    group.addTask {
                        for i in 0..<25 { _ = try? box.append(Array("t\(t)-\(i)".utf8)) }
                    }
                }
            }
            #expect(box.count == 200)
            #expect(Set(box.entries().map(\.id)).count == 200)
            box.close()
            #expect(try Outbox(path: dir + "/c.wal").count == 200)
        }
    }

    @Test("a post and its snapshot are stored in one record")
    func storeEffects() throws {
        try withTempDir { dir in
            let path = dir + "/o.wal"
            let box = try Outbox(path: path)
            var d = try DeviceHarness(config: World.config { $0.flags.continuousScan = true }, outbox: box)
            try d.arrive()
            try d.run(seconds: 5) { _ in -62 }
            #expect(d.checkIns.count == 1)
            #expect(box.count == 1)
            try #require(d.checkIns.count > 0)
            #expect(box.lastSnapshot()?.session?.sessionKey == d.checkIns[0].sessionKey)
            let stored = try PresenceCoding.decodeEvent(try box.payload(of: try #require(box.first()).id))
            #expect(stored == d.checkIns[0])
            #expect(box.first()?.kind == AttendanceEvent.Kind.checkIn.outboxKind)
            #expect(box.first()?.evictable == false)
        }
    }

    @Test("a directory fsync failing after compaction's rename: later appends go to the new file and survive a reopen")
    func directorySyncFailsAfterRename() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let disk = FailingDirectorySync()
            let box = try disk.outbox(path: path)
            let first = try box.append(payload(0))
            try box.append(payload(1))
            try box.markDone(first.id, status: 201)
            disk.failing = true
            #expect(throws: OutboxError.io(operation: "fsync", path: path, errno: EIO)) { try box.compact() }
            // While the directory cannot be synced, nothing counts as stored: the append fails, and
            // leaves no record behind.
            #expect(throws: OutboxError.io(operation: "fsync", path: path, errno: EIO)) { try box.append(payload(2)) }
            disk.failing = false
            try box.append(payload(3))
            try box.saveCheckpoint([7])
            box.close()
            let reopened = try Outbox(path: path)
            #expect(reopened.recovery.truncatedBytes == 0)
            #expect(try reopened.entries().map { try reopened.payload(of: $0.id) } == [payload(1), payload(3)])
            #expect(reopened.checkpoint == [7])
            #expect(!FileManager.default.fileExists(atPath: path + ".compact"))
        }
    }

    @Test("a parked entry leaves the drain order, survives reopen and compaction, and leaves only by markDone")
    func parkedEntries() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let box = try Outbox(path: path)
            let foreign = try box.append(payload(0))
            let mine = try box.append(payload(1))
            try box.markSent(foreign.id)
            let parked = try box.park(foreign.id, status: 403)
            #expect(parked.parkedStatus == 403)
            #expect(box.first()?.id == mine.id && box.count == 1)
            #expect(box.entries().map(\.id) == [mine.id])
            #expect(box.parkedEntries().map(\.id) == [foreign.id])
            #expect(try box.payload(of: foreign.id) == payload(0))
            #expect(throws: OutboxError.unknownEntry(id: foreign.id)) { try box.park(foreign.id, status: 403) }
            box.close()
            let reopened = try Outbox(path: path)
            #expect(reopened.entries().map(\.id) == [mine.id])
            #expect(reopened.parkedEntries().map(\.id) == [foreign.id])
            #expect(reopened.parkedEntries().first?.parkedStatus == 403)
            try reopened.compact()
            #expect(reopened.parkedEntries().map(\.id) == [foreign.id])
            #expect(try reopened.payload(of: foreign.id) == payload(0))
            reopened.close()
            let compacted = try Outbox(path: path)
            #expect(compacted.parkedEntries().map { $0.parkedStatus } == [403])
            #expect(try compacted.payload(of: foreign.id) == payload(0))
            #expect(compacted.first()?.id == mine.id)
            // Exported by the host: it leaves.
            try compacted.markDone(foreign.id, status: 403)
            #expect(compacted.parkedEntries().isEmpty)
            compacted.close()
            #expect(try Outbox(path: path).parkedEntries().isEmpty)
        }
    }

    @Test("a replaced payload takes the entry's place, with its mark, and survives reopen and compaction")
    func replacedPayloads() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let box = try Outbox(path: path)
            let first = try box.append(payload(0), kind: 1, stampedWithPhoneClock: true)
            let second = try box.append(payload(1), kind: 3, evictable: true, stampedWithPhoneClock: true)
            let third = try box.append(payload(2))
            let parked = try box.append(payload(3), stampedWithPhoneClock: true)
            try box.markSent(second.id)
            try box.park(parked.id, status: 403)
            #expect(box.entries().map(\.stampedWithPhoneClock) == [true, true, false] && box.hasPhoneClockStamps)
            // An id no longer in the outbox (delivered meanwhile) is skipped.
            try box.replacePayloads([
                Outbox.Replacement(id: first.id, payload: payload(10, size: 80), stampedWithPhoneClock: false),
                Outbox.Replacement(id: second.id, payload: payload(11, size: 20), stampedWithPhoneClock: true),
                Outbox.Replacement(id: parked.id, payload: payload(13), stampedWithPhoneClock: false),
                Outbox.Replacement(id: 99, payload: payload(9), stampedWithPhoneClock: false),
            ])
            func check(_ box: Outbox) throws {
                let entries = box.entries()
                #expect(entries.map(\.id) == [first.id, second.id, third.id])
                #expect(entries.map(\.stampedWithPhoneClock) == [false, true, false])
                #expect(entries.map(\.kind) == [1, 3, 0] && entries.map(\.evictable) == [false, true, false])
                #expect(entries.map(\.state) == [.pending, .sentAwaitingVerdict, .pending])
                #expect(try box.payload(of: first.id) == payload(10, size: 80))
                #expect(try box.payload(of: second.id) == payload(11, size: 20))
                #expect(try box.payload(of: third.id) == payload(2))
                #expect(box.parkedEntries().map { [$0.id: $0.stampedWithPhoneClock] } == [[parked.id: false]])
                #expect(try box.payload(of: parked.id) == payload(13))
            }
            try check(box)
            #expect(box.compactionCount == 1)
            box.close()
            let reopened = try Outbox(path: path)
            #expect(reopened.recovery.truncatedBytes == 0)
            try check(reopened)
            try reopened.compact()
            try check(reopened)
            reopened.close()
            try check(try Outbox(path: path))
        }
    }

    @Test("the mark survives reopen and compaction until replaced, and nothing is written for no replacement")
    func markSurvives() throws {
        try withTempDir { dir in
            let path = dir + "/outbox.wal"
            let box = try Outbox(path: path)
            let entry = try box.append(payload(0), stampedWithPhoneClock: true)
            try box.compact()
            box.close()
            let reopened = try Outbox(path: path)
            #expect(reopened.entries().map(\.stampedWithPhoneClock) == [true] && reopened.hasPhoneClockStamps)
            let size = reopened.fileSize
            try reopened.replacePayloads([])
            try reopened.replacePayloads([Outbox.Replacement(id: entry.id + 1, payload: payload(1), stampedWithPhoneClock: false)])
            #expect(reopened.fileSize == size && reopened.compactionCount == 0)
            #expect(try reopened.payload(of: entry.id) == payload(0))
        }
    }
}
