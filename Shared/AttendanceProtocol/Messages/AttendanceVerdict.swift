import Foundation

/// The final outcome of one request, on `attendance.verdicts` (key: gateway instance).
///
/// The merger produces it after its transaction commits; the gateway that holds the request
/// (`gatewayInstance`) answers the device with `httpStatus`, and the telemetry aggregator measures
/// trigger-to-verdict latency from `eventTime` and `decidedAt`.
public struct AttendanceVerdict: TopicMessage {
    public static let topic = Topic.verdicts
    public static let schemaVersion = 1

    public var requestId: String
    public var idempotencyKey: String
    public var userId: String
    public var deviceId: String
    public var siteId: String?
    public var outcome: VerdictOutcome
    /// The status the gateway answers with; normally `outcome.httpStatus`.
    public var httpStatus: Int
    /// The receipt of the recorded event (for `duplicate`, the original one).
    public var serverReceiptId: String?
    public var sessionId: String?
    /// Why it was refused (empty when accepted).
    public var reasons: [String]
    public var action: AppAction
    public var retryAfterSeconds: Int?
    public var policyVersion: Int?
    /// When it happened on the device.
    public var eventTime: Date?
    public var decidedAt: Date
    public var gatewayInstance: String

    public init(
        requestId: String, idempotencyKey: String, userId: String, deviceId: String, siteId: String? = nil,
        outcome: VerdictOutcome, httpStatus: Int? = nil, serverReceiptId: String? = nil, sessionId: String? = nil,
        reasons: [String] = [], action: AppAction = .noAction, retryAfterSeconds: Int? = nil,
        policyVersion: Int? = nil, eventTime: Date? = nil, decidedAt: Date, gatewayInstance: String
    ) {
        self.requestId = requestId
        self.idempotencyKey = idempotencyKey
        self.userId = userId
        self.deviceId = deviceId
        self.siteId = siteId
        self.outcome = outcome
        self.httpStatus = httpStatus ?? outcome.httpStatus
        self.serverReceiptId = serverReceiptId
        self.sessionId = sessionId
        self.reasons = reasons
        self.action = action
        self.retryAfterSeconds = retryAfterSeconds
        self.policyVersion = policyVersion
        self.eventTime = eventTime
        self.decidedAt = decidedAt
        self.gatewayInstance = gatewayInstance
    }

    public var partitionKey: PartitionKey { .verdict(gatewayInstance: gatewayInstance) }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, requestId, idempotencyKey, userId, deviceId, siteId, outcome, httpStatus
        case serverReceiptId, sessionId, reasons, action, retryAfterSeconds, policyVersion, eventTime
        case decidedAt, gatewayInstance
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        requestId = try c.decode(String.self, forKey: .requestId)
        idempotencyKey = try c.decode(String.self, forKey: .idempotencyKey)
        userId = try c.decode(String.self, forKey: .userId)
        deviceId = try c.decode(String.self, forKey: .deviceId)
        siteId = try c.decodeIfPresent(String.self, forKey: .siteId)
        outcome = try c.decode(VerdictOutcome.self, forKey: .outcome)
        httpStatus = try c.decode(Int.self, forKey: .httpStatus)
        serverReceiptId = try c.decodeIfPresent(String.self, forKey: .serverReceiptId)
        sessionId = try c.decodeIfPresent(String.self, forKey: .sessionId)
        reasons = try c.decodeIfPresent([String].self, forKey: .reasons) ?? []
        action = try c.decodeIfPresent(AppAction.self, forKey: .action) ?? .noAction
        retryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds)
        policyVersion = try c.decodeIfPresent(Int.self, forKey: .policyVersion)
        eventTime = try c.decodeTimestampIfPresent(forKey: .eventTime)
        decidedAt = try c.decodeTimestamp(forKey: .decidedAt)
        gatewayInstance = try c.decode(String.self, forKey: .gatewayInstance)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(requestId, forKey: .requestId)
        try c.encode(idempotencyKey, forKey: .idempotencyKey)
        try c.encode(userId, forKey: .userId)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encodeIfPresent(siteId, forKey: .siteId)
        try c.encode(outcome, forKey: .outcome)
        try c.encode(httpStatus, forKey: .httpStatus)
        try c.encodeIfPresent(serverReceiptId, forKey: .serverReceiptId)
        try c.encodeIfPresent(sessionId, forKey: .sessionId)
        try c.encode(reasons, forKey: .reasons)
        try c.encode(action, forKey: .action)
        try c.encodeIfPresent(retryAfterSeconds, forKey: .retryAfterSeconds)
        try c.encodeIfPresent(policyVersion, forKey: .policyVersion)
        try c.encodeTimestampIfPresent(eventTime, forKey: .eventTime)
        try c.encodeTimestamp(decidedAt, forKey: .decidedAt)
        try c.encode(gatewayInstance, forKey: .gatewayInstance)
    }
}

/// How a request ended. Every outcome is final: the device deletes its outbox entry.
public enum VerdictOutcome: String, ClosedWireEnum {
    /// Recorded now: 201 with the receipt.
    case accepted
    /// The key was already recorded: 200 with the original receipt.
    case duplicate
    /// Refused by policy: 409 with reasons and the action.
    case rejected
    /// The key was recorded with a different payload: 422.
    case payloadMismatch = "payload_mismatch"

    /// The HTTP status the gateway answers with
    /// (docs/SPECIFICATION.md, "4. Topics and the no-loss contract").
    public var httpStatus: Int {
        switch self {
        case .accepted: return 201
        case .duplicate: return 200
        case .rejected: return 409
        case .payloadMismatch: return 422
        }
    }
}
