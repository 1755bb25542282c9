import Foundation
import ServiceRuntime

extension ServiceMigrations {
    /// The merger's tables (`Migrations/`): events, sessions, timelines, consumer offsets and the
    /// session change outbox.
    package static let merger = ServiceMigrations(
        service: "session-merger", defaultSchema: "merger", directory: Bundle.module.url(forResource: "Migrations", withExtension: nil)
    )
}
