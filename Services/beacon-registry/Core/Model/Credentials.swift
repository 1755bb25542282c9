import AccessControl
import Foundation

package enum DeviceStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case enrolled
    case revoked
}

/// A phone bound to a user by an enrollment code.
package struct Device: Codable, Hashable, Sendable {
    package var id: String
    package var userId: String
    package var status: DeviceStatus
    package var appVersion: String?
    package var model: String?
    package var enrolledAt: Date
    package var revokedAt: Date?
    /// The key that signed the device's token (see `DeviceTokenSigner`).
    package var tokenKeyId: String
    package var tokenExpiresAt: Date

    package init(
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
package struct DeviceDescription: Codable, Hashable, Sendable {
    package var appVersion: String?
    package var model: String?

    package init(appVersion: String? = nil, model: String? = nil) {
        self.appVersion = appVersion
        self.model = model
    }
}

/// A one-time enrollment code as stored (no plaintext).
package struct EnrollmentCode: Codable, Hashable, Sendable {
    package var id: String
    package var userId: String
    package var createdAt: Date
    package var expiresAt: Date
    package var usedAt: Date?
    /// The device it enrolled, once used: the binding.
    package var deviceId: String?

    package init(id: String, userId: String, createdAt: Date, expiresAt: Date, usedAt: Date?, deviceId: String?) {
        self.id = id
        self.userId = userId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.deviceId = deviceId
    }
}

/// A freshly created enrollment code: the only moment its plaintext exists outside the user's hands.
package struct IssuedEnrollmentCode: Hashable, Sendable {
    package var enrollment: EnrollmentCode
    /// `XXXXX-XXXXX` in Crockford base32 (no I, L, O, U), for typing or a QR code.
    package var code: String

    package init(enrollment: EnrollmentCode, code: String) {
        self.enrollment = enrollment
        self.code = code
    }
}

/// What a device receives for its enrollment code.
package struct DeviceCredentials: Hashable, Sendable {
    package var device: Device
    /// `v1.<payload>.<signature>`: sent as a bearer token; gateways verify it offline.
    package var token: String
    package var claims: DeviceClaims

    package init(device: Device, token: String, claims: DeviceClaims) {
        self.device = device
        self.token = token
        self.claims = claims
    }
}

/// A freshly created API key: `secret` is shown once and never stored.
package struct IssuedAPIKey: Hashable, Sendable {
    package var key: APIKey
    /// `brk_<16 hex id>.<43 base64url chars>`: the bearer token.
    package var secret: String

    package init(key: APIKey, secret: String) {
        self.key = key
        self.secret = secret
    }
}
