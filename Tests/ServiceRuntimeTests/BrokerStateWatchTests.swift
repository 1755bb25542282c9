import KafkaClient
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import ServiceRuntime

@Suite("Broker state: a broker that forgot topics, offsets or producers ends the process")
struct BrokerStateLedgerTests {
    let raw = "attendance.events.raw"
    let feed = "registry.changes"

    func observation(_ topics: [String: Int32], feedEnd: Int64? = nil, fatal: String? = nil) -> BrokerObservation {
        var ends: [TopicPartition: Int64] = [:]
        if let feedEnd { ends[TopicPartition(topic: feed, partition: 0)] = feedEnd }
        return BrokerObservation(topics: topics, highWatermarks: ends, producerFatal: fatal)
    }

    @Test func aHealthyBrokerIsNeverALoss() {
        var ledger = BrokerStateLedger(watchedTopics: [raw, feed])
        for end in [0, 0, 3, 3, 10, 250] as [Int64] {
            #expect(ledger.observe(observation([raw: 6, feed: 1, "other": 2], feedEnd: end)) == nil)
        }
        // More partitions (a topic grown by an operator) is not a loss either.
        #expect(ledger.observe(observation([raw: 12, feed: 1], feedEnd: 250)) == nil)
    }

    @Test func topicsNotCreatedYetAreNotALoss() {
        var ledger = BrokerStateLedger(watchedTopics: [raw, feed])
        #expect(ledger.observe(observation([:])) == nil)
        #expect(ledger.observe(observation([:])) == nil)
        #expect(ledger.observe(observation([raw: 6, feed: 1], feedEnd: 0)) == nil)
    }

    @Test func aTopicThatDisappearsIsALossOnceConfirmed() throws {
        var ledger = BrokerStateLedger(watchedTopics: [raw, feed])
        #expect(ledger.observe(observation([raw: 6, feed: 1], feedEnd: 4)) == nil)
        // One answer without the topic (a leader election, say) is not enough...
        #expect(ledger.observe(observation([feed: 1], feedEnd: 4)) == nil)
        #expect(ledger.observe(observation([raw: 6, feed: 1], feedEnd: 4)) == nil)
        // Nor two with an outage between them (looks the broker did not answer)...
        #expect(ledger.observe(observation([feed: 1], feedEnd: 4)) == nil)
        ledger.noAnswer()
        // ...two in a row are.
        #expect(ledger.observe(observation([feed: 1], feedEnd: 4)) == nil)
        let verdict = ledger.observe(observation([feed: 1], feedEnd: 4))
        let reason = try #require(verdict)
        #expect(reason.contains("topic \(raw) (6 partitions) is gone"), "\(reason)")
    }

    @Test func fewerPartitionsIsALoss() throws {
        var ledger = BrokerStateLedger(watchedTopics: [raw], confirmations: 1)
        #expect(ledger.observe(observation([raw: 6])) == nil)
        let verdict = ledger.observe(observation([raw: 1]))
        let reason = try #require(verdict)
        #expect(reason.contains("went from 6 to 1 partitions"), "\(reason)")
    }

    /// The topics were created again (by a service that restarted first) before this one looked:
    /// the canary's end moved back.
    @Test func aCanaryWhoseEndMovesBackIsALoss() throws {
        var ledger = BrokerStateLedger(watchedTopics: [raw, feed])
        #expect(ledger.observe(observation([raw: 6, feed: 1], feedEnd: 120)) == nil)
        #expect(ledger.observe(observation([raw: 6, feed: 1], feedEnd: 7)) == nil)
        let verdict = ledger.observe(observation([raw: 6, feed: 1], feedEnd: 9))
        let reason = try #require(verdict)
        #expect(reason.contains("the end of \(feed)[0] went back from offset 120 to 9"), "\(reason)")
    }

    @Test func aFencedProducerIsALoss() throws {
        var ledger = BrokerStateLedger(watchedTopics: [raw])
        #expect(ledger.observe(observation([raw: 6], fatal: "UNKNOWN_PRODUCER_ID")) == nil)
        let verdict = ledger.observe(observation([raw: 6], fatal: "UNKNOWN_PRODUCER_ID"))
        let reason = try #require(verdict)
        #expect(reason.contains("fenced"), "\(reason)")
    }
}

/// A broker whose answers the test scripts; an unreachable broker throws.
final class ScriptedBroker: BrokerStateSource, Sendable {
    struct Unreachable: Error {}
    let state = Mutex<(topics: [String: Int32]?, feedEnd: Int64)>((nil, 0))
    private let looks = Mutex(0)

    func topics() async throws -> [String: Int32] {
        looks.withLock { $0 += 1 }
        guard let topics = state.withLock({ $0.topics }) else { throw Unreachable() }
        return topics
    }

    /// Returns once the watch has asked `count` more times (however slow the machine is).
    func waitForLooks(_ count: Int) async throws {
        let target = looks.withLock { $0 } + count
        while looks.withLock({ $0 }) < target { try await Task.sleep(for: .milliseconds(5)) }
    }

    func highWatermark(of partition: TopicPartition) async throws -> Int64 {
        state.withLock { $0.feedEnd }
    }
}

/// The reasons a watch gave.
final class Losses: Sendable {
    private let reasons = Mutex<[String]>([])
    func append(_ reason: String) { reasons.withLock { $0.append(reason) } }
    var all: [String] { reasons.withLock { $0 } }
}

@Suite("Broker state watch", .timeLimit(.minutes(1)))
struct BrokerStateWatchTests {
    let feed = "registry.changes"

    func watch(_ broker: ScriptedBroker, lost: Losses) -> BrokerStateWatch {
        BrokerStateWatch(
            source: broker, watchedTopics: ["attendance.events.raw", feed], canaries: [feed], producer: nil,
            interval: .milliseconds(10), logger: Logger(label: "test")
        ) { reason in lost.append(reason) }
    }

    @Test func anUnreachableBrokerIsWaitedForAndARestartedOneEndsTheWatch() async throws {
        let broker = ScriptedBroker()
        let lost = Losses()
        broker.state.withLock { $0 = (["attendance.events.raw": 6, feed: 1], 42) }
        let watch = watch(broker, lost: lost)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await watch.run() }
            try await broker.waitForLooks(2)
            // Down for a while: no answer is no loss.
            broker.state.withLock { $0.topics = nil }
            try await broker.waitForLooks(5)
            #expect(lost.all.isEmpty)
            // Back, empty: everything it held is gone.
            broker.state.withLock { $0 = ([:], 0) }
            try await group.waitForAll()
        }
        let reasons = lost.all
        #expect(reasons.count == 1, "\(reasons)")
        #expect(reasons.first?.contains("is gone from the broker") == true, "\(reasons)")
    }

    @Test func storedPositionsAreForgottenBeforeTheProcessIsToldToExit() async throws {
        let broker = ScriptedBroker()
        let journal = Losses()
        broker.state.withLock { $0 = (["attendance.events.raw": 6, feed: 1], 42) }
        let watch = BrokerStateWatch(
            source: broker, watchedTopics: ["attendance.events.raw", feed], canaries: [feed], producer: nil,
            interval: .milliseconds(10), logger: Logger(label: "test"), onLost: { _ in journal.append("exit") },
            forgetPositions: { journal.append("forget stored offsets") })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await watch.run() }
            try await broker.waitForLooks(2)
            broker.state.withLock { $0 = ([:], 0) }
            try await group.waitForAll()
        }
        #expect(journal.all == ["forget stored offsets", "exit"])
    }

    @Test func aSwitchedOffWatchOnlyWaitsForShutdown() async throws {
        let broker = ScriptedBroker()
        let lost = Losses()
        let watch = BrokerStateWatch(
            source: broker, watchedTopics: [feed], canaries: [feed], producer: nil, interval: nil, logger: Logger(label: "test")
        ) { reason in lost.append(reason) }
        let group = ServiceGroup(configuration: .init(services: [.init(service: watch)], logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            broker.state.withLock { $0 = ([:], 0) }
            try await Task.sleep(for: .milliseconds(100))
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(lost.all.isEmpty)
    }
}
