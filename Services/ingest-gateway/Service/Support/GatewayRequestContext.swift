import AttendanceProtocol
import Foundation
import Hummingbird

/// The device a request authenticated as (its bearer token, checked against `X-Device-Id` and the
/// registry feed).
public struct AuthenticatedDevice: Sendable, Hashable {
    public var deviceId: String
    public var userId: String
    public var tokenExpiresAt: Date

    public init(deviceId: String, userId: String, tokenExpiresAt: Date) {
        self.deviceId = deviceId
        self.userId = userId
        self.tokenExpiresAt = tokenExpiresAt
    }
}

/// The request context of the gateway's routes: the authenticated device (set by
/// `DeviceAuthMiddleware` on every `/v1` route) and the request id (the `X-Request-Id` answer
/// header and the envelope's `requestId`).
public struct GatewayRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var device: AuthenticatedDevice?
    public let requestId: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        device = nil
        requestId = UUID().uuidString.lowercased()
    }

    /// The device, or 401 (the auth middleware guarantees it on device routes).
    public func requireDevice() throws(ProblemDetails) -> AuthenticatedDevice {
        guard let device else { throw .unauthorized("send a device token: Authorization: Bearer <token>") }
        return device
    }
}
