import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import ServiceRuntime

/// The device a request authenticated as (its bearer token, checked against `X-Device-Id` and the
/// registry feed).
package struct AuthenticatedDevice: Sendable, Hashable {
    package var deviceId: String
    package var userId: String
    package var tokenExpiresAt: Date
}

/// The request context of the gateway's routes: the authenticated device (set by
/// `DeviceAuthMiddleware` on every `/v1` route) and the request id (the `X-Request-Id` answer
/// header and the envelope's `requestId`).
package struct GatewayRequestContext: RequestIdentifiedContext {
    package var coreContext: CoreRequestContextStorage
    package var device: AuthenticatedDevice?
    package let requestId: String

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        device = nil
        requestId = UUID().uuidString.lowercased()
        // The id the phone gets back (`X-Request-Id`) is the one the logs carry.
        logger[metadataKey: "requestId"] = .string(requestId)
    }

    /// The device, or 401 (the auth middleware guarantees it on device routes).
    package func requireDevice() throws(ProblemDetails) -> AuthenticatedDevice {
        guard let device else { throw .unauthorized("send a device token: Authorization: Bearer <token>") }
        return device
    }
}
