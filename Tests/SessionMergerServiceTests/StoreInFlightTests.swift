import KafkaClient
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

    /// PostgreSQL does not answer while partitions are assigned (restarting): the listener reads the
    /// stored offsets again rather than leaving the partitions at the broker's offsets, which could store
    /// past records a restored database lost; it gives up (the process ends) only after its deadline.
    @Test func storedOffsetsAreReadAgainUntilTheyAnswer() async throws {
        struct Refused: Error {}
        let attempts = Mutex(0)
        let gaveUp = Mutex<[String]>([])
        let partition = TopicPartition(topic: "vetted", partition: 0)
        let listener = StoredOffsetsListener(
            logger: Self.logger, loadDeadline: .seconds(30), giveUp: { reason in gaveUp.withLock { $0.append(reason) } },
            storedOffsets: { _ in
                let attempt = attempts.withLock { n -> Int in
                    n += 1
                    return n
                }
                if attempt < 3 { throw Refused() }
                return [partition: 42]
            })
        #expect(try await listener.partitionsAssigned([partition]) == [partition: 42])
        #expect(attempts.withLock { $0 } == 3 && gaveUp.withLock { $0 }.isEmpty)

        let never = StoredOffsetsListener(
            logger: Self.logger, loadDeadline: .milliseconds(300), giveUp: { reason in gaveUp.withLock { $0.append(reason) } },
            storedOffsets: { _ in throw Refused() })
        await #expect(throws: Refused.self) { try await never.partitionsAssigned([partition]) }
        #expect(gaveUp.withLock { $0 }.count == 1)
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
