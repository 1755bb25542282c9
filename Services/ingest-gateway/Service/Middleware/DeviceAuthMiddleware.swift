import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import RegistryFeed

/// Device authentication on every device route, without a database round trip:
///
/// 1. `Authorization: Bearer <device token>` and `X-Device-Id` as every device route checks them
///    (`DeviceAuthentication`: 401, 400 or 403), a token verified once remembered until it expires;
/// 2. the registry feed (`RegistryCache`, fed from `registry.changes`): a device whose cached status
///    is not `enrolled` (revoked) or that is now bound to another user → 403. A device the cache
///    does not know yet is accepted: the token is genuine and the feed may lag.
package struct DeviceAuthMiddleware: RouterMiddleware {
    package typealias Context = GatewayRequestContext
    let signer: DeviceTokenSigner
    let cache: RegistryCache
    let now: @Sendable () -> Date
    let verifiedTokens: VerifiedTokenCache

    /// - Parameter verifiedTokenCapacity: tokens remembered as verified (0: verify every request).
    package init(
        signer: DeviceTokenSigner, cache: RegistryCache, now: @escaping @Sendable () -> Date = { Date() },
        verifiedTokenCapacity: Int = 50_000
    ) {
        self.signer = signer
        self.cache = cache
        self.now = now
        self.verifiedTokens = VerifiedTokenCache(capacity: verifiedTokenCapacity)
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let device = try authenticate(request.headers)
        var context = context
        context.device = device
        // A device id is personal data: only debug logs carry it.
        if context.logger.logLevel <= .debug { context.logger[metadataKey: "deviceId"] = .string(device.deviceId) }
        return try await next(request, context)
    }

    func authenticate(_ headers: HTTPFields) throws(ProblemDetails) -> AuthenticatedDevice {
        let token = try DeviceAuthentication.bearerToken(in: headers)
        let at = now()
        let claims: DeviceClaims
        if let verified = verifiedTokens.claims(for: token, now: at) {
            claims = verified
        } else {
            do {
                claims = try signer.verify(token, now: at)
            } catch {
                throw .unauthorized(error.description)
            }
            verifiedTokens.store(claims, for: token)
        }
        try DeviceAuthentication.requireDeviceHeader(in: headers, matching: claims)
        if let cached = cache.device(id: claims.deviceId) {
            guard cached.isActive else {
                var problem = ProblemDetails.forbidden("device \(claims.deviceId) is revoked; enroll it again")
                problem.action = .contactAdmin
                throw problem
            }
            guard cached.userId == claims.userId else {
                var problem = ProblemDetails.forbidden("device \(claims.deviceId) is now bound to another user; enroll it again")
                problem.action = .contactAdmin
                throw problem
            }
        }
        return AuthenticatedDevice(deviceId: claims.deviceId, userId: claims.userId, tokenExpiresAt: claims.expiresAt)
    }
}
