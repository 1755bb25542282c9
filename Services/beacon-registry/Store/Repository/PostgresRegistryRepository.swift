import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Logging
import PostgresNIO
import ServiceRuntime

/// `RegistryRepository` on PostgreSQL (schema `registry`, see `Migrations/`).
///
/// Each write is one transaction that also appends the change to `change_outbox`, so a
/// change is published if and only if it committed. Allocations serialize on a parent row
/// (`SELECT … FOR NO KEY UPDATE` on the organization, the shard or the namespace) and the unique
/// constraints stay the last word: a unique violation on an allocation key, a deadlock or a
/// serialization failure is retried a few times before it surfaces as `.contention`.
package struct PostgresRegistryRepository: RegistryRepository {
    let client: PostgresClient
    let logger: Logger
    let tokenSigner: DeviceTokenSigner
    let deviceTokenLifetime: Duration
    /// Injected so that tests can move time (expiry, verification windows).
    let now: @Sendable () -> Date
    /// Seals the beacons' GATT keys at rest and on the feed; `nil` (no `BEACON_KEY_SEAL_KEY`): beacons
    /// get no key and key rotation answers 503.
    let beaconKeySealer: BeaconKeySealer?

    /// How often a write that lost a race is retried before `.contention` is thrown.
    static let maxAttempts = 8

    /// - Parameters:
    ///   - tokenSigner: signs the credentials of enrolled devices.
    ///   - deviceTokenLifetime: how long a device token is valid (default 90 days).
    ///   - now: the clock every stored timestamp comes from.
    ///   - beaconKeySealer: seals beacon GATT keys (see `PostgresRegistryRepository+BeaconKeys`).
    package init(
        client: PostgresClient, logger: Logger, tokenSigner: DeviceTokenSigner,
        deviceTokenLifetime: Duration = .seconds(90 * 86_400), now: @escaping @Sendable () -> Date = { Date() },
        beaconKeySealer: BeaconKeySealer? = nil
    ) {
        self.beaconKeySealer = beaconKeySealer
        self.client = client
        self.logger = logger
        self.tokenSigner = tokenSigner
        self.deviceTokenLifetime = deviceTokenLifetime
        self.now = now
    }

    // MARK: Transactions and errors

    /// Runs `body` in a transaction, retrying races, and turns every failure into a `RegistryError`.
    ///
    /// - Parameters:
    ///   - retryingOn: unique constraints whose violation means "lost an allocation race": retried.
    ///   - constraintErrors: what a violation of each named constraint means to the caller.
    func write<T: Sendable>(
        _ operation: String,
        retryingOn retryable: Set<String> = [],
        constraintErrors: [String: RegistryError] = [:],
        _ body: (PostgresConnection) async throws -> T
    ) async throws(RegistryError) -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.withTransaction(logger: logger) { connection in
                    try await body(connection)
                }
            } catch {
                let cause = PostgresFailure.cause(of: error)
                if let registryError = cause as? RegistryError { throw registryError }
                if let server = PostgresFailure(cause) {
                    if server.isRetryable(uniqueConstraints: retryable) {
                        guard attempt < Self.maxAttempts else {
                            throw .contention("\(operation) lost \(attempt) races (\(server.constraint ?? server.sqlState))")
                        }
                        logger.debug("retrying after a lost race", metadata: ["operation": .string(operation), "attempt": "\(attempt)"])
                        continue
                    }
                    if let constraint = server.constraint, let mapped = constraintErrors[constraint] { throw mapped }
                    if let refused = server.refusal(operation) { throw refused }
                    throw .storage("\(operation): \(server.message)")
                }
                throw .storage("\(operation): \(String(describing: cause))")
            }
        }
    }

    /// Runs a read on a pooled connection, turning failures into `RegistryError`; with `snapshot`, its
    /// statements in one read-only repeatable-read transaction (they all see the same data).
    func read<T: Sendable>(
        _ operation: String, snapshot: Bool = false, _ body: (PostgresConnection) async throws -> T
    ) async throws(RegistryError) -> T {
        do {
            guard snapshot else { return try await client.withConnection { connection in try await body(connection) } }
            return try await client.withTransaction(logger: logger) { connection in
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                return try await body(connection)
            }
        } catch {
            let cause = PostgresFailure.cause(of: error)
            if let registryError = cause as? RegistryError { throw registryError }
            if let server = PostgresFailure(cause) { throw server.refusal(operation) ?? .storage("\(operation): \(server.message)") }
            throw .storage("\(operation): \(String(describing: cause))")
        }
    }

}

extension PostgresFailure {
    /// A value refused for what it is, or a conflict with stored data (`StorageRefusal`), not a failure.
    func refusal(_ operation: String) -> RegistryError? {
        StorageRefusal(sqlState: sqlState).map { .refusedByStorage(operation: operation, $0) }
    }

    /// A lost race: a conflict, or a unique violation on one of `uniqueConstraints` (a generated id or
    /// an allocated number another transaction took first).
    func isRetryable(uniqueConstraints: Set<String>) -> Bool {
        isConflict || (sqlState == Self.uniqueViolation && constraint.map(uniqueConstraints.contains) == true)
    }
}

extension PostgresConnection {
    /// Every row of a query (the queries here return a handful).
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }

    func firstRow(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRow? {
        try await rows(query, logger: logger).first
    }

    /// The one row of an `INSERT … RETURNING` or an aggregate.
    func singleRow(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRow {
        guard let row = try await firstRow(query, logger: logger) else { throw NoRowReturned() }
        return row
    }
}

struct NoRowReturned: Error, CustomStringConvertible {
    var description: String { "the statement returned no row" }
}
