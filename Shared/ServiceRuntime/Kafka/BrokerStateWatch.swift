import Foundation
import KafkaClient
import Logging
import ServiceLifecycle

/// What the broker looked like at one look: the topics it has, the end of the canary partitions,
/// and whether this process's producer was fenced.
public struct BrokerObservation: Sendable, Equatable {
    /// Topic name to partition count, as the cluster's metadata reports them.
    public var topics: [String: Int32]
    /// High watermarks of the canary partitions that could be read.
    public var highWatermarks: [TopicPartition: Int64]
    /// The producer's fatal error (an idempotent producer the broker no longer knows), if any.
    public var producerFatal: String?

    public init(topics: [String: Int32], highWatermarks: [TopicPartition: Int64] = [:], producerFatal: String? = nil) {
        self.topics = topics
        self.highWatermarks = highWatermarks
        self.producerFatal = producerFatal
    }
}

/// Decides from successive observations whether the broker lost the state this process relies on.
///
/// The contract: once a watched topic has been seen, it never disappears and never loses partitions;
/// a partition's end never moves back; a producer is never fenced. Any of these means the broker
/// forgot topics, offsets, groups or producer ids (a broker whose storage is memory only was
/// restarted, a topic was deleted and created again, an unclean leader election). A process holding
/// consumer positions and producer ids from before cannot continue correctly; it must start afresh.
///
/// A loss counts once `confirmations` successive observations show one (a metadata answer given in
/// the middle of a leader election must not end a healthy process).
public struct BrokerStateLedger: Sendable {
    public let watchedTopics: Set<String>
    public let confirmations: Int
    private var partitionsSeen: [String: Int32] = [:]
    private var endsSeen: [TopicPartition: Int64] = [:]
    private var lossesInARow = 0

    public init(watchedTopics: Set<String>, confirmations: Int = 2) {
        self.watchedTopics = watchedTopics
        self.confirmations = max(1, confirmations)
    }

    /// A look the broker did not answer: the next loss-looking answer starts the count again, so two
    /// confirmations are successive answers, not answers minutes apart around an outage.
    public mutating func noAnswer() { lossesInARow = 0 }

    /// - Returns: why the broker's state is gone, once confirmed; nil while it is intact.
    public mutating func observe(_ observation: BrokerObservation) -> String? {
        guard let reason = loss(in: observation) else {
            lossesInARow = 0
            return nil
        }
        lossesInARow += 1
        return lossesInARow >= confirmations ? reason : nil
    }

    private mutating func loss(in observation: BrokerObservation) -> String? {
        if let fatal = observation.producerFatal {
            return "the broker fenced this process's producer (\(fatal))"
        }
        for topic in watchedTopics.sorted() {
            let now = observation.topics[topic]
            switch (partitionsSeen[topic], now) {
            case (let before?, nil):
                return "topic \(topic) (\(before) partitions) is gone from the broker"
            case (let before?, let after?) where after < before:
                return "topic \(topic) went from \(before) to \(after) partitions"
            case (_, let after?):
                partitionsSeen[topic] = max(after, partitionsSeen[topic] ?? 0)
            case (nil, nil):
                continue
            }
        }
        for (partition, end) in observation.highWatermarks.sorted(by: { $0.key < $1.key }) {
            if let before = endsSeen[partition], end < before {
                return "the end of \(partition) went back from offset \(before) to \(end)"
            }
            endsSeen[partition] = max(end, endsSeen[partition] ?? end)
        }
        return nil
    }
}

/// Where a `BrokerStateWatch` looks: the cluster's metadata and partition ends.
public protocol BrokerStateSource: Sendable {
    func topics() async throws -> [String: Int32]
    func highWatermark(of partition: TopicPartition) async throws -> Int64
}

/// The real source: an admin client of its own on the service's broker.
public struct KafkaBrokerStateSource: BrokerStateSource {
    let admin: KafkaAdmin

    public func topics() async throws -> [String: Int32] {
        try await admin.topics(timeoutMs: 2_000)
    }

    public func highWatermark(of partition: TopicPartition) async throws -> Int64 {
        try await admin.watermarks(partition).high
    }
}

/// Crash-only handling of a broker that lost its state: looks at the broker every `interval`
/// and, when the `BrokerStateLedger` says the state is gone, logs one line saying why and ends the
/// process with exit code 75 (EX_TEMPFAIL) so that its supervisor (`deploy/local/services.sh`,
/// compose's `restart:` policy, Kubernetes) starts it afresh: a new process creates the topics
/// again, rejoins its groups, seeks to its stored offsets and gets a new producer id, while devices
/// keep their events and retry. A broker that cannot be reached is not a loss: the watch waits.
public final class BrokerStateWatch: Service, Sendable {
    public static let exitCode: Int32 = 75

    private let source: any BrokerStateSource
    private let watchedTopics: Set<String>
    private let canaries: [String]
    private let producerFatal: @Sendable () -> KafkaError?
    private let interval: Duration?
    private let logger: Logger
    private let onLost: @Sendable (String) -> Void
    private let forgetPositions: @Sendable () async -> Void

    /// - Parameters:
    ///   - watchedTopics: topics the service reads or writes; once seen, each must stay.
    ///   - canaries: topics whose every partition's end is followed (a log that only grows, such as
    ///     the compacted registry feed: its end never moves back on a healthy broker).
    ///   - interval: between looks; nil switches the watch off (it then only waits for shutdown).
    ///   - forgetPositions: run once the loss is confirmed, before `onLost`: forgets what the service
    ///     keeps elsewhere about positions on the lost broker (consumer offsets stored in PostgreSQL),
    ///     which would otherwise skip the records of a topic created again that has grown past them.
    ///   - onLost: called once with the reason; the default logs it and exits the process.
    public init(
        source: any BrokerStateSource, watchedTopics: Set<String>, canaries: [String], producer: KafkaProducer?,
        interval: Duration?, logger: Logger, onLost: (@Sendable (String) -> Void)? = nil,
        forgetPositions: @escaping @Sendable () async -> Void = {}
    ) {
        self.forgetPositions = forgetPositions
        self.source = source
        self.watchedTopics = watchedTopics
        self.canaries = canaries
        self.producerFatal = { producer?.fatalError }
        self.interval = interval
        self.logger = logger
        self.onLost =
            onLost ?? { reason in
                logger.critical("broker state lost: \(reason); exiting so that the supervisor starts this service afresh")
                exit(BrokerStateWatch.exitCode)
            }
    }

    public func run() async throws {
        guard let interval else {
            try? await gracefulShutdown()
            return
        }
        let watchedTopics = self.watchedTopics
        await cancelWhenGracefulShutdown {
            var ledger = BrokerStateLedger(watchedTopics: watchedTopics)
            while !Task.isCancelled {
                if let observation = await self.look() {
                    if let reason = ledger.observe(observation) {
                        await self.forgetPositions()
                        self.onLost(reason)
                        return
                    }
                } else {
                    ledger.noAnswer()
                }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// One look, or nil when the broker did not answer (unreachable is not lost).
    func look() async -> BrokerObservation? {
        if let fatal = producerFatal() {
            return BrokerObservation(topics: [:], producerFatal: fatal.description)
        }
        guard let topics = try? await source.topics() else { return nil }
        var ends: [TopicPartition: Int64] = [:]
        for topic in canaries {
            for partition in 0..<(topics[topic] ?? 0) {
                let tp = TopicPartition(topic: topic, partition: partition)
                if let end = try? await source.highWatermark(of: tp) { ends[tp] = end }
            }
        }
        return BrokerObservation(topics: topics, highWatermarks: ends)
    }
}
