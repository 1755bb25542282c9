#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// JSON coding of what PresenceKit stores in the outbox: `AttendanceEvent` payloads and the
/// `PresenceSnapshot` checkpoint. Sorted keys, so equal values give byte-identical payloads.
public enum PresenceCoding {
    static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }

    public static func encode(_ event: AttendanceEvent) -> [UInt8] {
        // Encoding a value made only of strings, numbers and arrays cannot fail.
        Array(try! encoder().encode(event))
    }

    /// Decodes a stored event. An empty `rssiSeries` (stored by earlier versions) comes back nil, so a
    /// host mapping it to the REST payload leaves the member out instead of sending a refused `[]`.
    public static func decodeEvent(_ bytes: [UInt8]) throws -> AttendanceEvent {
        var event = try JSONDecoder().decode(AttendanceEvent.self, from: Data(bytes))
        if event.rssiSeries?.isEmpty == true { event.rssiSeries = nil }
        return event
    }

    public static func encode(_ snapshot: PresenceSnapshot) -> [UInt8] {
        Array(try! encoder().encode(snapshot))
    }

    public static func decodeSnapshot(_ bytes: [UInt8]) throws -> PresenceSnapshot {
        try JSONDecoder().decode(PresenceSnapshot.self, from: Data(bytes))
    }
}

extension AttendanceEvent.Kind {
    /// The `OutboxEntry.kind` code of each event type.
    public var outboxKind: UInt8 {
        switch self {
        case .checkIn: return 1
        case .checkOut: return 2
        case .heartbeat: return 3
        }
    }
}

extension Outbox {
    /// Stores the durable effects of one `handle` call, in order: each post becomes an entry, carrying
    /// as its checkpoint the `persistSnapshot` that follows it in the same batch (one record, so the
    /// event and the session state that goes with it survive a crash together); a snapshot with no post
    /// before it is saved on its own; `.correctPhoneClockStamps` and `.phoneClockSet` move the times of
    /// the entries stamped with the phone's clock, the stored ones and this call's posts before them.
    /// Heartbeats are evictable, check-ins and check-outs are not. Other effects are ignored. Returns
    /// the new entries.
    ///
    /// All or nothing for the posts and snapshots: they are one write (`write(_:)`), made after the
    /// clock corrections (each a compaction of the stored entries), so when anything throws none of them
    /// is stored, and the host keeps the machine as it was before the call (`PresenceAgent`'s
    /// `storingIn:` calls do) and gets the same posts again, never a second copy of one already stored.
    /// A correction onto the server's clock unmarks what it moves, so done again it moves nothing; a
    /// `.phoneClockSet` whose compaction succeeded before the write failed is moved again when the host
    /// repeats the call.
    @discardableResult
    public func store(_ effects: [PresenceEffect]) throws(OutboxError) -> [OutboxEntry] {
        enum Pending {
            case event(AttendanceEvent, checkpoint: [UInt8]?)
            case checkpoint([UInt8]?)
        }
        var pending: [Pending] = []
        /// Moves this call's posts so far as the stored entries were just moved.
        func movePending(byMs shift: Int64, epoch: String?, ontoServerClock: Bool) {
            for i in pending.indices {
                guard case .event(var event, let checkpoint) = pending[i] else { continue }
                guard Self.move(&event, byMs: shift, epoch: epoch, ontoServerClock: ontoServerClock) else { continue }
                pending[i] = .event(event, checkpoint: checkpoint)
            }
        }
        var consumed = Set<Int>()
        for (i, effect) in effects.enumerated() {
            let event: AttendanceEvent
            switch effect {
            case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e):
                event = e
            case .persistSnapshot(let snapshot):
                if !consumed.contains(i) { pending.append(.checkpoint(PresenceCoding.encode(snapshot))) }
                continue
            case .correctPhoneClockStamps(let phoneAheadMs):
                try correctPhoneClockStamps(phoneAheadMs: phoneAheadMs)
                movePending(byMs: -phoneAheadMs, epoch: nil, ontoServerClock: true)
                continue
            case .phoneClockSet(let byMs, let epoch):
                try movePhoneClockStamps(byMs: byMs, epoch: epoch)
                movePending(byMs: byMs, epoch: epoch, ontoServerClock: false)
                continue
            default:
                continue
            }
            var checkpoint: [UInt8]?
            var j = i + 1
            scan: while j < effects.count {
                switch effects[j] {
                case .postCheckIn, .postCheckOut, .postHeartbeat:
                    break scan
                case .persistSnapshot(let snapshot):
                    checkpoint = PresenceCoding.encode(snapshot)
                    consumed.insert(j)
                    break scan
                default:
                    j += 1
                }
            }
            pending.append(.event(event, checkpoint: checkpoint))
        }
        return try write(
            pending.map { item in
                switch item {
                case .event(let event, let checkpoint):
                    return .event(
                        PresenceCoding.encode(event), kind: event.type.outboxKind, evictable: event.type == .heartbeat,
                        stampedWithPhoneClock: event.phoneClock != nil, checkpoint: checkpoint)
                case .checkpoint(let bytes):
                    return .checkpoint(bytes)
                }
            })
    }

    /// Moves the times of every entry (live or parked) stamped with the phone's own clock back by
    /// `phoneAheadMs` (how far the phone's clock reads ahead of the server's), onto the server's clock,
    /// and unmarks them: the drainer sends them from then on. One compaction for all
    /// (`replacePayloads`); a payload that is not an event is unmarked as it is. Returns how many
    /// entries changed (0, writing nothing, when none is marked).
    ///
    /// The idempotency key stays: the server cannot tell it from the times (it holds a nonce), and
    /// the drainer never sent a marked entry, so the server holds no copy with the phone's times.
    @discardableResult
    public func correctPhoneClockStamps(phoneAheadMs: Int64) throws(OutboxError) -> Int {
        try movePhoneClockStamps(byMs: -phoneAheadMs, epoch: nil, ontoServerClock: true)
    }

    /// Moves the marked times (`AttendanceEvent.phoneClock`) of the entries stamped with the phone's
    /// clock by `byMs`: those of `epoch` (the phone's clock was set by as much while that process ran:
    /// they stay marked), or, `ontoServerClock`, every one, corrected onto the server's (unmarked).
    /// An entry that left meanwhile is skipped. Not to be run concurrently with itself (the host's
    /// `store` calls are serial). Returns how many entries changed.
    @discardableResult
    public func movePhoneClockStamps(byMs shift: Int64, epoch: String?, ontoServerClock: Bool = false) throws(OutboxError) -> Int {
        guard hasPhoneClockStamps else { return 0 }
        var replacements: [Replacement] = []
        for entry in entries() + parkedEntries() where entry.stampedWithPhoneClock {
            let bytes: [UInt8]
            do {
                bytes = try payload(of: entry.id)
            } catch .unknownEntry {
                continue
            }
            guard var event = try? PresenceCoding.decodeEvent(bytes) else {
                if ontoServerClock { replacements.append(Replacement(id: entry.id, payload: bytes, stampedWithPhoneClock: false)) }
                continue
            }
            guard Self.move(&event, byMs: shift, epoch: epoch, ontoServerClock: ontoServerClock) else { continue }
            replacements.append(
                Replacement(id: entry.id, payload: PresenceCoding.encode(event), stampedWithPhoneClock: event.phoneClock != nil))
        }
        try replacePayloads(replacements)
        return replacements.count
    }

    /// Moves the marked times of `event` as `movePhoneClockStamps` does; false when it is not to move
    /// (another epoch's).
    static func move(_ event: inout AttendanceEvent, byMs shift: Int64, epoch: String?, ontoServerClock: Bool) -> Bool {
        if !ontoServerClock && event.phoneClockEpoch != epoch { return false }
        let marks = event.phoneClock ?? []
        if marks.contains(.timestamp) { event.timestamp = event.timestamp + shift }
        if marks.contains(.tStart) { event.tStart = event.tStart + shift }
        if marks.contains(.decidedAt) { event.decidedAt = event.decidedAt + shift }
        if ontoServerClock {
            event.phoneClock = nil
            event.phoneClockEpoch = nil
        }
        return true
    }

    /// The last persisted `PresenceSnapshot`, decoded (nil when none or unreadable).
    public func lastSnapshot() -> PresenceSnapshot? {
        guard let bytes = checkpoint else { return nil }
        return try? PresenceCoding.decodeSnapshot(bytes)
    }
}
