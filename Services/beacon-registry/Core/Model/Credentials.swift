import AccessControl
import AttendanceProtocol
import Foundation

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
