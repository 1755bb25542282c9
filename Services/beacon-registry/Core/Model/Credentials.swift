import AccessControl
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

    public init(appVersion: String? = nil, model: String? = nil) {
        self.appVersion = appVersion
        self.model = model
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

/// A freshly created enrollment code: the only moment its plaintext exists outside the user's hands.
public struct IssuedEnrollmentCode: Hashable, Sendable {
    public var enrollment: EnrollmentCode
    /// `XXXXX-XXXXX` in Crockford base32 (no I, L, O, U), for typing or a QR code.
    public var code: String

    public init(enrollment: EnrollmentCode, code: String) {
        self.enrollment = enrollment
        self.code = code
    }
}

/// What a device receives for its enrollment code.
public struct DeviceCredentials: Hashable, Sendable {
    public var device: Device
    /// `v1.<payload>.<signature>`: sent as a bearer token; gateways verify it offline.
    public var token: String
    public var claims: DeviceClaims

    public init(device: Device, token: String, claims: DeviceClaims) {
        self.device = device
        self.token = token
        self.claims = claims
    }
}

/// A freshly created API key: `secret` is shown once and never stored.
public struct IssuedAPIKey: Hashable, Sendable {
    public var key: APIKey
    /// `brk_<16 hex id>.<43 base64url chars>`: the bearer token.
    public var secret: String

    public init(key: APIKey, secret: String) {
        self.key = key
        self.secret = secret
    }
}
