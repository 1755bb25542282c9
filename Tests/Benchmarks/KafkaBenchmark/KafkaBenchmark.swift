import ArgumentParser
import Foundation
import KafkaClient
import Logging

/// Produce + consume throughput of the Swift Kafka layer against the local broker, printed beside
/// librdkafka's own `rdkafka_performance` measured in the same run on the same broker.
@main
struct KafkaBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Kafka client throughput vs rdkafka_performance")

    @Option(help: "Broker list") var brokers = ProcessInfo.processInfo.environment["KAFKA_BROKERS"] ?? "127.0.0.1:19092"
    @Option(help: "Messages per run") var messages = 300_000
    @Option(help: "Payload bytes") var size = 300
    @Option(help: "Partitions of the benchmark topics") var partitions: Int32 = 6
    @Option(help: "Messages per sendBatch call") var batch = 10_000
    @Option(help: "sendBatch calls in flight") var inFlight = 4
    @Option(help: "Path of rdkafka_performance") var rdkafkaPerformance =
        ProcessInfo.processInfo.environment["RDKAFKA_PERFORMANCE"]
        ?? "\(ProcessInfo.processInfo.environment["RDKAFKA_PREFIX"] ?? ".local/librdkafka")/bin/rdkafka_performance"

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let runId = UInt32.random(in: 0...UInt32.max)
        let swiftTopic = "bench.swift.\(runId)"
        let rawTopic = "bench.raw.\(runId)"
        let client = KafkaConfiguration(bootstrapServers: brokers, clientId: "kafka-benchmark")
        let admin = try KafkaAdmin(configuration: client, logger: logger)
        try await admin.createTopics([
            KafkaTopicSpec(name: swiftTopic, partitions: partitions),
            KafkaTopicSpec(name: rawTopic, partitions: partitions),
        ])

        print("librdkafka \(librdkafkaVersion), \(messages) messages of \(size) bytes, \(partitions) partitions, idempotent acks=all")

        // Baseline first, so both runs see a warm broker the same way.
        let raw = try measureRdkafkaPerformance(topic: rawTopic)
        let produced = try await measureSwiftProducer(topic: swiftTopic, logger: logger)
        let consumed = try await measureSwiftConsumer(topic: swiftTopic, logger: logger)

        print(String(format: "rdkafka_performance_produce_msgs_per_s=%.0f", raw))
        print(String(format: "swift_produce_msgs_per_s=%.0f", produced))
        print(String(format: "swift_consume_msgs_per_s=%.0f", consumed))
        print(String(format: "produce_ratio_vs_rdkafka=%.2f (target >= 0.70)", produced / raw))
    }

    func payload() -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0) } }

    func measureSwiftProducer(topic: String, logger: Logger) async throws -> Double {
        var config = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: brokers, clientId: "bench-producer"))
        config.lingerMs = 5
        let producer = try KafkaProducer(configuration: config, logger: logger)
        let value = payload()
        let total = messages
        let batchSize = batch
        let runner = Task { try await producer.run() }
        // Messages are built before the clock starts: the figure is the layer's, not the caller's.
        // No keys, like rdkafka_performance (both then spread messages over the partitions).
        let batches = stride(from: 0, to: total, by: batchSize).map { lower in
            (lower..<min(total, lower + batchSize)).map { _ in KafkaOutgoingMessage(topic: topic, key: nil, value: value) }
        }
        let start = ContinuousClock.now
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            var next = 0
            var failures = 0
            func addBatch() {
                let batch = batches[next]
                next += 1
                group.addTask {
                    try await producer.sendBatch(batch).filter { !$0.isDelivered }.count
                }
            }
            for _ in 0..<inFlight where next < batches.count { addBatch() }
            while let failed = try await group.next() {
                failures += failed
                if next < batches.count { addBatch() }
            }
            return failures
        }
        let elapsed = start.duration(to: .now)
        producer.beginShutdown()
        try await runner.value
        guard failures == 0 else { throw ValidationError("\(failures) messages were not delivered") }
        return Double(total) / elapsed.seconds
    }

    func measureSwiftConsumer(topic: String, logger: Logger) async throws -> Double {
        var config = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: brokers, clientId: "bench-consumer"),
            groupId: "bench-\(topic)", topics: [topic]
        )
        config.maxBatchSize = 2_000
        let consumer = try KafkaConsumer(configuration: config, logger: logger)
        let runner = Task { try await consumer.run() }
        var count = 0
        var start: ContinuousClock.Instant?
        for await batch in consumer.batches {
            // The clock starts at the first message: group join time is not throughput.
            if start == nil { start = .now }
            count += batch.messages.count
            if count >= messages { break }
        }
        let elapsed = start!.duration(to: .now)
        consumer.triggerShutdown()
        try await runner.value
        return Double(count) / elapsed.seconds
    }

    func measureRdkafkaPerformance(topic: String) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: rdkafkaPerformance)
        process.arguments = [
            "-P", "-t", topic, "-b", brokers, "-s", String(size), "-c", String(messages),
            "-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5", "-X", "queue.buffering.max.messages=500000",
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // Its summary line: "... delivered ... in 1234ms: 242000 msgs/s and ..."
        guard process.terminationStatus == 0,
            let line = output.split(separator: "\n").last(where: { $0.contains("msgs/s") && $0.contains("delivered") }),
            let range = line.range(of: #"(\d+) msgs/s"#, options: .regularExpression),
            let value = Double(line[range].split(separator: " ")[0])
        else {
            throw ValidationError("rdkafka_performance failed:\n\(output.suffix(2_000))")
        }
        return value
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
