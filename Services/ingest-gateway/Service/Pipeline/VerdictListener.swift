import AttendanceProtocol
import CoreMetrics
import Foundation
import IngestGatewayCore
import KafkaClient
import Logging
import ServiceLifecycle
import ServiceRuntime

/// Reads `attendance.verdicts` and completes this instance's waiting requests.
///
/// Every gateway instance reads every partition: the consumer joins a group of its own
/// (`ingest-gateway-verdicts-<instance>-<random>`, so replicas never share partitions) and starts
/// at the end of each partition, nothing is ever committed: a verdict produced before this process
/// started belongs to a request no one here waits for. Verdicts for other instances are skipped;
/// undecodable ones are logged and counted, never stop the reader.
///
/// The end is fixed when the partitions are assigned (`StartAtEnd` reads the high watermarks then),
/// not left to `auto.offset.reset=latest`, which librdkafka resolves some time after the assignment:
/// a verdict produced in between would be skipped. Not ready (`readiness`) until the partitions are
/// assigned, so every request accepted afterwards has its verdict read.
package final class VerdictListener: Service, Sendable {
    package let groupId: String
    private let consumer: KafkaConsumer
    private let pipeline: IngestPipeline
    private let logger: Logger

    package init(kafka: KafkaConfiguration, topic: String, pipeline: IngestPipeline, logger: Logger) throws(KafkaError) {
        let instance = String(
            pipeline.instanceId.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" }.prefix(100))
        groupId = "ingest-gateway-verdicts-\(instance)-\(UInt32.random(in: 0...UInt32.max))"
        var configuration = KafkaConsumerConfiguration(client: kafka, groupId: groupId, topics: [topic])
        configuration.autoOffsetReset = .latest
        configuration.pollTimeoutMs = 50
        configuration.drainTimeoutMs = 2_000
        self.consumer = try KafkaConsumer(
            configuration: configuration,
            rebalanceListener: StartAtEnd(
                admin: try KafkaAdmin(configuration: kafka, logger: logger), positioned: { [pipeline] in pipeline.markVerdictsRead() },
                unpositioned: { [pipeline] in pipeline.markVerdictsUnread() }),
            logger: logger
        )
        self.pipeline = pipeline
        self.logger = logger
    }

    /// True once the group gave this consumer its partitions.
    package var isAssigned: Bool { !consumer.assignment.isEmpty }

    package func waitUntilAssigned(timeout: Duration) async -> Bool {
        await poll(timeout: timeout) { isAssigned }
    }

    /// `verdicts`: failing until the partitions are assigned.
    package var readiness: any ReadinessCheck {
        FlagReadinessCheck(name: "verdicts") { [consumer] in
            consumer.assignment.isEmpty ? "verdict partitions are not assigned yet" : nil
        }
    }

    package func run() async throws {
        try await consumer.consume { batch in
            handle(batch)
            return true
        }
    }

    func handle(_ batch: KafkaMessageBatch) {
        for message in batch.messages {
            let verdict: AttendanceVerdict
            do {
                verdict = try ProtocolCodec.wire.decode(AttendanceVerdict.self, from: message.value ?? [])
            } catch {
                GatewayMetrics.verdictsUndecodable.increment()
                logger.warning(
                    "undecodable verdict skipped",
                    metadata: [
                        "partition": "\(message.partition)", "offset": "\(message.offset)", "error": .string(error.description),
                    ])
                continue
            }
            if pipeline.receive(verdict) { GatewayMetrics.verdictsReceived.increment() }
        }
    }
}

/// Starts every assigned partition at its high watermark, read at assignment time. (With Tansu the
/// reported watermark may lie inside the last record batch: a few old verdicts are read again and
/// ignored.) When the watermarks cannot be read the consumer falls back to `latest`. Once the positions
/// are fixed, `positioned` lets the pipeline take requests. A revocation (the group session lost while
/// the broker was away) calls `unpositioned`: the next assignment starts at the end again, so a verdict
/// produced in between would never be read, and the pipeline must not wait for one until then.
struct StartAtEnd: KafkaRebalanceListener {
    let admin: KafkaAdmin
    let positioned: @Sendable () -> Void
    let unpositioned: @Sendable () -> Void

    func partitionsRevoked(_ partitions: [TopicPartition]) async { unpositioned() }

    func partitionsAssigned(_ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        // Also when a watermark cannot be read: the consumer then starts at `latest`, and the gateway
        // must not refuse every request for it.
        defer { positioned() }
        var offsets: [TopicPartition: Int64] = [:]
        for partition in partitions {
            offsets[partition] = try await admin.watermarks(partition).high
        }
        return offsets
    }
}

/// A readiness check over an in-memory condition: `problem` answers nil when ready.
package struct FlagReadinessCheck: ReadinessCheck {
    package let name: String
    let problem: @Sendable () -> String?

    package func check() async throws {
        if let problem = problem() { throw NotReady(description: problem) }
    }

    struct NotReady: Error, CustomStringConvertible {
        let description: String
    }
}

/// Drops expired idempotency entries now and then.
package struct IdempotencyJanitor: Service {
    let pipeline: IngestPipeline
    let interval: Duration

    package init(pipeline: IngestPipeline, interval: Duration = .seconds(30)) {
        self.pipeline = pipeline
        self.interval = interval
    }

    package func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                pipeline.table.purgeExpired()
            }
        }
    }
}
