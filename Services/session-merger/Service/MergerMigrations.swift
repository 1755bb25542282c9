import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// The merger's schema migrations, bundled with this target (`Migrations/NNNN_name.sql`).
public enum MergerMigrations {
    /// The name the migrations are recorded under in `schema_migrations`.
    public static let service = "session-merger"

    public static func load() throws -> [Migration] {
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw MergerMigrationsError.bundleHasNoMigrations
        }
        return try MigrationRunner.load(directory: directory)
    }

    /// Applies what is missing (safe from every replica at start-up: the runner serializes them).
    @discardableResult
    public static func apply(client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try await MigrationRunner(service: service, migrations: load(), client: client, logger: logger).run()
    }
}

public enum MergerMigrationsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The target was built without its `Migrations` resource folder.
    case bundleHasNoMigrations

    public var description: String {
        "the SessionMergerService bundle has no Migrations folder (declare resources: [.copy(\"Migrations\")])"
    }
}
