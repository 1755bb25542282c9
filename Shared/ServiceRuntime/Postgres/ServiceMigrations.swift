import Foundation
import Logging
import PostgresNIO

/// A service's schema changes: `NNNN_description.sql` files bundled with its target (a `Migrations`
/// resource folder), in which `__SCHEMA__` stands for the name of the schema they build. The schema
/// is a parameter: production uses the service's own (`merger`, `registry`, ...), a test may use one
/// of its own on the shared database.
///
/// A file may also name a statement block that ServiceRuntime owns because several services apply it
/// to a table ServiceRuntime defines (`fragments`, e.g. `StoredOffsetsTable.byLanePlaceholder`); it is
/// replaced by that block before the schema is substituted.
///
/// Each schema is its own migration series in `schema_migrations`: the service's name for the
/// default schema, `service@schema` for any other, so a test schema never masks the real one.
/// Substituting the default schema gives back exactly the text that was applied, so checksums of
/// migrations applied before the placeholder existed still match.
public struct ServiceMigrations: Sendable {
    /// The series name for the default schema (e.g. `session-merger`).
    public let service: String
    public let defaultSchema: String
    let directory: URL?

    /// The placeholder in the migration files.
    public static let schemaPlaceholder = "__SCHEMA__"

    /// The statement blocks a migration file may name, by their placeholder.
    public static let fragments = [StoredOffsetsTable.byLanePlaceholder: StoredOffsetsTable.byLaneMigration]

    /// - Parameter directory: the bundled folder, `Bundle.module.url(forResource: "Migrations", withExtension: nil)`.
    public init(service: String, defaultSchema: String, directory: URL?) {
        precondition(Self.isValidSchemaName(defaultSchema), "invalid schema name \(defaultSchema)")
        self.service = service
        self.defaultSchema = defaultSchema
        self.directory = directory
    }

    /// Lower-case letters, digits and underscores, starting with a letter or underscore, at most 63
    /// bytes: safe to splice into SQL, where an identifier cannot be a bound parameter.
    public static func isValidSchemaName(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 63 else { return false }
        func isLetter(_ c: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || c == UInt8(ascii: "_") }
        return isLetter(first) && name.utf8.allSatisfy { isLetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// The `schema_migrations` series of a schema.
    public func series(schema: String) -> String {
        schema == defaultSchema ? service : "\(service)@\(schema)"
    }

    /// The migrations that build `schema` (default: the service's own), in version order.
    public func load(schema: String? = nil) throws -> [Migration] {
        let schema = schema ?? defaultSchema
        guard Self.isValidSchemaName(schema) else {
            throw MigrationError(
                description:
                    "invalid schema name \"\(schema)\" for \(service): lower-case letters, digits and underscores, starting with a letter")
        }
        guard let directory else {
            throw MigrationError(
                description: "the \(service) target was built without its Migrations folder (declare resources: [.copy(\"Migrations\")])")
        }
        return try MigrationRunner.load(directory: directory).map {
            let sql = Self.fragments.reduce($0.sql) { sql, fragment in sql.replacingOccurrences(of: fragment.key, with: fragment.value) }
            return Migration(version: $0.version, name: $0.name, sql: sql.replacingOccurrences(of: Self.schemaPlaceholder, with: schema))
        }
    }

    /// Applies what `schema` is missing (safe from every replica at start-up: the runner serializes them).
    /// - Returns: the migrations this call applied (empty when the schema was up to date).
    @discardableResult
    public func apply(client: PostgresClient, schema: String? = nil, logger: Logger) async throws -> [Migration] {
        let schema = schema ?? defaultSchema
        return try await MigrationRunner(service: series(schema: schema), migrations: load(schema: schema), client: client, logger: logger)
            .run()
    }
}
