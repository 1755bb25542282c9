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
    /// before it is saved on its own; `.correctPhoneClockStamps` corrects the entries stamped with the
    /// phone's clock. Heartbeats are evictable, check-ins and check-outs are not. Other effects are
    /// ignored. Returns the new entries.
    @discardableResult
    public func store(_ effects: [PresenceEffect]) throws(OutboxError) -> [OutboxEntry] {
        var stored: [OutboxEntry] = []
        var consumed = Set<Int>()
        for (i, effect) in effects.enumerated() {
            let event: AttendanceEvent
            switch effect {
            case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e):
                event = e
            case .persistSnapshot(let snapshot):
                if !consumed.contains(i) { try saveCheckpoint(PresenceCoding.encode(snapshot)) }
                continue
            case .correctPhoneClockStamps(let phoneAheadMs):
                try correctPhoneClockStamps(phoneAheadMs: phoneAheadMs)
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
            let entry = try append(
                PresenceCoding.encode(event), kind: event.type.outboxKind, evictable: event.type == .heartbeat,
                stampedWithPhoneClock: event.phoneClock == true, checkpoint: checkpoint)
            stored.append(entry)
        }
        return stored
    }

    /// Moves the times of every live entry stamped with the phone's own clock back by `phoneAheadMs`
    /// (how far the phone's clock reads ahead of the server's), onto the server's clock, and clears
    /// their mark (`replacePayloads`: one fsync). Undecodable payloads are left as they are. Returns how
    /// many were corrected.
    ///
    /// The idempotency key stays: the server cannot tell it from the times (it holds a nonce), and if
    /// it already holds a copy stamped with the phone's clock (an attempt whose answer was lost), the
    /// corrected one is answered 422 and the first copy stands: nothing is recorded twice.
    @discardableResult
    public func correctPhoneClockStamps(phoneAheadMs: Int64) throws(OutboxError) -> Int {
        var replacements: [(id: UInt64, payload: [UInt8])] = []
        for entry in entries() where entry.stampedWithPhoneClock {
            let bytes = try payload(of: entry.id)
            guard var event = try? PresenceCoding.decodeEvent(bytes) else { continue }
            event.timestamp = event.timestamp - phoneAheadMs
            event.tStart = event.tStart - phoneAheadMs
            event.decidedAt = event.decidedAt - phoneAheadMs
            event.phoneClock = nil
            replacements.append((entry.id, PresenceCoding.encode(event)))
        }
        try replacePayloads(replacements)
        return replacements.count
    }

    /// The last persisted `PresenceSnapshot`, decoded (nil when none or unreadable).
    public func lastSnapshot() -> PresenceSnapshot? {
        guard let bytes = checkpoint else { return nil }
        return try? PresenceCoding.decodeSnapshot(bytes)
    }
}
