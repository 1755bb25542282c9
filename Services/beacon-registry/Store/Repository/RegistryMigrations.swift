import AccessControl
import BeaconRegistryCore
import Foundation
import ServiceRuntime

extension ServiceMigrations {
    /// The registry's tables (`Migrations/`): organizations, places, beacons, people, devices, keys and
    /// the change outbox.
    package static let registry = ServiceMigrations(
        service: "beacon-registry", defaultSchema: RegistrySchema.defaultName,
        directory: Bundle.module.url(forResource: "Migrations", withExtension: nil)
    )
}
