import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceRuntime

/// The merger's HTTP application: health, metrics and request logs from `ServiceApplication`, then the
/// admin routes (`addMergerRoutes`).
package func buildApplication(
    configuration: ServiceConfiguration,
    sessions: any SessionQueryRepository,
    shifts: any SiteShiftProvider,
    keyVerifier: any AdminKeyVerifier,
    groupId: String,
    minimumPresence: TimeInterval,
    readiness: [any ReadinessCheck],
    metrics: PrometheusCollectorRegistry,
    logger: Logger
) -> some ApplicationProtocol {
    ServiceApplication.build(
        configuration: configuration, registry: metrics, readiness: readiness, context: AdminContext.self, logger: logger,
        openAPI: .merger
    ) { router in
        addMergerRoutes(
            to: router, sessions: sessions, shifts: shifts, keyVerifier: keyVerifier, groupId: groupId,
            minimumPresence: minimumPresence)
    }
}

/// The admin routes alone on a new router (tests drive it with `app.test(.router)`).
package func buildRouter(
    sessions: any SessionQueryRepository, shifts: any SiteShiftProvider, keyVerifier: any AdminKeyVerifier,
    groupId: String = "session-merger", minimumPresence: TimeInterval = AttendancePresence.defaultMinimumSeconds,
    maxDailyReportSessions: Int = MergerAdminLimits.maxDailyReportSessions
) -> Router<AdminContext> {
    let router = Router(context: AdminContext.self)
    addMergerRoutes(
        to: router, sessions: sessions, shifts: shifts, keyVerifier: keyVerifier, groupId: groupId, minimumPresence: minimumPresence,
        maxDailyReportSessions: maxDailyReportSessions)
    return router
}

/// `/v1/admin/sessions` and `/v1/admin/attendance/daily` (viewer), `/v1/admin/pipeline` (admin), all
/// behind `AdminAuthMiddleware`; every error becomes problem+json.
package func addMergerRoutes(
    to router: Router<AdminContext>, sessions: any SessionQueryRepository, shifts: any SiteShiftProvider,
    keyVerifier: any AdminKeyVerifier, groupId: String, minimumPresence: TimeInterval,
    maxDailyReportSessions: Int = MergerAdminLimits.maxDailyReportSessions
) {
    router.add(middleware: ProblemMiddleware())
    let admin = router.group("v1/admin").add(middleware: AdminAuthMiddleware<AdminContext>(verifier: keyVerifier))
    SessionsController(repository: sessions).addRoutes(to: admin)
    EventsController(repository: sessions).addRoutes(to: admin)
    DailyAttendanceController(
        repository: sessions, shifts: shifts, minimumPresence: minimumPresence, maxSessions: maxDailyReportSessions
    ).addRoutes(to: admin)
    PipelineController(repository: sessions, groupId: groupId).addRoutes(to: admin)
}
