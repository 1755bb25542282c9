import Foundation

/// What a store of vetted events reads of one (the merger): the envelope's identities and
/// fingerprint, the policy's decision, and of the device's payload only the members sessions are
/// derived from. The payload's other members are not decoded: the store keeps the envelope as the
/// bytes it arrived as (`ProtocolCodec.decode(_:from:keepingSourceOf:)`), and the policy service
/// decoded and validated the whole event before it vetted it.
public struct VettedEventRecord: Decodable, Hashable, Sendable {
    public var raw: Envelope
    public var decision: PolicyDecision

    /// The envelope without the payload's details.
    public struct Envelope: Hashable, Sendable {
        public var requestId: String
        public var idempotencyKey: String
        public var userId: String
        public var deviceId: String
        /// The gateway's site (`RawEventEnvelope.siteId`).
        public var siteId: String?
        public var gatewayInstance: String
        public var receivedAt: Date
        public var payloadFingerprint: String
        public var payload: Payload
    }

    /// Of the device's payload: what sessions are derived from.
    public struct Payload: Hashable, Sendable {
        public var kind: RawEventKind
        public var eventType: AttendanceEventType
        /// The device's time of the event (`RawEventPayload.eventTime`).
        public var eventTime: Date
        public var sessionKey: String?
        /// The site the body names: an event's and a check-in's, `nil` for the others.
        public var siteId: String?
        /// The beacon an event was made at; `nil` for the session contracts.
        public var beacon: BeaconIdentity?
    }

    /// The record of a decoded event (what decoding its bytes as a record gives).
    public init(_ vetted: VettedEvent) {
        let raw = vetted.raw
        var siteId: String?
        var beacon: BeaconIdentity?
        switch raw.payload {
        case .event(let event):
            siteId = event.siteId
            beacon = event.beacon
        case .checkIn(let request):
            siteId = request.siteId
        case .checkOut, .heartbeat:
            break
        }
        self.raw = Envelope(
            requestId: raw.requestId, idempotencyKey: raw.idempotencyKey, userId: raw.userId, deviceId: raw.deviceId, siteId: raw.siteId,
            gatewayInstance: raw.gatewayInstance, receivedAt: raw.receivedAt, payloadFingerprint: raw.payloadFingerprint,
            payload: Payload(
                kind: raw.payload.kind, eventType: raw.payload.eventType, eventTime: raw.payload.eventTime,
                sessionKey: raw.payload.sessionKey, siteId: siteId, beacon: beacon))
        self.decision = vetted.decision
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: VettedEvent.CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: VettedEvent.schemaVersion, required: true)
        raw = try c.decode(Envelope.self, forKey: .raw)
        decision = try c.decode(PolicyDecision.self, forKey: .decision)
    }
}

extension VettedEventRecord.Envelope: Decodable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: RawEventEnvelope.CodingKeys.self)
        let head = try RawEventEnvelope.Head(c)
        let kind = head.kind
        let payload: VettedEventRecord.Payload
        switch kind {
        case .event:
            let p = try c.nestedContainer(keyedBy: AttendanceEvent.CodingKeys.self, forKey: .payload)
            payload = VettedEventRecord.Payload(
                kind: kind, eventType: try p.decode(AttendanceEventType.self, forKey: .type),
                eventTime: try p.decodeTimestamp(forKey: .timestamp), sessionKey: try p.decodeIfPresent(String.self, forKey: .sessionKey),
                siteId: try p.decode(String.self, forKey: .siteId), beacon: try p.decode(BeaconIdentity.self, forKey: .beacon))
        case .checkIn:
            let p = try c.nestedContainer(keyedBy: CheckInRequest.CodingKeys.self, forKey: .payload)
            payload = VettedEventRecord.Payload(
                kind: kind, eventType: .checkin, eventTime: try p.decodeTimestamp(forKey: .ts),
                sessionKey: try p.decode(String.self, forKey: .sessionKey), siteId: try p.decode(String.self, forKey: .siteId))
        case .checkOut:
            let p = try c.nestedContainer(keyedBy: CheckOutRequest.CodingKeys.self, forKey: .payload)
            payload = VettedEventRecord.Payload(
                kind: kind, eventType: .checkout, eventTime: try p.decodeTimestamp(forKey: .ts),
                sessionKey: try p.decode(String.self, forKey: .sessionKey))
        case .heartbeat:
            let p = try c.nestedContainer(keyedBy: HeartbeatRequest.CodingKeys.self, forKey: .payload)
            payload = VettedEventRecord.Payload(
                kind: kind, eventType: .heartbeat, eventTime: try p.decodeTimestamp(forKey: .ts),
                sessionKey: try p.decode(String.self, forKey: .sessionKey))
        }
        self.init(
            requestId: head.requestId, idempotencyKey: head.idempotencyKey, userId: head.userId, deviceId: head.deviceId,
            siteId: head.siteId, gatewayInstance: head.gatewayInstance, receivedAt: head.receivedAt,
            payloadFingerprint: head.payloadFingerprint, payload: payload)
    }
}
