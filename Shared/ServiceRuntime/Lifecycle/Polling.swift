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
