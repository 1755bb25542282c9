import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// The schema name goes into SQL text (identifiers cannot be bound), so it is checked first.
public enum TelemetrySchema {
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 63 else { return false }
        let lower = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz_")
        let rest = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789_")
        return lower.contains(first) && name.unicodeScalars.allSatisfy { rest.contains($0) }
    }
}

/// The aggregator's migrations (`Migrations/NNNN_name.sql`, `__SCHEMA__` replaced by the schema).
/// Recorded in `schema_migrations` as `telemetry-aggregator` for the production schema and
/// `telemetry-aggregator@<schema>` for any other, so a test schema never masks the real one.
public enum TelemetryMigrations {
    public static let service = "telemetry-aggregator"

    public static func serviceName(schema: String) -> String {
        schema == "telemetry" ? service : "\(service)@\(schema)"
    }

    public static func load(schema: String = "telemetry") throws -> [Migration] {
        guard TelemetrySchema.isValidName(schema) else {
            throw TelemetryMigrationsError(description: "invalid telemetry schema name \"\(schema)\"")
        }
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw TelemetryMigrationsError(description: "the TelemetryAggregatorService bundle has no Migrations folder (resources: [.copy(\"Migrations\")])")
        }
        return try MigrationRunner.load(directory: directory).map {
            Migration(version: $0.version, name: $0.name, sql: $0.sql.replacingOccurrences(of: "__SCHEMA__", with: schema))
        }
    }

    @discardableResult
    public static func apply(schema: String = "telemetry", client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try await MigrationRunner(service: serviceName(schema: schema), migrations: load(schema: schema), client: client, logger: logger).run()
    }
}

public struct TelemetryMigrationsError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
}
