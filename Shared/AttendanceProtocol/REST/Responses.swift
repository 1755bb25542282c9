import Foundation

/// The body of 201 (accepted), 200 (replay or duplicate: the original receipt) and 202 (durably
/// queued, no verdict yet: poll `statusUrl`) for an event or a session contract.
public struct AcceptedResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    /// Absent while queued.
    public var serverReceiptId: String?
    public var sessionId: String?
    public var status: AcceptanceStatus
    /// `GET /v1/attendance/events/{idempotencyKey}`, for a queued request.
    public var statusUrl: String?

    public init(serverReceiptId: String? = nil, sessionId: String? = nil, status: AcceptanceStatus, statusUrl: String? = nil) {
        self.serverReceiptId = serverReceiptId
        self.sessionId = sessionId
        self.status = status
        self.statusUrl = statusUrl
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, serverReceiptId, sessionId, status, statusUrl
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        serverReceiptId = try c.decodeIfPresent(String.self, forKey: .serverReceiptId)
        sessionId = try c.decodeIfPresent(String.self, forKey: .sessionId)
        status = try c.decode(AcceptanceStatus.self, forKey: .status)
        statusUrl = try c.decodeIfPresent(String.self, forKey: .statusUrl)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(serverReceiptId, forKey: .serverReceiptId)
        try c.encodeIfPresent(sessionId, forKey: .sessionId)
        try c.encode(status, forKey: .status)
        try c.encodeIfPresent(statusUrl, forKey: .statusUrl)
    }
}

public enum AcceptanceStatus: String, ClosedWireEnum {
    /// Recorded (201, or 200 when replayed).
    case accepted
    /// Already recorded by an earlier request with the same key (200).
    case duplicate
    /// Durably queued; the verdict is not known yet (202). Retry with the same key or poll.
    case queued

    public var httpStatus: Int {
        switch self {
        case .accepted: return 201
        case .duplicate: return 200
        case .queued: return 202
        }
    }
}

/// `GET /v1/attendance/events/{idempotencyKey}`: what became of an earlier request.
public struct EventOutcomeResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var idempotencyKey: String
    public var status: EventOutcomeStatus
    /// The status the original request was (or will be) answered with.
    public var httpStatus: Int
    public var serverReceiptId: String?
    public var sessionId: String?
    public var reasons: [String]?
    public var action: AppAction?
    public var eventTime: Date?
    public var receivedAt: Date
    public var decidedAt: Date?

    public init(
        idempotencyKey: String, status: EventOutcomeStatus, httpStatus: Int, serverReceiptId: String? = nil,
        sessionId: String? = nil, reasons: [String]? = nil, action: AppAction? = nil, eventTime: Date? = nil,
        receivedAt: Date, decidedAt: Date? = nil
    ) {
        self.idempotencyKey = idempotencyKey
        self.status = status
        self.httpStatus = httpStatus
        self.serverReceiptId = serverReceiptId
        self.sessionId = sessionId
        self.reasons = reasons
        self.action = action
        self.eventTime = eventTime
        self.receivedAt = receivedAt
        self.decidedAt = decidedAt
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, idempotencyKey, status, httpStatus, serverReceiptId, sessionId, reasons, action
        case eventTime, receivedAt, decidedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        idempotencyKey = try c.decode(String.self, forKey: .idempotencyKey)
        status = try c.decode(EventOutcomeStatus.self, forKey: .status)
        httpStatus = try c.decode(Int.self, forKey: .httpStatus)
        serverReceiptId = try c.decodeIfPresent(String.self, forKey: .serverReceiptId)
        sessionId = try c.decodeIfPresent(String.self, forKey: .sessionId)
        reasons = try c.decodeIfPresent([String].self, forKey: .reasons)
        action = try c.decodeIfPresent(AppAction.self, forKey: .action)
        eventTime = try c.decodeTimestampIfPresent(forKey: .eventTime)
        receivedAt = try c.decodeTimestamp(forKey: .receivedAt)
        decidedAt = try c.decodeTimestampIfPresent(forKey: .decidedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(idempotencyKey, forKey: .idempotencyKey)
        try c.encode(status, forKey: .status)
        try c.encode(httpStatus, forKey: .httpStatus)
        try c.encodeIfPresent(serverReceiptId, forKey: .serverReceiptId)
        try c.encodeIfPresent(sessionId, forKey: .sessionId)
        try c.encodeIfPresent(reasons, forKey: .reasons)
        try c.encodeIfPresent(action, forKey: .action)
        try c.encodeTimestampIfPresent(eventTime, forKey: .eventTime)
        try c.encodeTimestamp(receivedAt, forKey: .receivedAt)
        try c.encodeTimestampIfPresent(decidedAt, forKey: .decidedAt)
    }
}

public enum EventOutcomeStatus: String, ClosedWireEnum {
    /// Received, no verdict yet.
    case pending
    case accepted
    case rejected
    /// The key was reused with a different payload.
    case payloadMismatch = "payload_mismatch"
}

/// `GET /v1/attendance/pending?since=`: what the server holds for this device since a time
/// (docs/SPECIFICATION.md, "3. Device API"), so the app can reconcile its outbox and show its sessions.
public struct PendingResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var deviceId: String
    public var since: Date
    /// The server time the answer was built at: the next `since`.
    public var asOf: Date
    /// Every request from this device received since `since`, oldest first.
    public var events: [EventOutcomeResponse]
    /// The user's sessions that are open or in soft exit.
    public var openSessions: [SessionSummary]

    public init(deviceId: String, since: Date, asOf: Date, events: [EventOutcomeResponse], openSessions: [SessionSummary]) {
        self.deviceId = deviceId
        self.since = since
        self.asOf = asOf
        self.events = events
        self.openSessions = openSessions
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, deviceId, since, asOf, events, openSessions
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        deviceId = try c.decode(String.self, forKey: .deviceId)
        since = try c.decodeTimestamp(forKey: .since)
        asOf = try c.decodeTimestamp(forKey: .asOf)
        events = try c.decode([EventOutcomeResponse].self, forKey: .events)
        openSessions = try c.decode([SessionSummary].self, forKey: .openSessions)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encodeTimestamp(since, forKey: .since)
        try c.encodeTimestamp(asOf, forKey: .asOf)
        try c.encode(events, forKey: .events)
        try c.encode(openSessions, forKey: .openSessions)
    }
}

/// A session as the app shows it.
public struct SessionSummary: Codable, Hashable, Sendable {
    public var sessionId: String
    public var siteId: String
    public var sessionKey: String?
    public var state: SessionState
    public var checkInAt: Date
    public var checkOutAt: Date?
    public var lastSeenAt: Date?

    public init(
        sessionId: String, siteId: String, sessionKey: String? = nil, state: SessionState, checkInAt: Date,
        checkOutAt: Date? = nil, lastSeenAt: Date? = nil
    ) {
        self.sessionId = sessionId
        self.siteId = siteId
        self.sessionKey = sessionKey
        self.state = state
        self.checkInAt = checkInAt
        self.checkOutAt = checkOutAt
        self.lastSeenAt = lastSeenAt
    }

    enum CodingKeys: String, CodingKey {
        case sessionId, siteId, sessionKey, state, checkInAt, checkOutAt, lastSeenAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sessionId = try c.decode(String.self, forKey: .sessionId)
        siteId = try c.decode(String.self, forKey: .siteId)
        sessionKey = try c.decodeIfPresent(String.self, forKey: .sessionKey)
        state = try c.decode(SessionState.self, forKey: .state)
        checkInAt = try c.decodeTimestamp(forKey: .checkInAt)
        checkOutAt = try c.decodeTimestampIfPresent(forKey: .checkOutAt)
        lastSeenAt = try c.decodeTimestampIfPresent(forKey: .lastSeenAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sessionId, forKey: .sessionId)
        try c.encode(siteId, forKey: .siteId)
        try c.encodeIfPresent(sessionKey, forKey: .sessionKey)
        try c.encode(state, forKey: .state)
        try c.encodeTimestamp(checkInAt, forKey: .checkInAt)
        try c.encodeTimestampIfPresent(checkOutAt, forKey: .checkOutAt)
        try c.encodeTimestampIfPresent(lastSeenAt, forKey: .lastSeenAt)
    }
}

public enum SessionState: String, ClosedWireEnum {
    case open
    case softExit = "soft_exit"
    case closed
}

/// `GET /v1/attendance/challenge?beacon=`: a short-lived nonce for the GATT challenge-response.
/// The device returns it with HMAC(nonce, beacon key) in the event's `gatt` member.
public struct ChallengeResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    /// The beacon as `UUID:major:minor` (`BeaconIdentity.canonicalId`).
    public var beaconId: String
    public var nonce: String
    public var expiresAt: Date

    public init(beaconId: String, nonce: String, expiresAt: Date) {
        self.beaconId = beaconId
        self.nonce = nonce
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, beaconId, nonce, expiresAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        beaconId = try c.decode(String.self, forKey: .beaconId)
        nonce = try c.decode(String.self, forKey: .nonce)
        expiresAt = try c.decodeTimestamp(forKey: .expiresAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(beaconId, forKey: .beaconId)
        try c.encode(nonce, forKey: .nonce)
        try c.encodeTimestamp(expiresAt, forKey: .expiresAt)
    }
}
