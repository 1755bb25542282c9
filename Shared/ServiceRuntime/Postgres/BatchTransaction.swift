import AttendanceProtocol
import Logging
import PostgresNIO

/// One consumer batch stored in one PostgreSQL transaction, for an owner that keeps its consumer
/// offsets with its results. The batch's undecodable messages go to the dead-letter topic first, so
/// a poison message never holds up its partition; then `body` runs in a transaction, and again at
/// once when it lost a race with another replica (`isConflict`: by default a deadlock or a
/// serialization failure), at most `retries` more times. Any other failure is thrown as the
/// transaction's own error (`PostgresFailure.unwrapping`); the caller's `BatchStoreRetry` backs off.
public enum BatchTransaction {
    public static func run<Result>(
        client: PostgresClient, deadLetters letters: [DeadLetter], to sink: any DeadLetterSink, retries: Int, logger: Logger,
        isConflict: (any Error) -> Bool = { PostgresFailure($0)?.isConflict == true },
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> (result: Result, attempts: Int) {
        if !letters.isEmpty {
            logger.warning("undecodable messages sent to the dead-letter topic", metadata: ["count": "\(letters.count)"])
            try await sink.send(letters)
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                let result = try await PostgresFailure.unwrapping {
                    try await client.withTransaction(logger: logger, body)
                }
                return (result, attempt)
            } catch let error where attempt <= retries && isConflict(error) {
                logger.info(
                    "batch transaction lost a race with another replica; retrying",
                    metadata: ["reason": .string("\(error)"), "attempt": "\(attempt)"])
            }
        }
    }
}
