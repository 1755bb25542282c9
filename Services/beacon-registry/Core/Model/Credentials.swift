import AccessControl
import AttendanceProtocol
import Foundation

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
