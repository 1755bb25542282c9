import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import Prometheus
import RegistryFeed
import ServiceRuntime

/// The registry's HTTP application: health, metrics and request logs from `ServiceApplication`,
/// then the registry routes (`addRegistryRoutes`).
package func buildApplication(
    configuration: ServiceConfiguration,
    repository: any AdminRegistryRepository,
    devices: DeviceAuthentication,
    lookups: RegistryCache = RegistryCache(),
    readiness: [any ReadinessCheck],
    metrics: PrometheusCollectorRegistry,
    logger: Logger
) -> some ApplicationProtocol {
    ServiceApplication.build(
        configuration: configuration, registry: metrics, readiness: readiness, context: AdminContext.self,
        logger: logger, openAPI: .registry
    ) { router in
        addRegistryRoutes(to: router, repository: repository, devices: devices, lookups: lookups)
    }
}

/// The registry routes alone on a new router (tests drive it with `app.test(.router)`).
package func buildRouter(
    repository: any AdminRegistryRepository, devices: DeviceAuthentication, lookups: RegistryCache = RegistryCache()
) -> Router<AdminContext> {
    let router = Router(context: AdminContext.self)
    addRegistryRoutes(to: router, repository: repository, devices: devices, lookups: lookups)
    return router
}

/// Every registry route:
/// - `POST /v1/devices/enroll` without an API key, `GET /v1/devices/config` with a device token (`devices`);
/// - `/v1/admin/...` behind `AdminAuthMiddleware`, each handler requiring its role;
/// - `/v1/admin/lookup/...` answered from `lookups`, the registry feed's in-memory cache.
/// Every error becomes problem+json (`ProblemMiddleware`).
package func addRegistryRoutes(
    to router: Router<AdminContext>, repository: any AdminRegistryRepository, devices: DeviceAuthentication, lookups: RegistryCache
) {
    router.add(middleware: ProblemMiddleware(.registry))
    EnrollmentController(repository: repository).addRoutes(to: router)
    DeviceConfigurationController(repository: repository, authentication: devices).addRoutes(to: router)
    DeviceTokenController(repository: repository, authentication: devices).addRoutes(to: router)
    let admin = router.group("v1/admin").add(
        middleware: AdminAuthMiddleware<AdminContext>(verifier: RepositoryAdminKeyVerifier(repository: repository)))
    OrganizationsController(repository: repository).addRoutes(to: admin)
    SitesController(repository: repository).addRoutes(to: admin)
    GatesController(repository: repository).addRoutes(to: admin)
    UsersController(repository: repository).addRoutes(to: admin)
    BeaconsController(repository: repository).addRoutes(to: admin)
    DevicesController(repository: repository).addRoutes(to: admin)
    APIKeysController(repository: repository).addRoutes(to: admin)
    LookupController(cache: lookups).addRoutes(to: admin)
}
