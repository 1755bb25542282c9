import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// The registry's schema migrations, bundled with this target (`Migrations/NNNN_name.sql`).
public enum RegistryMigrations {
    /// The name the migrations are recorded under in `schema_migrations`.
    public static let service = "beacon-registry"

    public static func load() throws -> [Migration] {
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw RegistryMigrationsError.bundleHasNoMigrations
        }
        return try MigrationRunner.load(directory: directory)
    }

    /// Applies what is missing (safe from every replica at start-up: the runner serializes them).
    /// - Returns: the migrations this call applied.
    @discardableResult
    public static func apply(client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try await MigrationRunner(service: service, migrations: load(), client: client, logger: logger).run()
    }
}

public enum RegistryMigrationsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The target was built without its `Migrations` resource folder.
    case bundleHasNoMigrations

    public var description: String {
        switch self {
        case .bundleHasNoMigrations: return "the BeaconRegistryCore bundle has no Migrations folder (declare resources: [.copy(\"Migrations\")])"
        }
    }
}
