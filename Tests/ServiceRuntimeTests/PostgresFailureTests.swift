import AttendanceProtocol
import Logging
import PostgresNIO
import Synchronization
import Testing
import _ConnectionPoolModule

@testable import ServiceRuntime

/// What a request that met an unreachable database answers, whatever layer of PostgresNIO said so.
@Suite("A database that cannot be reached")
struct PostgresFailureTests {
    /// After a run of failed connection attempts the pool stops trying for a while and fails every
    /// request with its own error, which PostgresNIO hands on as it is: still a 503 with Retry-After.
    @Test func aPoolThatStoppedConnectingIsA503() {
        for error: any Error in [ConnectionPoolError.connectionCreationCircuitBreakerTripped, ConnectionPoolError.poolShutdown] {
            #expect(PostgresFailure.isUnavailable(error), "\(error)")
            let problem = ProblemMapper().problem(for: error)
            #expect(problem.status == 503 && problem.retryAfterSeconds == 1, "\(error)")
        }
        // A request the pool dropped because its caller gave up is not the database's absence.
        #expect(!PostgresFailure.isUnavailable(ConnectionPoolError.requestCancelled))
    }
}

/// A consumer that cannot store its batches says so on `/health/ready`.
@Suite("Readiness while no batch can be stored")
struct BatchStoreHealthTests {
    @Test func everyAttemptFailingForTheBoundMakesTheServiceUnreadyAndAStoreMakesItReadyAgain() async throws {
        let health = BatchStoreHealth(unreadyAfter: .milliseconds(200))
        let logger = Logger(label: "batch-store-health")
        let attempts = Mutex(0)
        struct Refused: Error, CustomStringConvertible { var description: String { "the disk is full" } }
        let stored: Int? = await BatchStoreRetry.untilStored(messages: 1, logger: logger, health: health) {
            let attempt = attempts.withLock {
                $0 += 1; return $0
            }
            if attempt == 1 { try await health.check() } // one failure is not unready
            if attempt < 5 { throw Refused() } // 100 + 200 + 400 ms of failures: past the bound
            // Still failing up to now: unready, naming the last error.
            await #expect(throws: BatchStoreHealth.NotStoring.self) { try await health.check() }
            do { try await health.check() } catch { #expect("\(error)".contains("the disk is full")) }
            return attempt
        }
        #expect(stored == 5)
        try await health.check()
    }

    /// A store that never answers (a statement waiting on a lock, a pool with every connection taken)
    /// fails no attempt, yet stores nothing: unready too, once the attempt has run for the bound.
    @Test func anAttemptWithNoAnswerForTheBoundMakesTheServiceUnready() async throws {
        let health = BatchStoreHealth(unreadyAfter: .seconds(60))
        let release = AsyncStream<Void>.makeStream()
        let (started, starting) = AsyncStream<ContinuousClock.Instant>.makeStream()
        let storing = Task {
            await BatchStoreRetry.untilStored(messages: 1, logger: Logger(label: "batch-store-health"), health: health) {
                starting.yield(ContinuousClock.now) // after the attempt began
                for await _ in release.stream { break }
                return 1
            }
        }
        var attemptUnderWay: ContinuousClock.Instant?
        for await instant in started {
            attemptUnderWay = instant
            break
        }
        let underWay = try #require(attemptUnderWay)
        // Judged at given instants, not by sleeping: a loaded machine does not move the bound.
        try health.check(now: underWay)
        #expect(throws: BatchStoreHealth.NotStoring.self) { try health.check(now: underWay + .seconds(61)) }
        do { try health.check(now: underWay + .seconds(61)) } catch { #expect("\(error)".contains("under way")) }
        release.continuation.yield()
        #expect(await storing.value == 1)
        try health.check(now: underWay + .seconds(61))
    }

    /// Two stores at once (the policy stores a batch's punches while the next batch reads): one that
    /// hangs is not hidden by the other's success or failure.
    @Test func aHungAttemptIsNotHiddenByAnotherThatEnds() throws {
        let health = BatchStoreHealth(unreadyAfter: .seconds(60))
        let start = ContinuousClock.now
        let hung = health.attempting(now: start)
        let quick = health.attempting(now: start + .seconds(1))
        health.stored(quick)
        let failing = health.attempting(now: start + .seconds(2))
        struct Refused: Error {}
        health.failed(Refused(), attempt: failing, now: start + .seconds(3))
        health.stored(health.attempting(now: start + .seconds(4)))
        #expect(throws: BatchStoreHealth.NotStoring.self) { try health.check(now: start + .seconds(61)) }
        health.stored(hung)
        try health.check(now: start + .seconds(61))
    }
}
