import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceRuntime
import TelemetryAggregatorCore

/// The HTTP application: health, metrics and request logs from `ServiceApplication`, then the
/// read-only telemetry routes (`addTelemetryRoutes`).
package func buildApplication(
    configuration: ServiceConfiguration,
    repository: any TelemetryQueryRepository,
    objective: SLOObjective,
    readiness: [any ReadinessCheck],
    metrics: PrometheusCollectorRegistry,
    logger: Logger,
    now: @escaping @Sendable () -> Date = { Date() }
) -> some ApplicationProtocol {
    ServiceApplication.build(configuration: configuration, registry: metrics, readiness: readiness, logger: logger, openAPI: .telemetry) {
        router in
        addTelemetryRoutes(to: router, repository: repository, objective: objective, now: now)
    }
}

/// The telemetry routes alone on a new router (tests drive it with `app.test(.router)`).
package func buildRouter(
    repository: any TelemetryQueryRepository, objective: SLOObjective = .standard, now: @escaping @Sendable () -> Date = { Date() }
) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    addTelemetryRoutes(to: router, repository: repository, objective: objective, now: now)
    return router
}

/// `/` (status page), `/v1/slo`, `/v1/metrics/summary`; every error becomes problem+json. Read-only
/// aggregates without personal data, so no API key (like `/metrics`); put it behind the operators'
/// network or proxy.
package func addTelemetryRoutes<Context: RequestContext>(
    to router: Router<Context>, repository: any TelemetryQueryRepository, objective: SLOObjective, now: @escaping @Sendable () -> Date
) {
    router.add(middleware: ProblemMiddleware())
    StatusPageController<Context>(repository: repository, objective: objective, now: now).addRoutes(to: router)
    SLOController<Context>(repository: repository, objective: objective, now: now).addRoutes(to: router)
    MetricsSummaryController<Context>(repository: repository, now: now).addRoutes(to: router)
}
