import Foundation

/// A change to one attendance session, on `attendance.sessions` (key: user id).
///
/// Produced by the merger after commit. `version` grows by one with every change of a session, so a
/// consumer that sees a version it already has (a redelivery) or an older one can ignore it.
public struct SessionChange: TopicMessage {
    public static let topic = Topic.sessions
    public static let schemaVersion = 1

    public var sessionId: String
    public var userId: String
    public var siteId: String
    /// The device's session key, when the session was opened through the contracts.
    public var sessionKey: String?
    public var change: SessionChangeKind
    public var checkInAt: Date
    public var checkOutAt: Date?
    /// The latest presence seen (event or heartbeat time).
    public var lastSeenAt: Date?
    public var closeReason: SessionCloseReason?
    /// The idempotency keys of the events merged into this session so far, in session order: the
    /// latest `maxEventIds` of them when it holds more (a phone left by a gate sends a heartbeat every
    /// 5 minutes for as long as it lies there; the message stays far below the broker's size limit).
    public var eventIds: [String]
    /// How many events the session holds (`eventIds.count` unless the list was cut).
    public var eventCount: Int
    public var version: Int64

    /// The most event ids one change carries.
    public static let maxEventIds = 1_000
    public var changedAt: Date

    public init(
        sessionId: String, userId: String, siteId: String, sessionKey: String? = nil, change: SessionChangeKind,
        checkInAt: Date, checkOutAt: Date? = nil, lastSeenAt: Date? = nil, closeReason: SessionCloseReason? = nil,
        eventIds: [String], eventCount: Int? = nil, version: Int64, changedAt: Date
    ) {
        self.sessionId = sessionId
        self.userId = userId
        self.siteId = siteId
        self.sessionKey = sessionKey
        self.change = change
        self.checkInAt = checkInAt
        self.checkOutAt = checkOutAt
        self.lastSeenAt = lastSeenAt
        self.closeReason = closeReason
        self.eventIds = eventIds
        self.eventCount = eventCount ?? eventIds.count
        self.version = version
        self.changedAt = changedAt
    }

    public var partitionKey: PartitionKey { .session(userId: userId) }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, sessionId, userId, siteId, sessionKey, change, checkInAt, checkOutAt, lastSeenAt
        case closeReason, eventIds, eventCount, version, changedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        sessionId = try c.decode(String.self, forKey: .sessionId)
        userId = try c.decode(String.self, forKey: .userId)
        siteId = try c.decode(String.self, forKey: .siteId)
        sessionKey = try c.decodeIfPresent(String.self, forKey: .sessionKey)
        change = try c.decode(SessionChangeKind.self, forKey: .change)
        checkInAt = try c.decodeTimestamp(forKey: .checkInAt)
        checkOutAt = try c.decodeTimestampIfPresent(forKey: .checkOutAt)
        lastSeenAt = try c.decodeTimestampIfPresent(forKey: .lastSeenAt)
        closeReason = try c.decodeIfPresent(SessionCloseReason.self, forKey: .closeReason)
        eventIds = try c.decode([String].self, forKey: .eventIds)
        // Absent from changes produced before the count was added: their list was never cut.
        eventCount = try c.decodeIfPresent(Int.self, forKey: .eventCount) ?? eventIds.count
        version = try c.decode(Int64.self, forKey: .version)
        changedAt = try c.decodeTimestamp(forKey: .changedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(sessionId, forKey: .sessionId)
        try c.encode(userId, forKey: .userId)
        try c.encode(siteId, forKey: .siteId)
        try c.encodeIfPresent(sessionKey, forKey: .sessionKey)
        try c.encode(change, forKey: .change)
        try c.encodeTimestamp(checkInAt, forKey: .checkInAt)
        try c.encodeTimestampIfPresent(checkOutAt, forKey: .checkOutAt)
        try c.encodeTimestampIfPresent(lastSeenAt, forKey: .lastSeenAt)
        try c.encodeIfPresent(closeReason, forKey: .closeReason)
        try c.encode(eventIds, forKey: .eventIds)
        try c.encode(eventCount, forKey: .eventCount)
        try c.encode(version, forKey: .version)
        try c.encodeTimestamp(changedAt, forKey: .changedAt)
    }
}

/// What happened to the session (docs/SPECIFICATION.md, "5. Sessions and daily attendance").
public enum SessionChangeKind: String, ClosedWireEnum {
    case opened
    /// New presence (a check-in candidate in the merge window, a heartbeat).
    case extended
    /// A check-out arrived; the session reopens if presence returns within the grace window.
    case softExit = "soft_exit"
    /// Presence returned within the grace window after a soft exit: the same session continues.
    case reopened
    case closed
}

/// Why a session closed. Open, so the merger can add reasons without a schema change.
public enum SessionCloseReason: OpenWireEnum {
    /// The check-out's grace window passed without presence.
    case checkOut
    /// No presence past the cutoff: closed automatically.
    case presenceTimeout
    /// Closed at the end of the site's shift.
    case shiftEnd
    /// Closed by an administrator.
    case manual
    case unrecognized(String)

    public static let knownValues: [SessionCloseReason] = [.checkOut, .presenceTimeout, .shiftEnd, .manual]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .checkOut: return "check_out"
        case .presenceTimeout: return "presence_timeout"
        case .shiftEnd: return "shift_end"
        case .manual: return "manual"
        case .unrecognized(let raw): return raw
        }
    }
}
