import Logging
import Synchronization

/// A failure that can happen once per request or per event (the broker or the database away while the
/// traffic goes on), logged at most once per `interval`: the first at once, then at most one line per
/// interval, carrying how many were left out since the line before (`omitted`). Counting every one is
/// the metrics' job; the log says that it happens, why, and roughly how often.
public final class RepeatedFailureLog: Sendable {
    public let interval: Duration
    private let state = Mutex(State())

    private struct State {
        var lastLogged: ContinuousClock.Instant?
        var omitted = 0
    }

    public init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Logs `message` unless a line was logged less than `interval` ago (then it only counts it).
    public func log(
        _ level: Logger.Level, _ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:],
        logger: Logger, now: ContinuousClock.Instant = .now
    ) {
        guard let omitted = admit(now: now) else { return }
        var metadata = metadata()
        if omitted > 0 { metadata["omitted"] = "\(omitted)" }
        logger.log(level: level, message(), metadata: metadata)
    }

    /// How many were left out since the last line when this one is to be logged; nil when it is left out.
    func admit(now: ContinuousClock.Instant) -> Int? {
        state.withLock { state in
            if let last = state.lastLogged, now - last < interval {
                state.omitted += 1
                return nil
            }
            defer {
                state.lastLogged = now
                state.omitted = 0
            }
            return state.omitted
        }
    }
}
