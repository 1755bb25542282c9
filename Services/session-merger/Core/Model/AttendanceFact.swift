import AttendanceProtocol
import Foundation

/// One accepted attendance event, normalized for the session model: whichever endpoint it came
/// through (`/events`, `/check-in`, `/check-out`, `/heartbeat`), what it does, when it happened and
/// which session the device says it belongs to.
package struct AttendanceFact: Codable, Hashable, Sendable {
    /// What the event does to a session.
    package enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        case checkIn = "check_in"
        case heartbeat
        case checkOut = "check_out"

        package init(_ type: AttendanceEventType) {
            switch type {
            case .checkin: self = .checkIn
            case .checkout: self = .checkOut
            case .heartbeat: self = .heartbeat
            }
        }

        /// Whether it shows the user present (check-ins and heartbeats do; a check-out ends presence).
        package var isPresence: Bool { self != .checkOut }

        /// Among events at the same instant: the check-out first, so presence at that very instant
        /// follows it (and cancels it as noise); then the check-in, then the heartbeat.
        var rank: Int {
            switch self {
            case .checkOut: return 0
            case .checkIn: return 1
            case .heartbeat: return 2
            }
        }
    }

    /// The event's unique key (the `Idempotency-Key`): the dedupe key of the whole pipeline.
    package var idempotencyKey: String
    package var userId: String
    package var siteId: String
    package var kind: Kind
    /// When it happened on the device, at the protocol's millisecond precision. Sessions are built by it.
    package var eventTime: Date
    /// The device's session key (the session contracts), when it sent one.
    package var sessionKey: String?
    /// The beacon (`UUID:major:minor`) or gate the event was taken at, when known.
    package var gateId: String?
    /// When the gateway received it. Only advances the timeline's clock.
    package var receivedAt: Date

    package init(
        idempotencyKey: String, userId: String, siteId: String, kind: Kind, eventTime: Date,
        sessionKey: String? = nil, gateId: String? = nil, receivedAt: Date
    ) {
        self.idempotencyKey = idempotencyKey
        self.userId = userId
        self.siteId = siteId
        self.kind = kind
        self.eventTime = WireTimestamp.truncatedToWirePrecision(eventTime)
        self.sessionKey = sessionKey
        self.gateId = gateId
        self.receivedAt = WireTimestamp.truncatedToWirePrecision(receivedAt)
    }

    /// The fact of an event the policy service accepted.
    ///
    /// - The user is the authenticated one (`raw.userId`), never the body's.
    /// - The site is the gateway's (`raw.siteId`), else the body's (events and check-ins carry one),
    ///   else `siteForSessionKey(sessionKey)`: check-out and heartbeat contracts carry only a session
    ///   key, so the merger resolves the site from the session that key opened.
    /// - The event time is the device's (`timestamp` / `ts`), not the receipt time.
    ///
    /// Throws `.rejectedByPolicy` for a rejected event (the merger records it and answers 409; it never
    /// touches a session) and `.unknownSite` when no site can be found.
    package init(
        vetted: VettedEvent, siteForSessionKey: (String) -> String? = { _ in nil }
    ) throws(FactMappingError) {
        try self.init(record: VettedEventRecord(vetted), siteForSessionKey: siteForSessionKey)
    }

    /// The same from what the merger decodes of a vetted event (`VettedEventRecord`).
    package init(
        record: VettedEventRecord, siteForSessionKey: (String) -> String? = { _ in nil }
    ) throws(FactMappingError) {
        let raw = record.raw
        guard record.decision.outcome == .accept else {
            throw .rejectedByPolicy(idempotencyKey: raw.idempotencyKey, reasons: record.decision.reasons)
        }
        let payload = raw.payload
        let site = raw.siteId ?? payload.siteId ?? payload.sessionKey.flatMap(siteForSessionKey)
        guard let site, !site.isEmpty else {
            throw .unknownSite(idempotencyKey: raw.idempotencyKey, sessionKey: payload.sessionKey)
        }
        self.init(
            idempotencyKey: raw.idempotencyKey, userId: raw.userId, siteId: site, kind: Kind(payload.eventType),
            eventTime: payload.eventTime, sessionKey: payload.sessionKey, gateId: payload.beacon?.canonicalId,
            receivedAt: raw.receivedAt)
    }

    /// The total order sessions are derived in: event time, then kind (`rank`), then idempotency key.
    static func precedes(_ a: StoredFact, _ b: StoredFact) -> Bool {
        if a.time != b.time { return a.time < b.time }
        if a.kind != b.kind { return a.kind.rank < b.kind.rank }
        return a.key < b.key
    }
}

/// Why a vetted event has no fact.
package enum FactMappingError: Error, Hashable, Sendable {
    /// The policy service rejected it: recorded and answered 409, never part of a session.
    case rejectedByPolicy(idempotencyKey: String, reasons: [String])
    /// No site on the envelope or the body, and the session key resolves to none.
    case unknownSite(idempotencyKey: String, sessionKey: String?)
}

/// What a timeline keeps of a fact: the fields sessions are derived from. User and site are the
/// timeline's; gate and receipt time are not needed again (the merger's events table has them).
struct StoredFact: Hashable, Sendable {
    var key: String
    var kind: AttendanceFact.Kind
    /// Milliseconds since 1970.
    var time: Int64
    var sessionKey: String?
}

extension StoredFact {
    init(_ fact: AttendanceFact) {
        self.init(key: fact.idempotencyKey, kind: fact.kind, time: Millis(fact.eventTime), sessionKey: fact.sessionKey)
    }

    /// Same event content (a retry); the receipt time may differ.
    func sameContent(as fact: AttendanceFact) -> Bool {
        kind == fact.kind && time == Millis(fact.eventTime) && sessionKey == fact.sessionKey
    }
}

/// Times inside the model are whole milliseconds since 1970: exact, ordered, compact to persist.
typealias Millis = Int64

extension Int64 {
    init(_ date: Date) {
        self = Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    init(seconds: TimeInterval) {
        self = Int64((seconds * 1000).rounded())
    }

    var date: Date { Date(timeIntervalSince1970: Double(self) / 1000) }
}
