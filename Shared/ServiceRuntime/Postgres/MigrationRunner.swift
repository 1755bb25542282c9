import Crypto
import Foundation
import Logging
import PostgresNIO

/// One ordered schema change of a service: `NNNN_description.sql`.
public struct Migration: Sendable, Hashable {
    public let version: Int
    public let name: String
    public let sql: String

    /// Detects an applied migration whose file was edited afterwards.
    public var checksum: String {
        SHA256.hash(data: Data(sql.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

public struct MigrationError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// Applies a service's migrations, each once, in version order, each in its own transaction,
/// recorded in `public.schema_migrations` (named in full: a client's search path may put a service's
/// own schema first). Replicas starting together serialize on an advisory lock, so
/// running it from every instance at start-up is safe.
///
/// A statement waits at most `lockTimeout` for a table's lock (a long query holding it): a migration
/// never queues every later read and write of a busy table behind itself. The migration is rolled back
/// and tried again, `lockAttempts` times in all, then start-up fails saying so.
public struct MigrationRunner: Sendable {
    public let service: String
    public let migrations: [Migration]
    let client: PostgresClient
    let logger: Logger
    let lockTimeout: Duration
    let lockAttempts: Int

    public init(
        service: String, migrations: [Migration], client: PostgresClient, logger: Logger, lockTimeout: Duration = .seconds(5),
        lockAttempts: Int = 12
    ) {
        self.service = service
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.client = client
        self.logger = logger
        self.lockTimeout = lockTimeout
        self.lockAttempts = max(1, lockAttempts)
    }

    /// A statement of a migration gave up waiting for a lock (SQLSTATE 55P03).
    struct LockNotAvailable: Error {
        var message: String
    }

    /// Loads `NNNN_name.sql` files from a directory (e.g. a target's bundled `Migrations` folder).
    public static func load(directory: URL) throws -> [Migration] {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
        var seen: [Int: String] = [:]
        return try files.map { file in
            let base = file.deletingPathExtension().lastPathComponent
            guard let underscore = base.firstIndex(of: "_"), let version = Int(base[..<underscore]), version > 0 else {
                throw MigrationError(description: "migration file \(file.lastPathComponent) must be named NNNN_description.sql")
            }
            if let other = seen[version] {
                throw MigrationError(description: "migrations \(other) and \(file.lastPathComponent) have the same version \(version)")
            }
            seen[version] = file.lastPathComponent
            return Migration(
                version: version, name: String(base[base.index(after: underscore)...]), sql: try String(contentsOf: file, encoding: .utf8))
        }.sorted { $0.version < $1.version }
    }

    /// The trigger function that wakes an `OutboxRelay` at the commit of rows added to its table.
    /// Created with `schema_migrations`, before any migration runs, so that a service's migration
    /// names it in the outbox table's trigger, with the channel of the relay's `notificationChannel`:
    /// `AFTER INSERT ON <table> FOR EACH STATEMENT EXECUTE FUNCTION public.notify_outbox_relay('<channel>')`.
    static var outboxNotifyFunction: PostgresQuery {
        PostgresQuery(
            unsafeSQL: "CREATE OR REPLACE FUNCTION public.notify_outbox_relay() RETURNS trigger LANGUAGE plpgsql AS $$\(outboxNotifyBody)$$"
        )
    }

    /// The function's body, as PostgreSQL keeps it (`pg_proc.prosrc`).
    static let outboxNotifyBody = """

        BEGIN
            PERFORM pg_notify(TG_ARGV[0], '');
            RETURN NULL;
        END

        """

    /// Creates `public.schema_migrations` and the current `public.notify_outbox_relay()` unless both
    /// are there already, and only then takes the database-wide lock: starts that find them (every
    /// start after the first) never wait on one another.
    private func createBookkeepingUnlessCurrent() async throws {
        let body = Self.outboxNotifyBody
        let rows = try await client.query(
            """
            SELECT to_regclass('public.schema_migrations') IS NOT NULL AND EXISTS (
                SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND p.proname = 'notify_outbox_relay' AND p.prosrc = \(body))
            """, logger: logger)
        for try await current in rows.decode(Bool.self) where current { return }
        try await client.withTransaction(logger: logger) { connection in
            // Concurrent `CREATE TABLE IF NOT EXISTS` can still fail on a new database (a unique
            // violation in the catalog) when replicas or services start together: serialize it.
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext('schema_migrations'))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS public.schema_migrations (
                    service text NOT NULL,
                    version integer NOT NULL,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (service, version)
                )
                """, logger: logger)
            try await connection.query(Self.outboxNotifyFunction, logger: logger)
        }
    }

    /// - Returns: the migrations this call applied (empty when the schema was up to date).
    @discardableResult
    public func run() async throws -> [Migration] {
        do {
            try await createBookkeepingUnlessCurrent()
        } catch {
            throw MigrationError(description: "creating schema_migrations failed: \(PostgresFailure.description(of: error))")
        }
        var applied: [Migration] = []
        for migration in migrations {
            var attempt = 1
            while true {
                do {
                    if try await apply(migration) { applied.append(migration) }
                    break
                } catch let error as LockNotAvailable {
                    let what = "migration \(service) \(migration.version)_\(migration.name)"
                    guard attempt < lockAttempts else {
                        throw MigrationError(
                            description:
                                "\(what) could not lock what it changes in \(lockAttempts) attempts of \(lockTimeout) (\(error.message)): a long query or transaction holds it; start again once it ends"
                        )
                    }
                    logger.warning(
                        "a migration waited too long for a lock; trying again",
                        metadata: ["migration": .string(what), "attempt": "\(attempt)", "error": .string(error.message)])
                    attempt += 1
                    try await Task.sleep(for: .seconds(1))
                }
            }
        }
        return applied
    }

    /// Takes the transaction-scoped advisory lock `key` if it is free; false when another holds it.
    private static func tryLock(_ key: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.query("SELECT pg_try_advisory_xact_lock(hashtext(\(key)))", logger: logger)
        for try await locked in rows.decode(Bool.self) { return locked }
        return false
    }

    /// Applies `migration` unless it was; true when this call applied it.
    private func apply(_ migration: Migration) async throws -> Bool {
        let service = self.service
        let logger = self.logger
        let lockTimeoutMs = lockTimeout.milliseconds
        let didApply = try await PostgresFailure.unwrapping {
            try await client.withTransaction(logger: logger) { connection -> Bool in
                // Replicas wait for each other as long as it takes, a second at a time: a wait inside
                // PostgreSQL would not end when the process is asked to stop (a query once sent is not
                // cancelled), and a replica stopped during another's long index build would crash at the
                // end of its shutdown bound instead of exiting.
                let lockKey = "schema_migrations:\(service)"
                var waited = 0
                while try await !Self.tryLock(lockKey, on: connection, logger: logger) {
                    if waited % 30 == 0 {
                        logger.info(
                            "waiting for another process applying this service's migrations",
                            metadata: ["service": .string(service), "waitedSeconds": "\(waited)"])
                    }
                    waited += 1
                    try await Task.sleep(for: .seconds(1))
                }
                try await connection.query(PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = \(max(1, lockTimeoutMs))"), logger: logger)
                let version = migration.version
                let rows = try await connection.query(
                    "SELECT checksum FROM public.schema_migrations WHERE service = \(service) AND version = \(version)", logger: logger
                )
                for try await (checksum) in rows.decode(String.self) {
                    guard checksum == migration.checksum else {
                        throw MigrationError(
                            description:
                                "migration \(service) \(version)_\(migration.name) was changed after it was applied (checksum differs); add a new migration instead"
                        )
                    }
                    return false
                }
                for statement in SQLStatementSplitter.split(migration.sql) {
                    do {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    } catch let error as PSQLError {
                        let message = error.serverInfo?[.message] ?? "\(error)"
                        if PostgresFailure(error)?.sqlState == PostgresFailure.lockNotAvailable { throw LockNotAvailable(message: message) }
                        throw MigrationError(description: "migration \(service) \(version)_\(migration.name) failed: \(message)")
                    }
                }
                let name = migration.name
                let checksum = migration.checksum
                try await connection.query(
                    "INSERT INTO public.schema_migrations (service, version, name, checksum) VALUES (\(service), \(version), \(name), \(checksum))",
                    logger: logger
                )
                return true
            }
        }
        if didApply {
            logger.info(
                "migration applied",
                metadata: ["service": .string(service), "version": "\(migration.version)", "name": .string(migration.name)])
        }
        return didApply
    }
}

/// Splits a SQL script into statements at top-level semicolons. PostgresNIO speaks the extended
/// protocol only, which takes one statement per query. Quotes, quoted identifiers, dollar-quoted
/// bodies (functions, DO blocks) and comments are respected.
public enum SQLStatementSplitter {
    public static func split(_ sql: String) -> [String] {
        let chars = Array(sql.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var i = 0
        func flush() {
            let text = String(current).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty, !isOnlyComments(text) { statements.append(text) }
            current = String.UnicodeScalarView()
        }
        while i < chars.count {
            let c = chars[i]
            let next: Unicode.Scalar? = i + 1 < chars.count ? chars[i + 1] : nil
            if c == "-" && next == "-" {
                while i < chars.count && chars[i] != "\n" { current.append(chars[i]); i += 1 }
                continue
            }
            if c == "/" && next == "*" {
                current.append(c); current.append("*"); i += 2
                while i < chars.count && !(chars[i] == "*" && i + 1 < chars.count && chars[i + 1] == "/") {
                    current.append(chars[i]); i += 1
                }
                if i < chars.count { current.append("*"); current.append("/"); i += 2 }
                continue
            }
            if c == "'" || c == "\"" {
                current.append(c); i += 1
                while i < chars.count {
                    current.append(chars[i])
                    if chars[i] == c {
                        if i + 1 < chars.count && chars[i + 1] == c { current.append(chars[i + 1]); i += 2; continue }
                        i += 1
                        break
                    }
                    i += 1
                }
                continue
            }
            if c == "$", let tagEnd = dollarTagEnd(chars, from: i) {
                let tag = Array(chars[i...tagEnd])
                for s in tag { current.append(s) }
                i = tagEnd + 1
                while i < chars.count {
                    if chars[i] == "$", i + tag.count <= chars.count, Array(chars[i..<(i + tag.count)]) == tag {
                        for s in tag { current.append(s) }
                        i += tag.count
                        break
                    }
                    current.append(chars[i]); i += 1
                }
                continue
            }
            if c == ";" {
                flush()
                i += 1
                continue
            }
            current.append(c)
            i += 1
        }
        flush()
        return statements
    }

    /// `$tag$` or `$$` starting at `start`; returns the index of the closing `$` of the tag.
    private static func dollarTagEnd(_ chars: [Unicode.Scalar], from start: Int) -> Int? {
        var j = start + 1
        while j < chars.count {
            let s = chars[j]
            if s == "$" { return j }
            guard s == "_" || s.properties.isAlphabetic || (j > start + 1 && s.properties.numericType != nil) else { return nil }
            j += 1
        }
        return nil
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        text.split(separator: "\n").allSatisfy {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix("--") || $0.trimmingCharacters(in: .whitespaces).isEmpty
        }
    }
}
