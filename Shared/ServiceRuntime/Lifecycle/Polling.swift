import Logging

/// Checks `condition` every `interval` until it holds: `true` then, `false` once `timeout` passed
/// (or the task was cancelled) first. For waits on state another task or process changes (a group
/// assignment, a cache catching up, rows being published).
public func poll(
    every interval: Duration = .milliseconds(20), timeout: Duration, until condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
        try? await Task.sleep(for: interval)
    }
    return true
}

extension Duration {
    /// Whole milliseconds (rounded down), for logs and for settings PostgreSQL takes in milliseconds.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// Runs `attempt` until it succeeds, with a backoff from 100 ms doubling to 5 s between failures, each
/// logged at `error` with PostgreSQL's own message (`PostgresFailure.description(of:)`), until `within`
/// has passed or the task is cancelled: then the last error. For steps that must not be skipped
/// because the database is away for a moment (a restart), but must not wait for ever either.
public func retrying<T: Sendable>(
    _ what: String, within: Duration, logger: Logger, _ attempt: () async throws -> T
) async -> Result<T, any Error> {
    let deadline = ContinuousClock.now + within
    var backoff = Duration.milliseconds(100)
    while true {
        do {
            return .success(try await attempt())
        } catch {
            guard !Task.isCancelled, ContinuousClock.now + backoff < deadline else { return .failure(error) }
            logger.error(
                "\(what) failed; retrying",
                metadata: ["error": .string(PostgresFailure.description(of: error)), "retryIn": .string("\(backoff)")])
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, .seconds(5))
        }
    }
}
