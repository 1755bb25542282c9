import Testing

@testable import ServiceRuntime

/// The outbox relay's wake-up flag: a wait ends at the signal, at its limit or at cancellation.
@Suite("Outbox relay wake-up", .timeLimit(.minutes(1)))
struct WakeUpTests {
    @Test func aSignalRaisedBeforeTheWaitEndsItAtOnceAndIsLowered() async {
        let wakeUp = WakeUp()
        wakeUp.signal()
        let clock = ContinuousClock()
        let first = await clock.measure { await wakeUp.wait(upTo: .seconds(30)) }
        #expect(first < .seconds(25))
        // Lowered: the next wait runs to its limit.
        let second = await clock.measure { await wakeUp.wait(upTo: .milliseconds(200)) }
        #expect(second >= .milliseconds(200))
    }

    @Test func aSignalDuringTheWaitWakesTheWaiter() async {
        let wakeUp = WakeUp()
        let clock = ContinuousClock()
        async let waited = clock.measure { await wakeUp.wait(upTo: .seconds(30)) }
        try? await Task.sleep(for: .milliseconds(100))
        wakeUp.signal()
        #expect(await waited < .seconds(25))
    }

    @Test func cancellingTheWaitingTaskEndsTheWait() async {
        let wakeUp = WakeUp()
        let clock = ContinuousClock()
        let waiter = Task { await clock.measure { await wakeUp.wait(upTo: .seconds(30)) } }
        try? await Task.sleep(for: .milliseconds(100))
        waiter.cancel()
        #expect(await waiter.value < .seconds(25))
        // The flag still works afterwards.
        wakeUp.signal()
        #expect(await clock.measure { await wakeUp.wait(upTo: .seconds(30)) } < .seconds(25))
    }
}
