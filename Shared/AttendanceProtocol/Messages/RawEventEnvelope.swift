import Foundation

/// A device request as the gateway accepted it, on `attendance.events.raw` (key: user id).
///
/// It carries what only the gateway knows: the authenticated user and device, when and by which
/// gateway instance it was received (so the verdict finds its way back), the request id, the
/// `X-App-Version` header and the fingerprint of the payload (for 422 on a reused key).
public struct RawEventEnvelope: TopicMessage {
    public static let topic = Topic.rawEvents
    public static let schemaVersion = 1

    /// The gateway's id for the HTTP request (also the `X-Request-Id` response header).
    public var requestId: String
    /// The `Idempotency-Key` of the request; for the session contracts, derived from `sessionKey`.
    public var idempotencyKey: String
    /// The user the authenticated device is bound to. The partition key.
    public var userId: String
    /// The device id as authenticated (it matched `X-Device-Id`).
    public var deviceId: String
    /// The site, when the gateway knows it (always for events and check-ins).
    public var siteId: String?
    /// The `X-App-Version` header.
    public var appVersion: String?
    /// The gateway instance waiting for the verdict: the key the verdict is produced with.
    public var gatewayInstance: String
    public var receivedAt: Date
    /// Lowercase hex sha256 of the payload's canonical encoding (`ProtocolCodec.canonical`).
    public var payloadFingerprint: String
    public var payload: RawEventPayload

    public init(
        requestId: String, idempotencyKey: String, userId: String, deviceId: String, siteId: String?,
        appVersion: String?, gatewayInstance: String, receivedAt: Date, payloadFingerprint: String,
        payload: RawEventPayload
    ) {
        self.requestId = requestId
        self.idempotencyKey = idempotencyKey
        self.userId = userId
        self.deviceId = deviceId
        self.siteId = siteId
        self.appVersion = appVersion
        self.gatewayInstance = gatewayInstance
        self.receivedAt = receivedAt
        self.payloadFingerprint = payloadFingerprint
        self.payload = payload
    }

    public var partitionKey: PartitionKey { .rawEvent(userId: userId) }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, requestId, idempotencyKey, userId, deviceId, siteId, appVersion
        case gatewayInstance, receivedAt, payloadFingerprint, kind, payload
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let head = try Head(c)
        let payload: RawEventPayload
        switch head.kind {
        case .event: payload = .event(try c.decode(AttendanceEvent.self, forKey: .payload))
        case .checkIn: payload = .checkIn(try c.decode(CheckInRequest.self, forKey: .payload))
        case .checkOut: payload = .checkOut(try c.decode(CheckOutRequest.self, forKey: .payload))
        case .heartbeat: payload = .heartbeat(try c.decode(HeartbeatRequest.self, forKey: .payload))
        }
        self.init(
            requestId: head.requestId, idempotencyKey: head.idempotencyKey, userId: head.userId, deviceId: head.deviceId,
            siteId: head.siteId, appVersion: head.appVersion, gatewayInstance: head.gatewayInstance, receivedAt: head.receivedAt,
            payloadFingerprint: head.payloadFingerprint, payload: payload)
    }

    /// The members before the payload, read one way by this decoder and by `VettedEventRecord`'s.
    struct Head {
        let requestId: String
        let idempotencyKey: String
        let userId: String
        let deviceId: String
        let siteId: String?
        let appVersion: String?
        let gatewayInstance: String
        let receivedAt: Date
        let payloadFingerprint: String
        let kind: RawEventKind

        init(_ c: KeyedDecodingContainer<CodingKeys>) throws {
            _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: RawEventEnvelope.schemaVersion, required: true)
            requestId = try c.decode(String.self, forKey: .requestId)
            idempotencyKey = try c.decode(String.self, forKey: .idempotencyKey)
            userId = try c.decode(String.self, forKey: .userId)
            deviceId = try c.decode(String.self, forKey: .deviceId)
            siteId = try c.decodeIfPresent(String.self, forKey: .siteId)
            appVersion = try c.decodeIfPresent(String.self, forKey: .appVersion)
            gatewayInstance = try c.decode(String.self, forKey: .gatewayInstance)
            receivedAt = try c.decodeTimestamp(forKey: .receivedAt)
            payloadFingerprint = try c.decode(String.self, forKey: .payloadFingerprint)
            kind = try c.decode(RawEventKind.self, forKey: .kind)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        try encode(to: encoder, payload: payload)
    }

    /// The wire bytes of this envelope with its payload written from `encodedPayload` (which must
    /// hold this envelope's payload) instead of encoded again: the same bytes as
    /// `ProtocolCodec.wire.encode(self)`.
    public func wireBytes(payload encodedPayload: PreEncoded<RawEventPayload>) throws(ProtocolEncodingError) -> [UInt8] {
        assert(encodedPayload.value == payload, "the pre-encoded payload is another envelope's")
        return try ProtocolCodec.wire.encode(WithEncodedPayload(envelope: self, payload: encodedPayload))
    }

    private struct WithEncodedPayload: Encodable {
        let envelope: RawEventEnvelope
        let payload: PreEncoded<RawEventPayload>
        func encode(to encoder: any Encoder) throws { try envelope.encode(to: encoder, payload: payload) }
    }

    private func encode(to encoder: any Encoder, payload encodedPayload: some Encodable) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(requestId, forKey: .requestId)
        try c.encode(idempotencyKey, forKey: .idempotencyKey)
        try c.encode(userId, forKey: .userId)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encodeIfPresent(siteId, forKey: .siteId)
        try c.encodeIfPresent(appVersion, forKey: .appVersion)
        try c.encode(gatewayInstance, forKey: .gatewayInstance)
        try c.encodeTimestamp(receivedAt, forKey: .receivedAt)
        try c.encode(payloadFingerprint, forKey: .payloadFingerprint)
        try c.encode(payload.kind, forKey: .kind)
        try c.encode(encodedPayload, forKey: .payload)
    }
}

/// Which request produced a raw event; the wire field `kind` says how to read `payload`.
public enum RawEventKind: String, ClosedWireEnum {
    /// `POST /v1/attendance/events` (the device payload).
    case event
    /// `POST /v1/attendance/check-in` (a session contract).
    case checkIn = "check_in"
    /// `POST /v1/attendance/check-out` (a session contract).
    case checkOut = "check_out"
    /// `POST /v1/attendance/heartbeat` (a session contract).
    case heartbeat
}

/// The device's request body, one case per endpoint. It encodes as the body itself (the envelope's
/// `kind` says which one it is).
public enum RawEventPayload: Hashable, Sendable, Encodable {
    case event(AttendanceEvent)
    case checkIn(CheckInRequest)
    case checkOut(CheckOutRequest)
    case heartbeat(HeartbeatRequest)

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .event(let event): try event.encode(to: encoder)
        case .checkIn(let request): try request.encode(to: encoder)
        case .checkOut(let request): try request.encode(to: encoder)
        case .heartbeat(let request): try request.encode(to: encoder)
        }
    }

    public var kind: RawEventKind {
        switch self {
        case .event: return .event
        case .checkIn: return .checkIn
        case .checkOut: return .checkOut
        case .heartbeat: return .heartbeat
        }
    }

    /// When it happened on the device: the time sessions are built by.
    public var eventTime: Date {
        switch self {
        case .event(let event): return event.timestamp
        case .checkIn(let request): return request.ts
        case .checkOut(let request): return request.ts
        case .heartbeat(let request): return request.ts
        }
    }

    /// The device's session key, when the payload has one.
    public var sessionKey: String? {
        switch self {
        case .event(let event): return event.sessionKey
        case .checkIn(let request): return request.sessionKey
        case .checkOut(let request): return request.sessionKey
        case .heartbeat(let request): return request.sessionKey
        }
    }

    /// What the payload does to a session, whichever endpoint it came through.
    public var eventType: AttendanceEventType {
        switch self {
        case .event(let event): return event.type
        case .checkIn: return .checkin
        case .checkOut: return .checkout
        case .heartbeat: return .heartbeat
        }
    }
}
