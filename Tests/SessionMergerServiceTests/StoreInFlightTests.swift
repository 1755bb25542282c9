import Logging
import ServiceRuntime
import Synchronization
import Testing

@testable import SessionMergerService

/// Partitions are given up (a rebalance, leaving the group at shutdown) only once the batch being
/// stored is stored, so the next owner loads offsets that include it.
@Suite("Merger: a partition is given up after its batch is stored")
struct StoreInFlightTests {
    static let logger = Logger(label: "store-in-flight")

    @Test func theRevokeWaitsForTheBatchBeingStored() async throws {
        let inFlight = StoreInFlight()
        let journal = Mutex<[String]>([])
        inFlight.began()
        let listener = StoredOffsetsListener(
            logger: Self.logger, beforeRevoke: { await inFlight.waitUntilStored(logger: Self.logger) }, storedOffsets: { _ in [:] })
        let revoke = Task {
            await listener.partitionsRevoked([])
            journal.withLock { $0.append("revoked") }
        }
        try await Task.sleep(for: .milliseconds(100))
        journal.withLock { $0.append("stored") }
        inFlight.ended()
        await revoke.value
        #expect(journal.withLock { $0 } == ["stored", "revoked"])
    }

    @Test func aStoreThatDoesNotEndHoldsTheRevokeNoLongerThanTheTimeout() async {
        let inFlight = StoreInFlight()
        inFlight.began()
        let started = ContinuousClock.now
        await inFlight.waitUntilStored(timeout: .milliseconds(200), logger: Self.logger)
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        #expect(inFlight.storing)
    }
}
