import PostgresNIO
import _ConnectionPoolModule

/// What PostgreSQL said when it refused: the SQLSTATE, the constraint and the message of a server
/// error, read through PostgresNIO's transaction wrapper.
public struct PostgresFailure: Sendable {
    public static let uniqueViolation = "23505"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
    public static let lockNotAvailable = "55P03"
    /// The statement was cancelled: its `statement_timeout` passed (or an operator cancelled it).
    public static let queryCanceled = "57014"
    /// A write in a read-only transaction: on a standby, or on the report pool.
    public static let readOnlyTransaction = "25006"

    public let sqlState: String
    public let constraint: String?
    public let message: String

    /// nil when `error` (once unwrapped) is no server error.
    public init?(_ error: any Error) {
        guard let psql = Self.cause(of: error) as? PSQLError, let info = psql.serverInfo, let state = info[.sqlState] else { return nil }
        sqlState = state
        constraint = info[.constraintName]
        message = info[.message] ?? state
    }

    /// One line on why a PostgreSQL call failed: the server's own message, else the error's debug text
    /// (PostgresNIO's errors hide their cause from their plain description).
    public static func description(of error: any Error) -> String {
        PostgresFailure(error)?.message ?? String(reflecting: cause(of: error))
    }

    /// Another transaction touched the same rows (a deadlock, a serialization failure): the same work
    /// can run again as it is.
    public var isConflict: Bool { sqlState == Self.serializationFailure || sqlState == Self.deadlockDetected }

    /// The database could not be reached or gave up on the statement for a reason of its own (a lost
    /// connection, a closed pool, a pool that stopped trying to connect for a while after a run of
    /// failed attempts, SQLSTATE classes 08, 40, 53, 57, and 25006, a write that reached a standby): the
    /// same request can succeed later.
    public static func isUnavailable(_ error: any Error) -> Bool {
        let error = cause(of: error)
        // PostgresNIO hands the pool's own error on as it is when its connection attempts kept failing.
        if let pool = error as? ConnectionPoolError { return pool == .connectionCreationCircuitBreakerTripped || pool == .poolShutdown }
        guard let psql = error as? PSQLError else { return false }
        switch psql.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed, .uncleanShutdown:
            return true
        case .server:
            guard let state = psql.serverInfo?[.sqlState] else { return false }
            // 25006 (read-only transaction): a write reached a standby, during a failover before the
            // address moved to the new primary; retried later it reaches the primary.
            return ["08", "40", "53", "57"].contains(String(state.prefix(2))) || state == Self.readOnlyTransaction
        default:
            return false
        }
    }

    /// `error` without PostgresNIO's transaction wrappers: what the transaction's body threw, else its
    /// commit's or its start's error.
    public static func cause(of error: any Error) -> any Error {
        guard let transaction = error as? PostgresTransactionError, let inner = transaction.cause else { return error }
        return cause(of: inner)
    }

    /// Runs `body` (a transaction) and throws its own error in place of PostgresNIO's wrapper.
    public static func unwrapping<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw cause(of: error)
        }
    }
}

extension PostgresTransactionError {
    /// What went wrong: the transaction's own work first, then its commit, then its start.
    public var cause: (any Error)? { closureError ?? commitError ?? beginError }
}
