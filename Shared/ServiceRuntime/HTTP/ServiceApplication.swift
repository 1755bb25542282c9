import Hummingbird
import Logging
import Prometheus

/// The HTTP side every service shares: health, metrics, request metrics and request logs, around
/// the service's own routes. Services call this from their `buildApplication`.
public enum ServiceApplication {
    public static func build<Context: RequestContext>(
        configuration: ServiceConfiguration,
        registry: PrometheusCollectorRegistry,
        readiness: [any ReadinessCheck],
        context: Context.Type,
        logger: Logger,
        routes: (Router<Context>) -> Void = { _ in }
    ) -> Application<RouterResponder<Context>> {
        let router = Router(context: Context.self)
        router.add(middleware: MetricsMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        HealthController<Context>(service: configuration.serviceName, checks: readiness).addRoutes(to: router)
        MetricsController<Context>(registry: registry).addRoutes(to: router)
        routes(router)
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.httpHost, port: configuration.httpPort), serverName: configuration.serviceName),
            logger: logger
        )
    }

    /// The same, for services whose routes need nothing beyond `BasicRequestContext`.
    public static func build(
        configuration: ServiceConfiguration,
        registry: PrometheusCollectorRegistry,
        readiness: [any ReadinessCheck],
        logger: Logger,
        routes: (Router<BasicRequestContext>) -> Void = { _ in }
    ) -> Application<RouterResponder<BasicRequestContext>> {
        build(configuration: configuration, registry: registry, readiness: readiness, context: BasicRequestContext.self, logger: logger, routes: routes)
    }
}
