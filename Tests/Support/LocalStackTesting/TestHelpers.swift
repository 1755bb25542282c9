import AttendanceProtocol
import Foundation
import ServiceRuntime
import Synchronization

/// Eight random lower-case hex digits: a suffix that keeps a test's ids, names and schemas its own.
public func token() -> String { String(UUID().uuidString.prefix(8)).lowercased() }

/// A dead-letter sink that keeps what it was sent, for a test to read.
public final class CollectingDeadLetters: DeadLetterSink {
    let letters = Mutex<[DeadLetter]>([])

    public init() {}

    public func send(_ letters: [DeadLetter]) async throws {
        self.letters.withLock { $0 += letters }
    }

    /// Everything sent so far, in order.
    public var all: [DeadLetter] { letters.withLock { $0 } }
}

/// A wait that ran out: what was awaited.
public struct TimedOut: Error, CustomStringConvertible {
    public let what: String
    public init(_ what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

/// Waits until `condition` holds, checking every `interval` (`poll`), and gives back how long that
/// took; throws `TimedOut` naming `what` once `timeout` passed first.
@discardableResult
public func eventually(
    _ what: String, timeout: Duration = .seconds(30), every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws -> Duration {
    let start = ContinuousClock.now
    guard try await poll(every: interval, timeout: timeout, until: condition) else { throw TimedOut(what) }
    return ContinuousClock.now - start
}

/// A new idempotency key shaped like a phone's: 64 random lower-case hex digits.
public func newKey() -> String {
    (0..<4).map { _ in String(format: "%016llx", UInt64.random(in: 0...UInt64.max)) }.joined()
}
