import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import IngestGatewayCore
import Logging
import Prometheus
import RegistryFeed
import ServiceRuntime

/// The gateway's default HTTP port (`HTTP_PORT` overrides it).
public let ingestGatewayDefaultHTTPPort = 8080

/// What the gateway's routes work with.
public struct GatewayDependencies: Sendable {
    public var pipeline: IngestPipeline
    public var publisher: any GatewayPublisher
    public var repository: any AttendanceReadRepository
    public var signer: DeviceTokenSigner
    public var cache: RegistryCache
    public var limiter: DeviceRateLimiter
    /// Signs GATT challenge nonces (`GATT_NONCE_KEY`); `nil` turns the challenge endpoint off.
    public var challenges: GattNonceCodec?
    /// The server clock (tests move it).
    public var now: @Sendable () -> Date

    public init(
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
public func buildApplication(
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
public func buildRouter(dependencies: GatewayDependencies) -> Router<GatewayRequestContext> {
    let router = Router(context: GatewayRequestContext.self)
    addGatewayRoutes(to: router, dependencies: dependencies)
    return router
}

/// Every device route under `/v1`, behind device authentication then the per-device token bucket.
/// Every error becomes problem+json (`GatewayProblemMiddleware`).
public func addGatewayRoutes(to router: Router<GatewayRequestContext>, dependencies d: GatewayDependencies) {
    router.add(middleware: GatewayProblemMiddleware(maxBodyBytes: d.pipeline.settings.limits.maxBodyBytes))
    let v1 = router.group("v1")
        .add(middleware: DeviceAuthMiddleware(signer: d.signer, cache: d.cache, now: d.now))
        .add(middleware: RateLimitMiddleware(limiter: d.limiter))
    AttendanceController(pipeline: d.pipeline, repository: d.repository, now: d.now).addRoutes(to: v1)
    TelemetryController(pipeline: d.pipeline, publisher: d.publisher, now: d.now).addRoutes(to: v1)
    ChallengeController(nonces: d.challenges, cache: d.cache, now: d.now).addRoutes(to: v1)
}
