import AttendanceProtocol
import CoreMetrics
import Hummingbird
import IngestGatewayCore

/// The per-device token bucket (after authentication): 429 with `Retry-After` when it is empty.
package struct RateLimitMiddleware: RouterMiddleware {
    package typealias Context = GatewayRequestContext
    let limiter: DeviceRateLimiter

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let device = try context.requireDevice()
        if case .limited(let retryAfter) = limiter.acquire(device.deviceId) {
            GatewayMetrics.rateLimited.increment()
            throw ProblemDetails.rateLimited(retryAfterSeconds: retryAfter)
        }
        return try await next(request, context)
    }
}
