import Foundation

// The minimal session contracts: check-in, check-out, heartbeat, all idempotent by `sessionKey`
// (docs/SPECIFICATION.md, "3. Device API"). Field names are the specified ones.

/// `POST /v1/attendance/check-in { userId, siteId, ts, sessionKey, deviceMeta }`.
public struct CheckInRequest: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var userId: String
    public var siteId: String
    /// When presence was confirmed on the device.
    public var ts: Date
    /// The device's key for this session; repeats of the same check-in carry the same key.
    public var sessionKey: String
    public var deviceMeta: DeviceMeta

    public init(userId: String, siteId: String, ts: Date, sessionKey: String, deviceMeta: DeviceMeta) {
        self.userId = userId
        self.siteId = siteId
        self.ts = ts
        self.sessionKey = sessionKey
        self.deviceMeta = deviceMeta
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, userId, siteId, ts, sessionKey, deviceMeta
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        userId = try c.decode(String.self, forKey: .userId)
        siteId = try c.decode(String.self, forKey: .siteId)
        ts = try c.decodeTimestamp(forKey: .ts)
        sessionKey = try c.decode(String.self, forKey: .sessionKey)
        deviceMeta = try c.decode(DeviceMeta.self, forKey: .deviceMeta)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(userId, forKey: .userId)
        try c.encode(siteId, forKey: .siteId)
        try c.encodeTimestamp(ts, forKey: .ts)
        try c.encode(sessionKey, forKey: .sessionKey)
        try c.encode(deviceMeta, forKey: .deviceMeta)
    }
}

/// The device description a check-in carries (the policy's attestation input).
public struct DeviceMeta: Codable, Hashable, Sendable {
    /// Hardware model identifier, e.g. `iPhone14,5`.
    public var model: String
    /// OS name and version, e.g. `iOS 18.0`.
    public var os: String
    public var appVersion: String

    public init(model: String, os: String, appVersion: String) {
        self.model = model
        self.os = os
        self.appVersion = appVersion
    }
}

/// `POST /v1/attendance/check-out { sessionKey, ts, reason }`.
public struct CheckOutRequest: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var sessionKey: String
    public var ts: Date
    public var reason: CheckOutReason

    public init(sessionKey: String, ts: Date, reason: CheckOutReason) {
        self.sessionKey = sessionKey
        self.ts = ts
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, sessionKey, ts, reason
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        sessionKey = try c.decode(String.self, forKey: .sessionKey)
        ts = try c.decodeTimestamp(forKey: .ts)
        reason = try c.decode(CheckOutReason.self, forKey: .reason)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sessionKey, forKey: .sessionKey)
        try c.encodeTimestamp(ts, forKey: .ts)
        try c.encode(reason, forKey: .reason)
    }
}

/// Why the device checked out. Open: the presence state machine may add reasons.
public enum CheckOutReason: OpenWireEnum {
    /// The beacon region was exited and the soft-exit grace passed without presence.
    case regionExit
    /// SOFT_EXIT_PENDING expired: the soft-exit grace passed without presence.
    case softExitExpired
    /// The device left the site's geofence.
    case geofenceExit
    /// The user checked out by hand.
    case manual
    case unrecognized(String)

    public static let knownValues: [CheckOutReason] = [.regionExit, .softExitExpired, .geofenceExit, .manual]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .regionExit: return "region_exit"
        case .softExitExpired: return "soft_exit_expired"
        case .geofenceExit: return "geofence_exit"
        case .manual: return "manual"
        case .unrecognized(let raw): return raw
        }
    }
}

/// `POST /v1/attendance/heartbeat { sessionKey, ts }`: still present.
public struct HeartbeatRequest: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var sessionKey: String
    public var ts: Date

    public init(sessionKey: String, ts: Date) {
        self.sessionKey = sessionKey
        self.ts = ts
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, sessionKey, ts
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        sessionKey = try c.decode(String.self, forKey: .sessionKey)
        ts = try c.decodeTimestamp(forKey: .ts)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sessionKey, forKey: .sessionKey)
        try c.encodeTimestamp(ts, forKey: .ts)
    }
}
