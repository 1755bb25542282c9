import Foundation
import ServiceRuntime

extension ServiceMigrations {
    /// The telemetry aggregator's tables (`Migrations/`): device telemetry and its rollups.
    package static let telemetry = ServiceMigrations(
        service: "telemetry-aggregator", defaultSchema: "telemetry",
        directory: Bundle.module.url(forResource: "Migrations", withExtension: nil)
    )
}
