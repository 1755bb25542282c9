import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import ServiceRuntime
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// The consumer loop on the real local broker: topics, group and schema of this test's own.
@Suite("Pipeline on the local broker", .serialized, .timeLimit(.minutes(5)))
struct BrokerPipelineTests {
    let logger = LocalStack.logger(label: "telemetry-pipeline-tests")

    func kafka() -> KafkaConfiguration { KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks) }

    func produce(_ messages: [KafkaMessage], producer: KafkaProducer) async throws {
        let outgoing = messages.map { KafkaOutgoingMessage(topic: $0.topic, key: $0.key, value: $0.value) }
        let reports = try await producer.sendBatch(outgoing)
        #expect(reports.allSatisfy { $0.isDelivered })
    }

    func waitFor(_ db: TelemetryDB, metric: String, site: String, count: Int64) async throws -> Int64 {
        let deadline = ContinuousClock.now + .seconds(60)
        var seen: Int64 = 0
        repeat {
            seen = try await db.counter(metric, site: site)
            if seen >= count { return seen }
            try await Task.sleep(for: .milliseconds(200))
        } while ContinuousClock.now < deadline
        return seen
    }

    @Test("consumes the four topics; a restarted instance re-reading everything changes no number")
    func restartOnTheBroker() async throws {
        try LocalStack.ensureStarted()
        try await TelemetryDB.run { db in
            var configuration = db.configuration
            configuration.consumer.maxBatchSize = 13
            configuration.commitOffsetsToBroker = false
            let admin = try KafkaAdmin(configuration: kafka(), logger: logger)
            try await admin.createTopics(
                (configuration.consumedTopics + [configuration.topics[.deadLetters]]).map { KafkaTopicSpec(name: $0, partitions: 1) })
            let site = "site-\(token())"
            let log = try RollupStoreTests.fixture(configuration, site: site)

            let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka()), logger: logger)
            let producing = Task { try await producer.run() }
            defer {
                producer.beginShutdown()
                producing.cancel()
            }
            try await produce(log.messages, producer: producer)

            let sink = KafkaDeadLetterSink(producer: producer, topic: configuration.topics[.deadLetters])
            let first = try TelemetryPipeline(
                kafka: kafka(), configuration: configuration,
                processor: TelemetryBatchProcessor(client: db.client, configuration: configuration, deadLetters: sink, logger: logger),
                metrics: nil, logger: logger)
            let running = Task { try await first.run() }
            #expect(try await waitFor(db, metric: "slo.events", site: site, count: 40) == 40)
            // The reference is taken once every partition is stored at its end (not merely once some
            // numbers showed up: the rest of the stream may still be in flight).
            let ends: [TopicPartition: Int64] = [
                TopicPartition(topic: configuration.topics[.rawEvents], partition: 0): 41,
                TopicPartition(topic: configuration.topics[.verdicts], partition: 0): 40,
                TopicPartition(topic: configuration.topics[.deviceTelemetry], partition: 0): 2,
                TopicPartition(topic: configuration.topics[.sessions], partition: 0): 2,
            ]
            let allStored = ContinuousClock.now + .seconds(60)
            while try await first.processor.storedOffsets(for: Array(ends.keys)) != ends, ContinuousClock.now < allStored {
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(try await first.processor.storedOffsets(for: Array(ends.keys)) == ends)
            #expect(try await db.counter("session.opened", site: site) == 1)
            #expect(try await db.counter("telemetry.region_enter", site: site) == 1)
            first.stop()
            try await running.value
            let reference = try await db.snapshot()

            // The same messages produced again (a replaying upstream), read by a new instance that
            // resumes from the stored offsets: everything is seen before, nothing changes.
            try await produce(log.messages, producer: producer)
            let second = try TelemetryPipeline(
                kafka: kafka(), configuration: configuration,
                processor: TelemetryBatchProcessor(client: db.client, configuration: configuration, deadLetters: sink, logger: logger),
                metrics: nil, logger: logger)
            let runningAgain = Task { try await second.run() }
            let rawTopic = TopicPartition(topic: configuration.topics[.rawEvents], partition: 0)
            let deadline = ContinuousClock.now + .seconds(60)
            while (try await second.processor.storedOffsets(for: [rawTopic])[rawTopic] ?? 0) < 82, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
            }
            second.stop()
            try await runningAgain.value
            #expect(try await second.processor.storedOffsets(for: [rawTopic])[rawTopic] == 82)
            #expect(try await db.snapshot() == reference)
        }
    }
}
