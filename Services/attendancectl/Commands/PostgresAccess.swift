import Logging
import PostgresNIO
import ServiceRuntime

/// How a command reaches PostgreSQL: one way, so every command fails alike.
enum PostgresAccess {
    /// Runs `body` (`what` it does, for the error line) with a pooled client of `settings`, within `timeout`.
    ///
    /// It first opens one connection of its own: a pool retries a refused connection or a failed login
    /// until its breaker trips (about a minute) and then names only the breaker, while a single attempt
    /// fails at once with the reason (`password authentication failed`, `connection refused`). Either
    /// way the error is one line naming the database.
    static func withClient<T: Sendable>(
        _ settings: PostgresConfiguration, what: String, logger: Logger, timeout: Duration = .seconds(30),
        _ body: @escaping @Sendable (PostgresClient) async throws -> T
    ) async throws -> T {
        let target = "\(settings.host):\(settings.port)/\(settings.database)"
        do {
            try await withTimeout(.seconds(10)) {
                let connection = try await PostgresConnection.connect(
                    configuration: settings.connectionConfiguration, id: 1, logger: logger)
                try await connection.close()
            }
        } catch {
            throw CLIError("cannot connect to PostgreSQL at \(target): \(PostgresFailure.description(of: error))")
        }
        let client = settings.makeClient(logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            group.addTask {
                do {
                    return try await withTimeout(timeout) { try await body(client) }
                } catch let error as CLIError {
                    throw error
                } catch {
                    let reason = PostgresFailure.cause(of: error) is PSQLError ? PostgresFailure.description(of: error) : "\(error)"
                    throw CLIError("\(what) in PostgreSQL at \(target): \(reason)")
                }
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw CLIError("no answer from PostgreSQL at \(target)")
        }
    }
}
