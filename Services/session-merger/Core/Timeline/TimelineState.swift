import AttendanceProtocol
import Foundation

/// Everything a timeline must remember between transactions, `Codable`.
///
/// Two ways to persist it per (user, site):
/// - the whole state in one row (`JSONEncoder().encode(state)`): simplest, but it carries the events
///   (about 90 bytes each; 8 days of 5-minute heartbeats is about 75 KB);
/// - only the `header` (a few KB: clock, watermark, the reported sessions) in a row, with the events
///   read back from the merger's events table when the timeline is not in memory:
///   `TimelineState(header:events:)` with this user's and site's events at or after `header.watermark`.
///   The events are written to that table anyway, so nothing is stored twice.
///
/// - `facts`: the events inside the horizon, as `[idempotencyKey, kind, eventTimeMs, sessionKey?]` arrays.
/// - `clock`, `watermark`: milliseconds since 1970.
/// - `sessions`: what was last *reported* for each session (its version and a digest of its events),
///   the baseline the next change is computed against. Derived sessions are not stored: they are a
///   function of the facts and the clock.
/// - `retired`: ids of superseded sessions with their last version, so an id that comes back keeps
///   counting versions upward.
///
/// Encode it with any `JSONEncoder`; the encoding has no dates and no dictionaries, so it is the same
/// bytes for the same state (with `.sortedKeys`).
package struct TimelineState: Codable, Hashable, Sendable {
    package static let formatVersion = 1

    package let userId: String
    package let siteId: String
    var facts: [StoredFact]
    var clock: Millis?
    /// The latest `receivedAt` of the events applied (nil in a state written before it was kept).
    var received: Millis?
    var watermark: Millis?
    var sessions: [SessionRecord]
    var retired: [RetiredSession]

    init(userId: String, siteId: String) {
        self.init(header: Header(userId: userId, siteId: siteId, sessions: [], retired: []), facts: [])
    }

    private init(header: Header, facts: [StoredFact]) {
        (userId, siteId, clock, received, watermark) = (header.userId, header.siteId, header.clock, header.received, header.watermark)
        (sessions, retired, self.facts) = (header.sessions, header.retired, facts)
    }

    /// Events held (inside the horizon).
    package var factCount: Int { facts.count }

    /// The state without its events.
    package var header: Header {
        Header(
            userId: userId, siteId: siteId, clock: clock, received: received, watermark: watermark, sessions: sessions, retired: retired)
    }

    /// A state from its header and the events the merger recorded for this (user, site): events of other
    /// users or sites, events before the watermark (recorded as beyond the horizon) and repeated keys
    /// are left out; order does not matter.
    package init(header: Header, events: [AttendanceFact]) {
        var seen = Set<String>()
        let facts =
            events
            .filter { $0.userId == header.userId && $0.siteId == header.siteId && seen.insert($0.idempotencyKey).inserted }
            .map(StoredFact.init)
            .filter { header.watermark == nil || $0.time >= header.watermark! }
            .sorted(by: AttendanceFact.precedes)
        self.init(header: header, facts: facts)
    }

    /// Everything but the events: clock, watermark, the reported sessions and retired ids.
    package struct Header: Codable, Hashable, Sendable {
        var format = TimelineFormat()
        package let userId: String
        package let siteId: String
        var clock: Millis?
        var received: Millis?
        var watermark: Millis?
        var sessions: [SessionRecord]
        var retired: [RetiredSession]

        /// The oldest event time the timeline needs back (`nil`: all of this user's and site's events).
        package var watermarkDate: Date? { watermark?.date }

        enum CodingKeys: String, CodingKey {
            case format = "v", userId, siteId, clock, received, watermark, sessions, retired
        }
    }

    /// The key of the events, written beside the header's keys in the same object.
    enum FactsKey: String, CodingKey { case facts }

    /// The header's fields, then the events: one JSON object.
    package init(from decoder: any Decoder) throws {
        let header = try Header(from: decoder)
        let decoded = try decoder.container(keyedBy: FactsKey.self).decode([StoredFact].self, forKey: .facts)
        // Whatever wrote it, the sweep needs the canonical order and unique keys.
        var seen = Set<String>()
        self.init(header: header, facts: decoded.sorted(by: AttendanceFact.precedes).filter { seen.insert($0.key).inserted })
    }

    package func encode(to encoder: any Encoder) throws {
        try header.encode(to: encoder)
        var c = encoder.container(keyedBy: FactsKey.self)
        try c.encode(facts, forKey: .facts)
    }
}

/// The `v` of a stored timeline: written as `TimelineState.formatVersion`; any other is refused.
struct TimelineFormat: Codable, Hashable, Sendable {
    init() {}

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let version = try c.decode(Int.self)
        guard version == TimelineState.formatVersion else {
            throw DecodingError.dataCorruptedError(
                in: c, debugDescription: "timeline format \(version) is not \(TimelineState.formatVersion)")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(TimelineState.formatVersion)
    }
}

extension StoredFact: Codable {
    private static func code(_ kind: AttendanceFact.Kind) -> String {
        switch kind {
        case .checkIn: return "i"
        case .heartbeat: return "h"
        case .checkOut: return "o"
        }
    }

    init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        let key = try c.decode(String.self)
        let code = try c.decode(String.self)
        let kind: AttendanceFact.Kind
        switch code {
        case "i": kind = .checkIn
        case "h": kind = .heartbeat
        case "o": kind = .checkOut
        default:
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "unknown fact kind \"\(code)\" (i, h, o)")
        }
        let time = try c.decode(Int64.self)
        var sessionKey: String?
        if !c.isAtEnd, try !c.decodeNil() { sessionKey = try c.decode(String.self) }
        self.init(key: key, kind: kind, time: time, sessionKey: sessionKey)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(key)
        try c.encode(Self.code(kind))
        try c.encode(time)
        if let sessionKey { try c.encode(sessionKey) }
    }
}

/// What was last reported for a session: the baseline for the next diff.
struct SessionRecord: Codable, Hashable, Sendable {
    var id: String
    var version: Int64
    var anchorKey: String
    var status: SessionStatus
    var checkInAt: Millis
    var lastSeenAt: Millis
    var checkOutAt: Millis?
    var closeReason: String?
    var reopenCount: Int
    var keys: [String]
    var eventCount: Int
    /// FNV-1a 64 of the event ids, hex: detects a changed membership with an unchanged count.
    var eventDigest: String

    /// Same reported content, whatever the version.
    func sameContent(as other: SessionRecord) -> Bool {
        var a = self, b = other
        a.version = 0
        b.version = 0
        return a == b
    }

    static func digest(_ ids: [String]) -> String {
        var hash = FNV1a()
        for id in ids {
            hash.combine(id.utf8)
            hash.combine(0x1f)
        }
        let hex = String(hash.value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// A superseded session id and the last version it was reported with.
struct RetiredSession: Codable, Hashable, Sendable {
    var id: String
    var version: Int64
    var anchorTime: Millis
}
