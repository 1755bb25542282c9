import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import IngestGatewayCore
import Logging
import Prometheus
import RegistryFeed
import ServiceRuntime

/// What the gateway's routes work with.
package struct GatewayDependencies: Sendable {
    package var pipeline: IngestPipeline
    package var publisher: any GatewayPublisher
    package var repository: any AttendanceReadRepository
    package var signer: DeviceTokenSigner
    package var cache: RegistryCache
    package var limiter: DeviceRateLimiter
    /// Signs GATT challenge nonces (`GATT_NONCE_KEY`); `nil` turns the challenge endpoint off.
    package var challenges: GattNonceCodec?
    /// The server clock (tests move it).
    package var now: @Sendable () -> Date

    package init(
        pipeline: IngestPipeline, publisher: any GatewayPublisher, repository: any AttendanceReadRepository,
        signer: DeviceTokenSigner, cache: RegistryCache, limiter: DeviceRateLimiter? = nil,
        challenges: GattNonceCodec? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.pipeline = pipeline
        self.publisher = publisher
        self.repository = repository
        self.signer = signer
        self.cache = cache
        self.limiter = limiter ?? DeviceRateLimiter(settings: pipeline.settings.rateLimit)
        self.challenges = challenges
        self.now = now
    }
}

/// The gateway's HTTP application: health (ready once the verdict partitions are assigned and the
/// registry feed caught up), metrics and request logs from `ServiceApplication`, then the device
/// routes (`addGatewayRoutes`).
package func buildApplication(
    configuration: ServiceConfiguration,
    dependencies: GatewayDependencies,
    readiness: [any ReadinessCheck],
    metrics: PrometheusCollectorRegistry,
    logger: Logger
) -> some ApplicationProtocol {
    ServiceApplication.build(
        configuration: configuration, registry: metrics, readiness: readiness, context: GatewayRequestContext.self, logger: logger,
        openAPI: .gateway
    ) { router in
        addGatewayRoutes(to: router, dependencies: dependencies)
    }
}

/// The gateway routes alone on a new router (tests drive it with `app.test(.router)`).
package func buildRouter(dependencies: GatewayDependencies) -> Router<GatewayRequestContext> {
    let router = Router(context: GatewayRequestContext.self)
    addGatewayRoutes(to: router, dependencies: dependencies)
    return router
}

/// Every device route under `/v1`, behind device authentication then the per-device token bucket; a
/// body is read only after both (`RequestBodyGuardMiddleware`), so an anonymous or throttled client is
/// answered from its headers. Every error becomes problem+json (`ProblemMiddleware`, which also answers
/// the request id).
package func addGatewayRoutes(to router: Router<GatewayRequestContext>, dependencies d: GatewayDependencies) {
    let mapper = ProblemMapper(maxBodyBytes: d.pipeline.settings.limits.maxBodyBytes)
    router.add(middleware: ProblemMiddleware<GatewayRequestContext>(mapper, checkingBodies: false))
    let v1 = router.group("v1")
        .add(middleware: DeviceAuthMiddleware(signer: d.signer, cache: d.cache, now: d.now))
        .add(middleware: RateLimitMiddleware(limiter: d.limiter))
        .add(middleware: RequestBodyGuardMiddleware(mapper))
    AttendanceController(pipeline: d.pipeline, repository: d.repository, now: d.now).addRoutes(to: v1)
    TelemetryController(pipeline: d.pipeline, publisher: d.publisher, now: d.now).addRoutes(to: v1)
    ChallengeController(nonces: d.challenges, cache: d.cache, now: d.now).addRoutes(to: v1)
}
