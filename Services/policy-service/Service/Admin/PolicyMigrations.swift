import Foundation
import ServiceRuntime

extension ServiceMigrations {
    /// The policy service's tables (`Migrations/`): every version of every site's policy, the global
    /// kill switch, and the GATT challenge nonces already presented.
    package static let policy = ServiceMigrations(
        service: "policy-service", defaultSchema: "policy", directory: Bundle.module.url(forResource: "Migrations", withExtension: nil)
    )
}
