import AttendanceProtocol
import PostgresNIO
import ServiceRuntime
import Testing
import _ConnectionPoolModule

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
