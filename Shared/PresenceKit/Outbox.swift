import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Delivery state of an outbox entry. A third state, *done*, is recorded in the file but a done entry
/// is no longer live: it leaves the outbox (Outbox → Posted → Synced).
public enum OutboxEntryState: UInt8, Sendable, Hashable, Codable {
    /// Stored, not sent yet (or sent and the outcome lost: a relaunch resends it with the same key).
    case pending = 0
    /// Sent; no final verdict yet (202, 5xx, timeout, or in flight).
    case sentAwaitingVerdict = 1
}

/// One live entry (metadata; the payload stays on disk until `payload(of:)` reads it).
public struct OutboxEntry: Sendable, Hashable {
    /// Append sequence number: drain order is ascending `id`, the original append order.
    public let id: UInt64
    public let createdAt: Timestamp
    /// Free for the caller (PresenceKit uses `AttendanceEvent.Kind` codes, see `Outbox.store`).
    public let kind: UInt8
    /// May be dropped, oldest first, when the outbox is full (heartbeats are; check-ins never are).
    public let evictable: Bool
    public internal(set) var state: OutboxEntryState
    /// Send attempts since the outbox was opened (drives the retry backoff; not persisted).
    public internal(set) var attempts: Int
    public let payloadLength: Int
    /// The answer that parked the entry (`Outbox.park`), nil for an entry in the drain order.
    public internal(set) var parkedStatus: Int?
    /// The payload's times are (some of them) the phone's own clock (`AttendanceEvent.phoneClock`)
    /// until `replacePayloads` puts corrected ones in its place; the drainer never sends such an entry.
    public internal(set) var stampedWithPhoneClock: Bool
    let payloadOffset: Int64
    /// Size of the APPEND record that holds this entry (for live-bytes accounting).
    let recordBytes: Int64
}

public struct OutboxOptions: Sendable, Hashable {
    /// Live entries allowed; beyond it the oldest evictable entry goes, else `append` throws `.full`.
    /// 72 h offline with a 5-minute heartbeat and a few sessions a day is ~1,000 entries; 20,000 leaves
    /// a wide margin above the required 10,000.
    public var maxLiveEntries: Int
    /// Largest payload accepted (the gateway rejects bodies over 64 KiB).
    public var maxPayloadBytes: Int
    /// Compaction runs when dead bytes exceed both this and the live bytes, so the file stays below about
    /// twice its live content plus this slack.
    public var compactionMinDeadBytes: Int64

    public init(maxLiveEntries: Int = 20_000, maxPayloadBytes: Int = 64 * 1024, compactionMinDeadBytes: Int64 = 256 * 1024) {
        self.maxLiveEntries = maxLiveEntries
        self.maxPayloadBytes = maxPayloadBytes
        self.compactionMinDeadBytes = compactionMinDeadBytes
    }
}

/// What opening the outbox found.
public struct OutboxRecoveryReport: Sendable, Hashable {
    public var createdNewFile: Bool
    public var fileBytesBefore: Int64
    public var recordsRead: Int
    public var liveEntries: Int
    /// Bytes cut off the end: a torn or corrupt record and everything after it.
    public var truncatedBytes: Int64
    /// A `.compact` file left by a crash during compaction was removed.
    public var removedStaleCompactionFile: Bool
}

public enum OutboxError: Error, Sendable, Hashable, CustomStringConvertible {
    case io(operation: String, path: String, errno: Int32)
    /// The file exists but is not an outbox (wrong magic); it is left untouched.
    case notAnOutbox(path: String)
    case payloadTooLarge(size: Int, limit: Int)
    /// Every live entry is non-evictable and the limit is reached.
    case full(limit: Int)
    case unknownEntry(id: UInt64)
    case closed

    public var description: String {
        switch self {
        case let .io(operation, path, code):
            return "outbox I/O error: \(operation) \(path) failed (errno \(code): \(String(cString: strerror(code))))"
        case let .notAnOutbox(path): return "\(path) is not an outbox file (bad magic); refusing to touch it"
        case let .payloadTooLarge(size, limit): return "outbox payload of \(size) bytes exceeds the \(limit)-byte limit"
        case let .full(limit): return "outbox full: \(limit) live entries and none evictable"
        case let .unknownEntry(id): return "no live outbox entry \(id)"
        case .closed: return "outbox is closed"
        }
    }
}

/// The device's write-ahead outbox (docs/SPECIFICATION.md, "2. The device outbox and delivery"): every
/// attendance event is stored here, durably, before it is sent, and leaves only on a final verdict.
///
/// **File format.** An 8-byte magic `PKOUTBX1`, then records:
///
///     record  = length:u32le  crc32:u32le  body[length]        (crc32 of body, IEEE)
///     body    = 0x01 APPEND  id:u64 createdAt:i64 kind:u8 flags:u8 payloadLength:u32 payload
///                            hasCheckpoint:u8 [checkpointLength:u32 checkpoint]
///                            (flags: bit 0 evictable, bit 1 stamped with the phone's clock)
///             | 0x02 STATE   id:u64 state:u8 (1 sent-awaiting-verdict, 2 done, 3 parked) status:i32 at:i64
///             | 0x03 CHECKPOINT hasCheckpoint:u8 [checkpoint...]
///
/// Append-only: state changes are new records; new payloads for entries (`replacePayloads`) are
/// written by a compaction. **Durability:** `append`, `markDone` and `saveCheckpoint` call `fsync(2)`
/// before returning — an event counts as stored only then. `markSent`
/// does not: losing it only means a relaunch resends with the same idempotency key, which the server
/// dedupes. **Recovery** (on open) replays records and stops at the first one that is torn (short),
/// oversized or fails its CRC; it truncates the file there and keeps everything before it.
/// **Compaction** writes the live entries and the checkpoint to `<path>.compact`, fsyncs it, renames it
/// over the file (atomic) and fsyncs the directory. **Bounded:** at most `maxLiveEntries` live entries
/// and a file below about twice its live bytes plus `compactionMinDeadBytes`. Memory holds only the
/// index (~100 bytes per live entry), not the payloads.
/// **Parked entries** (`park`) are kept in the file and listed by `parkedEntries()`, but are out of the
/// drain order: `first()`, `entries()` and `count` do not include them. They leave only by `markDone`.
///
/// **Concurrency.** A `final class` whose only mutable state sits in a `Mutex` from `Synchronization`:
/// every method locks it for its whole duration, so calls from any thread or task are serialised and
/// each sees a consistent index and file. The methods block for file I/O (an `fsync` is typically
/// 0.1-10 ms); call them from a context that may block, not from a latency-critical actor.
public final class Outbox: Sendable {
    public let path: String
    public let options: OutboxOptions
    public let recovery: OutboxRecoveryReport
    private let clock: any PresenceClock
    private let state: Mutex<State>
    /// Makes a create or a rename in the outbox's directory durable (`FileIO.fsyncDirectory`; tests
    /// substitute a failing one).
    private let syncDirectory: @Sendable (String) throws(OutboxError) -> Void

    static let magic: [UInt8] = Array("PKOUTBX1".utf8)
    static let maxRecordBytes = 1 << 20
    static let typeAppend: UInt8 = 1
    static let typeState: UInt8 = 2
    static let typeCheckpoint: UInt8 = 3
    static let flagEvictable: UInt8 = 1
    static let flagPhoneClock: UInt8 = 2
    static let stateSent: UInt8 = 1
    static let stateDone: UInt8 = 2
    static let stateParked: UInt8 = 3
    /// Offset of the payload inside an APPEND record: frame (8) + type (1) + id (8) + createdAt (8)
    /// + kind (1) + flags (1) + payloadLength (4).
    static let payloadOffsetInRecord: Int64 = 31

    struct State {
        var fd: Int32
        var fileSize: Int64
        var entries: [UInt64: OutboxEntry] = [:]
        /// Entries out of the drain order (`park`); their records count in `liveRecordBytes`.
        var parked: [UInt64: OutboxEntry] = [:]
        /// Ids in append order; ids of entries that left are skipped lazily.
        var order: [UInt64] = []
        var orderHead = 0
        var nextId: UInt64 = 1
        var liveRecordBytes: Int64 = 0
        var checkpoint: [UInt8]?
        var closed = false
        var compactions = 0
        /// A compaction renamed its file over the outbox but the directory fsync failed: the rename may
        /// not survive a power loss yet. Every fsynced write retries the directory fsync first and
        /// fails while it cannot be done, so nothing counts as stored before the file it is in is.
        var directorySyncPending = false
        /// Tests: every write fails with this errno, as on a full disk (`failWrites(errno:)`).
        var failingWrites: Int32?
    }

    /// Tests: makes every write fail with `errno` (ENOSPC: a full disk) until called with nil.
    func failWrites(errno code: Int32?) { state.withLock { $0.failingWrites = code } }

    /// Opens (creating if needed) the outbox at `path` and recovers its content.
    public convenience init(
        path: String, options: OutboxOptions = OutboxOptions(), clock: any PresenceClock = SystemClock()
    ) throws(OutboxError) {
        try self.init(
            path: path, options: options, clock: clock,
            syncDirectory: { (path: String) throws(OutboxError) in try FileIO.fsyncDirectory(of: path) })
    }

    /// - Parameter syncDirectory: called with the outbox's path to make a create or rename in its
    ///   directory durable.
    init(
        path: String, options: OutboxOptions, clock: any PresenceClock,
        syncDirectory: @escaping @Sendable (String) throws(OutboxError) -> Void
    ) throws(OutboxError) {
        self.path = path
        self.options = options
        self.clock = clock
        self.syncDirectory = syncDirectory
        var report = OutboxRecoveryReport(
            createdNewFile: false, fileBytesBefore: 0, recordsRead: 0, liveEntries: 0, truncatedBytes: 0,
            removedStaleCompactionFile: false)
        let compactPath = path + ".compact"
        if FileIO.exists(compactPath) {
            // A crash during compaction, before the rename: the original file is intact.
            FileIO.unlink(compactPath)
            report.removedStaleCompactionFile = true
        }
        let fd = try FileIO.open(path, flags: O_RDWR | O_CREAT)
        var st = State(fd: fd, fileSize: 0)
        do throws(OutboxError) {
            let size = try FileIO.size(fd, path: path)
            report.fileBytesBefore = size
            if size == 0 {
                try FileIO.write(fd, Outbox.magic, at: 0, path: path)
                try FileIO.fsync(fd, path: path)
                try syncDirectory(path)
                st.fileSize = Int64(Outbox.magic.count)
                report.createdNewFile = true
            } else {
                let bytes = try FileIO.read(fd, count: Int(size), at: 0, path: path)
                try Outbox.recover(bytes, into: &st, report: &report, path: path)
            }
        } catch {
            FileIO.close(fd)
            throw error
        }
        report.liveEntries = st.entries.count
        self.recovery = report
        self.state = Mutex(st)
    }

    deinit {
        state.withLock { st in
            if !st.closed { FileIO.close(st.fd) }
        }
    }

    /// Closes the file. Further calls throw `.closed`.
    public func close() {
        state.withLock { st in
            if !st.closed {
                FileIO.close(st.fd)
                st.closed = true
            }
        }
    }

    // MARK: Recovery

    private static func recover(
        _ bytes: [UInt8], into st: inout State, report: inout OutboxRecoveryReport, path: String
    ) throws(OutboxError) {
        let size = Int64(bytes.count)
        if bytes.count < magic.count {
            // A crash while creating the file: only a prefix of the magic made it.
            guard Array(magic[0..<bytes.count]) == bytes else { throw .notAnOutbox(path: path) }
            try FileIO.truncate(st.fd, to: 0, path: path)
            try FileIO.write(st.fd, magic, at: 0, path: path)
            try FileIO.fsync(st.fd, path: path)
            st.fileSize = Int64(magic.count)
            report.truncatedBytes = size
            return
        }
        guard Array(bytes[0..<magic.count]) == magic else { throw .notAnOutbox(path: path) }
        var offset = magic.count
        var records = 0
        while offset < bytes.count {
            guard let end = applyRecord(bytes, at: offset, to: &st) else { break }
            offset = end
            records += 1
        }
        report.recordsRead = records
        st.fileSize = Int64(offset)
        if offset < bytes.count {
            report.truncatedBytes = size - Int64(offset)
            try FileIO.truncate(st.fd, to: Int64(offset), path: path)
            try FileIO.fsync(st.fd, path: path)
        }
        st.order.sort()
    }

    /// Applies the record at `offset`; returns the offset after it, or nil when the record is torn,
    /// oversized, fails its checksum or is malformed.
    private static func applyRecord(_ bytes: [UInt8], at offset: Int, to st: inout State) -> Int? {
        var header = ByteReader(bytes, from: offset, to: bytes.count)
        guard let length = header.u32(), let crc = header.u32() else { return nil }
        let bodyStart = offset + 8
        let len = Int(length)
        guard len >= 1, len <= maxRecordBytes, bodyStart + len <= bytes.count else { return nil }
        let actual = bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[bodyStart..<bodyStart + len])) }
        guard actual == crc else { return nil }
        var r = ByteReader(bytes, from: bodyStart, to: bodyStart + len)
        guard let type = r.u8() else { return nil }
        switch type {
        case typeAppend:
            guard let id = r.u64(), let created = r.i64(), let kind = r.u8(), let flags = r.u8(),
                let payloadLength = r.u32()
            else { return nil }
            let payloadOffset = Int64(r.position)
            guard r.skip(Int(payloadLength)), let hasCheckpoint = r.u8() else { return nil }
            if hasCheckpoint == 1 {
                guard let ckLength = r.u32(), let ck = r.raw(Int(ckLength)) else { return nil }
                st.checkpoint = ck
            }
            guard r.remaining == 0 else { return nil }
            if st.entries[id] == nil && st.parked[id] == nil {
                let recordBytes = Int64(8 + len)
                st.entries[id] = OutboxEntry(
                    id: id, createdAt: Timestamp(millisecondsSinceEpoch: created), kind: kind,
                    evictable: flags & flagEvictable != 0, state: .pending, attempts: 0, payloadLength: Int(payloadLength),
                    parkedStatus: nil, stampedWithPhoneClock: flags & flagPhoneClock != 0, payloadOffset: payloadOffset,
                    recordBytes: recordBytes)
                st.order.append(id)
                st.liveRecordBytes += recordBytes
            }
            st.nextId = max(st.nextId, id + 1)
        case typeState:
            guard let id = r.u64(), let newState = r.u8(), let status = r.i32(), r.i64() != nil, r.remaining == 0 else { return nil }
            if var entry = st.entries[id] {
                if newState == stateDone {
                    st.entries[id] = nil
                    st.liveRecordBytes -= entry.recordBytes
                } else if newState == stateSent {
                    entry.state = .sentAwaitingVerdict
                    st.entries[id] = entry
                } else if newState == stateParked {
                    st.entries[id] = nil
                    entry.parkedStatus = Int(status)
                    st.parked[id] = entry
                }
            } else if newState == stateDone, let entry = st.parked[id] {
                st.parked[id] = nil
                st.liveRecordBytes -= entry.recordBytes
            }
        case typeCheckpoint:
            guard let has = r.u8() else { return nil }
            if has == 1 {
                guard let ck = r.raw(r.remaining) else { return nil }
                st.checkpoint = ck
            } else {
                guard r.remaining == 0 else { return nil }
                st.checkpoint = nil
            }
        default:
            return nil
        }
        return bodyStart + len
    }

    // MARK: Record building

    static func frame(_ body: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: body.count + 8)
        w.u32(UInt32(body.count))
        w.u32(CRC32.checksum(body))
        w.raw(body)
        return w.bytes
    }

    static func appendRecord(
        id: UInt64, createdAt: Timestamp, kind: UInt8, evictable: Bool, phoneClock: Bool, payload: [UInt8], checkpoint: [UInt8]?
    ) -> [UInt8] {
        var w = ByteWriter(capacity: payload.count + (checkpoint?.count ?? 0) + 40)
        w.u8(typeAppend)
        w.u64(id)
        w.i64(createdAt.millisecondsSinceEpoch)
        w.u8(kind)
        w.u8((evictable ? flagEvictable : 0) | (phoneClock ? flagPhoneClock : 0))
        w.u32(UInt32(payload.count))
        w.raw(payload)
        if let checkpoint {
            w.u8(1)
            w.u32(UInt32(checkpoint.count))
            w.raw(checkpoint)
        } else {
            w.u8(0)
        }
        return frame(w.bytes)
    }

    static func stateRecord(id: UInt64, state: UInt8, status: Int32, at: Timestamp) -> [UInt8] {
        var w = ByteWriter(capacity: 22)
        w.u8(typeState)
        w.u64(id)
        w.u8(state)
        w.i32(status)
        w.i64(at.millisecondsSinceEpoch)
        return frame(w.bytes)
    }

    static func checkpointRecord(_ checkpoint: [UInt8]?) -> [UInt8] {
        var w = ByteWriter(capacity: (checkpoint?.count ?? 0) + 2)
        w.u8(typeCheckpoint)
        if let checkpoint {
            w.u8(1)
            w.raw(checkpoint)
        } else {
            w.u8(0)
        }
        return frame(w.bytes)
    }

    /// Writes `record` at the end of the file; on failure cuts the file back so no partial record stays.
    private func write(_ record: [UInt8], _ st: inout State, sync: Bool) throws(OutboxError) {
        guard record.count - 8 <= Outbox.maxRecordBytes else { throw .payloadTooLarge(size: record.count, limit: Outbox.maxRecordBytes) }
        try write(records: record, &st, sync: sync)
    }

    /// Writes whole records (each checked against `maxRecordBytes` by its builder) at the end of the
    /// file in one write; on failure cuts the file back so none of them stays.
    private func write(records: [UInt8], _ st: inout State, sync: Bool) throws(OutboxError) {
        guard !st.closed else { throw .closed }
        if let code = st.failingWrites { throw .io(operation: "write", path: path, errno: code) }
        do throws(OutboxError) {
            try FileIO.write(st.fd, records, at: st.fileSize, path: path)
            if sync {
                try FileIO.fsync(st.fd, path: path)
                if st.directorySyncPending {
                    try syncDirectory(path)
                    st.directorySyncPending = false
                }
            }
        } catch {
            try? FileIO.truncate(st.fd, to: st.fileSize, path: path)
            throw error
        }
        st.fileSize += Int64(records.count)
    }

    // MARK: Writing

    /// Stores one event durably (written and fsynced before returning) and returns its entry.
    /// `checkpoint`, when given, is stored in the same record: the event and the state that goes with it
    /// are recovered together or not at all. `stampedWithPhoneClock` marks a payload whose times wait
    /// for a correction (`replacePayloads`).
    @discardableResult
    public func append(
        _ payload: [UInt8], kind: UInt8 = 0, evictable: Bool = false, stampedWithPhoneClock: Bool = false,
        checkpoint: [UInt8]? = nil
    ) throws(OutboxError) -> OutboxEntry {
        let stored = try write([
            .event(payload, kind: kind, evictable: evictable, stampedWithPhoneClock: stampedWithPhoneClock, checkpoint: checkpoint)
        ])
        return stored[0]
    }

    /// One record of a batch (`write(_:)`).
    public enum Write: Sendable, Hashable {
        /// An event: see `append`.
        case event(_ payload: [UInt8], kind: UInt8, evictable: Bool, stampedWithPhoneClock: Bool, checkpoint: [UInt8]?)
        /// A checkpoint on its own: see `saveCheckpoint`.
        case checkpoint([UInt8]?)
    }

    /// Stores a batch all or nothing: its records go to the file in one write and one fsync, and the
    /// outbox changes only once they are durable. When it throws (a full disk, a payload too large,
    /// the outbox full of entries none of which may be evicted), nothing of the batch is stored and the
    /// outbox is as it was. Evictions the batch needs (the oldest evictable entries, when the live
    /// entries would exceed `maxLiveEntries`) are part of the same write. A crash mid-write keeps a
    /// prefix of whole records, each event with its own checkpoint. Returns the new entries, in order.
    @discardableResult
    public func write(_ batch: [Write]) throws(OutboxError) -> [OutboxEntry] {
        for case .event(let payload, _, _, _, _) in batch where payload.count > options.maxPayloadBytes {
            throw .payloadTooLarge(size: payload.count, limit: options.maxPayloadBytes)
        }
        guard !batch.isEmpty else { return [] }
        let now = clock.now()
        return try state.withLock { (st: inout State) throws(OutboxError) -> [OutboxEntry] in
            let events = batch.filter { if case .event = $0 { return true } else { return false } }.count
            let victims = try evictionVictims(&st, count: st.entries.count + events - options.maxLiveEntries)
            var bytes: [UInt8] = []
            for victim in victims {
                bytes += Outbox.stateRecord(id: victim.id, state: Outbox.stateDone, status: 0, at: now)
            }
            var stored: [OutboxEntry] = []
            var checkpoint: [UInt8]?? = .none
            var standaloneCheckpoint = false
            for item in batch {
                let record: [UInt8]
                switch item {
                case .event(let payload, let kind, let evictable, let phoneClock, let ck):
                    let id = st.nextId + UInt64(stored.count)
                    record = Outbox.appendRecord(
                        id: id, createdAt: now, kind: kind, evictable: evictable, phoneClock: phoneClock, payload: payload, checkpoint: ck)
                    stored.append(
                        OutboxEntry(
                            id: id, createdAt: now, kind: kind, evictable: evictable, state: .pending, attempts: 0,
                            payloadLength: payload.count, parkedStatus: nil, stampedWithPhoneClock: phoneClock,
                            payloadOffset: st.fileSize + Int64(bytes.count) + Outbox.payloadOffsetInRecord, recordBytes: Int64(record.count)
                        ))
                    if let ck { checkpoint = .some(ck) }
                case .checkpoint(let ck):
                    record = Outbox.checkpointRecord(ck)
                    checkpoint = .some(ck)
                    standaloneCheckpoint = true
                }
                guard record.count - 8 <= Outbox.maxRecordBytes else {
                    throw .payloadTooLarge(size: record.count, limit: Outbox.maxRecordBytes)
                }
                bytes += record
            }
            try write(records: bytes, &st, sync: true)
            for victim in victims {
                st.entries[victim.id] = nil
                st.liveRecordBytes -= victim.recordBytes
            }
            for entry in stored {
                st.entries[entry.id] = entry
                st.order.append(entry.id)
                st.liveRecordBytes += entry.recordBytes
            }
            st.nextId += UInt64(stored.count)
            if case .some(let ck) = checkpoint { st.checkpoint = ck }
            // A phone offline for days writes checkpoints and no verdicts: they are what grows the file then.
            // A compaction moves the entries: they are answered as they now are.
            if standaloneCheckpoint {
                compactIfWorthItQuietly(&st)
                return stored.map { st.entries[$0.id] ?? $0 }
            }
            return stored
        }
    }

    /// The `count` oldest evictable live entries (none for a count of 0 or less); throws `.full` when
    /// there are fewer.
    private func evictionVictims(_ st: inout State, count: Int) throws(OutboxError) -> [OutboxEntry] {
        guard count > 0 else { return [] }
        var victims: [OutboxEntry] = []
        for i in st.orderHead..<st.order.count where victims.count < count {
            if let e = st.entries[st.order[i]], e.evictable { victims.append(e) }
        }
        guard victims.count == count else { throw .full(limit: options.maxLiveEntries) }
        return victims
    }

    /// A new payload for an entry, and whether its times are still (some of them) the phone's clock.
    public struct Replacement: Sendable, Hashable {
        public var id: UInt64
        public var payload: [UInt8]
        public var stampedWithPhoneClock: Bool

        public init(id: UInt64, payload: [UInt8], stampedWithPhoneClock: Bool) {
            self.id = id
            self.payload = payload
            self.stampedWithPhoneClock = stampedWithPhoneClock
        }
    }

    /// Puts new payloads in place of live or parked entries' (times moved: see
    /// `correctPhoneClockStamps(phoneAheadMs:)`); each entry keeps its id, place in the drain order,
    /// state and metadata. Done by a compaction (`compact()`): the new file is written, fsynced and
    /// renamed over the old one, so after a crash every entry has its old payload or every one its
    /// new. An id no longer in the outbox (delivered meanwhile) is skipped.
    public func replacePayloads(_ replacements: [Replacement]) throws(OutboxError) {
        for r in replacements where r.payload.count > options.maxPayloadBytes {
            throw .payloadTooLarge(size: r.payload.count, limit: options.maxPayloadBytes)
        }
        try state.withLock { (st: inout State) throws(OutboxError) in
            var byId: [UInt64: Replacement] = [:]
            for r in replacements where st.entries[r.id] != nil || st.parked[r.id] != nil { byId[r.id] = r }
            guard !byId.isEmpty else { return }
            try compactLocked(&st, replacing: byId)
        }
    }

    /// Records that `id` was sent and awaits its verdict; counts an attempt. Not fsynced (see type docs).
    @discardableResult
    public func markSent(_ id: UInt64) throws(OutboxError) -> OutboxEntry {
        let now = clock.now()
        return try state.withLock { (st: inout State) throws(OutboxError) -> OutboxEntry in
            guard var entry = st.entries[id] else { throw .unknownEntry(id: id) }
            try write(Outbox.stateRecord(id: id, state: Outbox.stateSent, status: 0, at: now), &st, sync: false)
            entry.state = .sentAwaitingVerdict
            entry.attempts += 1
            st.entries[id] = entry
            return entry
        }
    }

    /// Counts a failed attempt without writing anything (e.g. the request could not even be sent).
    public func recordAttempt(_ id: UInt64) {
        state.withLock { st in st.entries[id]?.attempts += 1 }
    }

    /// A final verdict arrived (201/200/409/422/400), or the host is done with a parked entry (it
    /// exported it): the entry leaves the outbox. Fsynced. May compact.
    public func markDone(_ id: UInt64, status: Int) throws(OutboxError) {
        let now = clock.now()
        try state.withLock { (st: inout State) throws(OutboxError) in
            guard let entry = st.entries[id] ?? st.parked[id] else { throw .unknownEntry(id: id) }
            try write(Outbox.stateRecord(id: id, state: Outbox.stateDone, status: Int32(clamping: status), at: now), &st, sync: true)
            st.entries[id] = nil
            st.parked[id] = nil
            st.liveRecordBytes -= entry.recordBytes
            while st.orderHead < st.order.count && st.entries[st.order[st.orderHead]] == nil { st.orderHead += 1 }
            compactIfWorthItQuietly(&st)
        }
    }

    /// Moves a live entry out of the drain order because it can never be delivered as things stand (the
    /// drainer parks an entry of another user or device answered 403): it stays in the file, is listed
    /// by `parkedEntries()` with `status`, and leaves only by `markDone`. Fsynced.
    @discardableResult
    public func park(_ id: UInt64, status: Int) throws(OutboxError) -> OutboxEntry {
        let now = clock.now()
        return try state.withLock { (st: inout State) throws(OutboxError) -> OutboxEntry in
            guard var entry = st.entries[id] else { throw .unknownEntry(id: id) }
            let code = Int32(clamping: status)
            try write(Outbox.stateRecord(id: id, state: Outbox.stateParked, status: code, at: now), &st, sync: true)
            st.entries[id] = nil
            entry.parkedStatus = Int(code)
            st.parked[id] = entry
            while st.orderHead < st.order.count && st.entries[st.order[st.orderHead]] == nil { st.orderHead += 1 }
            return entry
        }
    }

    /// Parked entries (`park`), oldest first: kept until the host exports them and calls `markDone`.
    public func parkedEntries() -> [OutboxEntry] {
        state.withLock { st in st.parked.values.sorted { $0.id < $1.id } }
    }

    /// Replaces the checkpoint (opaque bytes; nil clears it). Fsynced.
    public func saveCheckpoint(_ checkpoint: [UInt8]?) throws(OutboxError) {
        try write([.checkpoint(checkpoint)])
    }

    // MARK: Reading

    /// The latest checkpoint, if any.
    public var checkpoint: [UInt8]? { state.withLock { $0.checkpoint } }

    /// Live entries in drain order (original append order).
    public func entries() -> [OutboxEntry] {
        state.withLock { st in
            var out: [OutboxEntry] = []
            out.reserveCapacity(st.entries.count)
            for i in st.orderHead..<st.order.count {
                if let e = st.entries[st.order[i]] { out.append(e) }
            }
            return out
        }
    }

    /// The oldest live entry: the next one to drain.
    public func first() -> OutboxEntry? {
        state.withLock { st in
            while st.orderHead < st.order.count {
                if let e = st.entries[st.order[st.orderHead]] { return e }
                st.orderHead += 1
            }
            return nil
        }
    }

    /// The oldest live entry appended after entry `id` (ids grow in append order): the next one to drain
    /// when the entries up to `id` stay for a reason of the drain's own.
    public func first(after id: UInt64) -> OutboxEntry? {
        state.withLock { st in
            var low = st.orderHead, high = st.order.count
            while low < high {
                let mid = (low + high) / 2
                if st.order[mid] <= id { low = mid + 1 } else { high = mid }
            }
            for i in low..<st.order.count {
                if let e = st.entries[st.order[i]] { return e }
            }
            return nil
        }
    }

    public var count: Int { state.withLock { $0.entries.count } }
    /// Whether any entry, live or parked, is stamped with the phone's clock (a scan of the index).
    public var hasPhoneClockStamps: Bool {
        state.withLock { st in
            st.entries.values.contains(where: \.stampedWithPhoneClock) || st.parked.values.contains(where: \.stampedWithPhoneClock)
        }
    }
    public var isEmpty: Bool { count == 0 }
    /// Current file size in bytes.
    public var fileSize: Int64 { state.withLock { $0.fileSize } }
    public var compactionCount: Int { state.withLock { $0.compactions } }

    /// The stored payload of a live or parked entry.
    public func payload(of id: UInt64) throws(OutboxError) -> [UInt8] {
        try state.withLock { (st: inout State) throws(OutboxError) -> [UInt8] in
            guard !st.closed else { throw .closed }
            guard let e = st.entries[id] ?? st.parked[id] else { throw .unknownEntry(id: id) }
            return try FileIO.read(st.fd, count: e.payloadLength, at: e.payloadOffset, path: path)
        }
    }

    // MARK: Compaction

    /// Rewrites the file with only the live entries and the checkpoint.
    public func compact() throws(OutboxError) {
        try state.withLock { (st: inout State) throws(OutboxError) in try compactLocked(&st, replacing: [:]) }
    }

    /// `compactIfWorthIt` after a write that is already durable: a compaction that fails (a full disk)
    /// leaves the file as it was and is tried again after the next such write; the write stands.
    private func compactIfWorthItQuietly(_ st: inout State) {
        do { try compactIfWorthIt(&st) } catch {}
    }

    private func compactIfWorthIt(_ st: inout State) throws(OutboxError) {
        let live = st.liveRecordBytes + Int64(Outbox.magic.count) + Int64(st.checkpoint?.count ?? 0)
        let dead = st.fileSize - live
        if dead > options.compactionMinDeadBytes && dead > live {
            try compactLocked(&st, replacing: [:])
        }
    }

    /// Rewrites the file with the live entries (those in `replacing` with their new payload and mark)
    /// and the checkpoint.
    private func compactLocked(_ st: inout State, replacing: [UInt64: Replacement]) throws(OutboxError) {
        guard !st.closed else { throw .closed }
        let tmpPath = path + ".compact"
        FileIO.unlink(tmpPath)
        let tmp = try FileIO.open(tmpPath, flags: O_RDWR | O_CREAT | O_TRUNC)
        var newEntries: [UInt64: OutboxEntry] = [:]
        var newParked: [UInt64: OutboxEntry] = [:]
        var newOrder: [UInt64] = []
        var offset: Int64 = 0
        var liveBytes: Int64 = 0
        do throws(OutboxError) {
            var buffer = ByteWriter(capacity: 1 << 20)
            func flush() throws(OutboxError) {
                try FileIO.write(tmp, buffer.bytes, at: offset, path: tmpPath)
                offset += Int64(buffer.bytes.count)
                buffer.bytes.removeAll(keepingCapacity: true)
            }
            buffer.raw(Outbox.magic)
            let now = clock.now()
            // Copies one entry's APPEND record (and its states) into the new file; returns it as moved.
            func copy(_ e: OutboxEntry) throws(OutboxError) -> OutboxEntry {
                let replacement = replacing[e.id]
                let payload: [UInt8]
                if let replacement {
                    payload = replacement.payload
                } else {
                    payload = try FileIO.read(st.fd, count: e.payloadLength, at: e.payloadOffset, path: path)
                }
                let phoneClock = replacement?.stampedWithPhoneClock ?? e.stampedWithPhoneClock
                let record = Outbox.appendRecord(
                    id: e.id, createdAt: e.createdAt, kind: e.kind, evictable: e.evictable, phoneClock: phoneClock,
                    payload: payload, checkpoint: nil)
                let recordStart = offset + Int64(buffer.bytes.count)
                buffer.raw(record)
                let moved = OutboxEntry(
                    id: e.id, createdAt: e.createdAt, kind: e.kind, evictable: e.evictable, state: e.state,
                    attempts: e.attempts, payloadLength: payload.count, parkedStatus: e.parkedStatus,
                    stampedWithPhoneClock: phoneClock, payloadOffset: recordStart + Outbox.payloadOffsetInRecord,
                    recordBytes: Int64(record.count))
                if e.state == .sentAwaitingVerdict {
                    buffer.raw(Outbox.stateRecord(id: e.id, state: Outbox.stateSent, status: 0, at: now))
                }
                if let status = e.parkedStatus {
                    buffer.raw(Outbox.stateRecord(id: e.id, state: Outbox.stateParked, status: Int32(clamping: status), at: now))
                }
                liveBytes += moved.recordBytes
                if buffer.bytes.count >= 1 << 20 { try flush() }
                return moved
            }
            for e in st.parked.values.sorted(by: { $0.id < $1.id }) {
                newParked[e.id] = try copy(e)
            }
            for i in st.orderHead..<st.order.count {
                guard let e = st.entries[st.order[i]] else { continue }
                newEntries[e.id] = try copy(e)
                newOrder.append(e.id)
            }
            if st.checkpoint != nil { buffer.raw(Outbox.checkpointRecord(st.checkpoint)) }
            try flush()
            try FileIO.fsync(tmp, path: tmpPath)
            try FileIO.rename(tmpPath, path)
        } catch {
            FileIO.close(tmp)
            FileIO.unlink(tmpPath)
            throw error
        }
        // The rename succeeded: `path` now names the new file and the old one is unlinked. From here on
        // every write goes to the new file, whatever the directory fsync says; writing on into the old,
        // unlinked file would lose everything written after this point at the next open.
        FileIO.close(st.fd)
        st.fd = tmp
        st.fileSize = offset
        st.entries = newEntries
        st.parked = newParked
        st.order = newOrder
        st.orderHead = 0
        st.liveRecordBytes = liveBytes
        st.compactions += 1
        st.directorySyncPending = true
        try syncDirectory(path)
        st.directorySyncPending = false
    }
}
