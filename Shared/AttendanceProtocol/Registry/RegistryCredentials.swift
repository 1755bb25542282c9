import Foundation

public enum DeviceStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case enrolled
    case revoked
}

/// A phone bound to a user by an enrollment code.
public struct Device: Codable, Hashable, Sendable {
    public var id: String
    public var userId: String
    public var status: DeviceStatus
    public var appVersion: String?
    public var model: String?
    public var enrolledAt: Date
    public var revokedAt: Date?
    /// The key that signed the device's token (see `DeviceTokenSigner`).
    public var tokenKeyId: String
    public var tokenExpiresAt: Date

    public init(
        id: String, userId: String, status: DeviceStatus, appVersion: String?, model: String?, enrolledAt: Date,
        revokedAt: Date?, tokenKeyId: String, tokenExpiresAt: Date
    ) {
        self.id = id
        self.userId = userId
        self.status = status
        self.appVersion = appVersion
        self.model = model
        self.enrolledAt = enrolledAt
        self.revokedAt = revokedAt
        self.tokenKeyId = tokenKeyId
        self.tokenExpiresAt = tokenExpiresAt
    }
}

/// What the enrolling app says about itself.
public struct DeviceDescription: Codable, Hashable, Sendable {
    public var appVersion: String?
    public var model: String?
    /// The app installation enrolling (`DeviceEnrollment.installationId`).
    public var installationId: String?

    public init(appVersion: String? = nil, model: String? = nil, installationId: String? = nil) {
        self.appVersion = appVersion
        self.model = model
        self.installationId = installationId
    }
}

/// A one-time enrollment code as stored (no plaintext).
public struct EnrollmentCode: Codable, Hashable, Sendable {
    public var id: String
    public var userId: String
    public var createdAt: Date
    public var expiresAt: Date
    public var usedAt: Date?
    /// The device it enrolled, once used: the binding.
    public var deviceId: String?

    public init(id: String, userId: String, createdAt: Date, expiresAt: Date, usedAt: Date?, deviceId: String?) {
        self.id = id
        self.userId = userId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.deviceId = deviceId
    }
}

/// Admin API roles, each including the ones below it.
public enum APIRole: String, Codable, Hashable, Sendable, CaseIterable, Comparable {
    /// Reads everything but beacons' GATT keys and the merger's pipeline status.
    case viewer
    /// Also provisions: creates gates, allocates minors, registers beacons and sets their status, reports
    /// sightings, reads beacons' GATT keys in their provisioning plan.
    case installer
    /// Also manages organizations (and their namespaces), sites (their detection settings too), users,
    /// enrollment codes, devices, API keys, beacons' GATT key rotation, site policies and the global kill
    /// switch, and reads the merger's pipeline status.
    case admin

    private var rank: Int {
        switch self {
        case .viewer: return 0
        case .installer: return 1
        case .admin: return 2
        }
    }

    public static func < (a: APIRole, b: APIRole) -> Bool { a.rank < b.rank }

    /// True when this role may do what `required` may.
    public func permits(_ required: APIRole) -> Bool { self >= required }
}

/// An admin API key as stored (its secret only as a hash).
public struct APIKey: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var role: APIRole
    public var createdAt: Date
    public var revokedAt: Date?

    public init(id: String, name: String, role: APIRole, createdAt: Date, revokedAt: Date?) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
