import Foundation
import ServiceRuntime

extension ServiceMigrations {
    /// The telemetry aggregator's tables (`Migrations/`): device telemetry and its rollups.
    public static let telemetry = ServiceMigrations(
        service: "telemetry-aggregator", defaultSchema: "telemetry",
        directory: Bundle.module.url(forResource: "Migrations", withExtension: nil)
    )
}
