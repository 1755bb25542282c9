import AttendanceProtocol
import Foundation
import PolicyServiceCore
import Testing

/// Punches of many users through every rule, the history recorded as the service does, timed.
/// In `make test` it checks the workload's outcome on 2,000 decisions (a debug build); the figure to
/// quote is `make bench-policy`'s (release, one core).
enum PolicyEngineBenchmark {
    struct Result {
        var decisions: Int
        var accepted: Int
        var seconds: Double
        var perSecond: Double { Double(decisions) / seconds }
    }

    static func run(users: Int = 2_000, punchesPerUser: Int = 10) -> Result {
        var registry = World.registry
        for u in 0..<users {
            registry.upsertDevice(DeviceBinding(deviceId: "d_b\(u)", userId: "u_b\(u)", status: .enrolled))
            registry.upsertUser(id: "u_b\(u)", siteIds: [World.hq, World.branch])
        }
        // Built up front: the loop measures decisions, not fixture construction.
        var events: [RawEventEnvelope] = []
        events.reserveCapacity(users * punchesPerUser)
        for p in 0..<punchesPerUser {
            for u in 0..<users {
                events.append(
                    event {
                        $0.key = "k_b\(u)_\(p)"; $0.user = "u_b\(u)"; $0.device = "d_b\(u)"
                        // Punches alternate in and out, but every fifth repeats the previous one's type
                        // 5 s after it at the same gate: a repeated check-in is refused by the rate limit.
                        let repeated = p % 5 == 4 ? p - 1 : p
                        $0.type = repeated % 2 == 0 ? .checkin : .checkout
                        $0.minor = [3, 3, 4, 4, 4][p % 5]
                        $0.time = World.t0 + Double(p) * 600 - (p % 5 == 4 ? 595 : 0)
                        $0.rssi = [-70 - u % 7, -66, -71, -68 - p % 3, -73]
                    })
            }
        }
        let policy = enforceAll(version: 1) {
            $0.minAppVersion = "1.10.0"; $0.minSecondsBetweenGates = 30
        }
        let history = PolicyHistory()
        let engine = PolicyEngine.standard
        var accepted = 0
        let clock = ContinuousClock()
        let start = clock.now
        for e in events {
            let context = PolicyContext(registry: registry, history: history, now: e.receivedAt)
            let decision = engine.decide(e, context: context, policy: policy)
            if history.record(decision, for: e, registry: registry) != nil { accepted += 1 }
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Result(decisions: events.count, accepted: accepted, seconds: seconds)
    }
}

@Suite("Benchmark")
struct BenchmarkTests {
    @Test func policyDecisionsPerSecond() {
        let result = PolicyEngineBenchmark.run(users: 200)
        print(
            "policy decisions/s (one core, every rule enforced): \(Int(result.perSecond)) — \(result.decisions) decisions, \(result.accepted) accepted, \(String(format: "%.3f", result.seconds)) s"
        )
        #expect(result.decisions == 2_000)
        // Punch 9 (a check-in 5 s after check-in 8, same gate) is refused; punch 4 repeats check-out 3,
        // which is accepted with a note (a check-out only ends presence); the rest are accepted.
        #expect(result.accepted == 1_800)
    }
}
