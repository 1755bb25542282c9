import Hummingbird
import Logging
import NIOCore
import Prometheus

/// The HTTP side every service shares: health, metrics, its OpenAPI document at `/openapi.yaml`,
/// request metrics and request logs, `HEAD` wherever `GET` is served (the same headers, no body: load
/// balancers' health checks often send it), and 405 with `Allow` for a method a path is not served
/// with, around the service's own routes. Services call this from their `buildApplication`.
public enum ServiceApplication {
    /// The operations every service has besides its own routes (its document lists them too).
    public static let sharedOperations: Set<String> = ["GET /health/live", "GET /health/ready", "GET /metrics", "GET /openapi.yaml"]

    /// A connection that sends nothing for this long, outside a request being answered, is closed: an
    /// idle keep-alive, or a client that stopped sending its request midway (a stalled upload holds a
    /// task and its buffer until then).
    public static let idleTimeout: TimeAmount = .seconds(60)

    public static func build<Context: RequestContext>(
        configuration: ServiceConfiguration,
        registry: PrometheusCollectorRegistry,
        readiness: [any ReadinessCheck],
        context: Context.Type,
        logger: Logger,
        openAPI: OpenAPIDocument?,
        routes: (Router<Context>) -> Void = { _ in }
    ) -> Application<RouterResponder<Context>> {
        let router = Router(context: Context.self, options: .autoGenerateHeadEndpoints)
        let routeTable = RouteMethodTable()
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.add(middleware: ResponseHardeningMiddleware())
        router.add(middleware: MethodNotAllowedMiddleware(table: routeTable))
        HealthController<Context>(service: configuration.serviceName, checks: readiness).addRoutes(to: router)
        MetricsController<Context>(registry: registry).addRoutes(to: router)
        openAPI?.addRoute(to: router)
        routes(router)
        routeTable.record(router)
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: idleTimeout)),
            configuration: .init(
                address: .hostname(configuration.httpHost, port: configuration.httpPort), serverName: configuration.serviceName),
            logger: logger
        )
    }

    /// The same, for services whose routes need nothing beyond `BasicRequestContext`.
    public static func build(
        configuration: ServiceConfiguration,
        registry: PrometheusCollectorRegistry,
        readiness: [any ReadinessCheck],
        logger: Logger,
        openAPI: OpenAPIDocument?,
        routes: (Router<BasicRequestContext>) -> Void = { _ in }
    ) -> Application<RouterResponder<BasicRequestContext>> {
        build(
            configuration: configuration, registry: registry, readiness: readiness, context: BasicRequestContext.self, logger: logger,
            openAPI: openAPI, routes: routes
        )
    }
}
