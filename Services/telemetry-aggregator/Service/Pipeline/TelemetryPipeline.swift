import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import ServiceLifecycle
import ServiceRuntime

/// The consumer loop over the four topics: one batch, one transaction (`TelemetryBatchProcessor`),
/// then the offsets are committed to the broker (informational). A batch that fails is retried with
/// backoff, never skipped.
package final class TelemetryPipeline: Service, Sendable {
    package let consumer: KafkaConsumer
    package let processor: TelemetryBatchProcessor
    private let configuration: TelemetryConfiguration
    private let metrics: TelemetryServiceMetrics?
    private let logger: Logger
    /// Unready while no batch can be stored (`/health/ready`).
    package let storeHealth = BatchStoreHealth()

    package init(
        kafka: KafkaConfiguration, configuration: TelemetryConfiguration, processor: TelemetryBatchProcessor,
        metrics: TelemetryServiceMetrics?, logger: Logger
    ) throws(KafkaError) {
        // Off the request path: long broker waits keep its idle fetches cheap for the broker.
        self.consumer = try .resumingFromStoredOffsets(
            client: kafka, topics: configuration.consumedTopics, group: configuration.consumer, background: true, logger: logger
        ) { try await processor.storedOffsets(for: $0) }
        self.processor = processor
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
    }

    package func run() async throws {
        try await consumer.consume { batch in await handle(batch) }
    }

    package func stop() {
        consumer.triggerShutdown()
    }

    /// - Returns: false when the batch could not be stored before shutdown.
    private func handle(_ batch: KafkaMessageBatch) async -> Bool {
        let processor = processor
        guard
            let result = await BatchStoreRetry.untilStored(
                messages: batch.messages.count, logger: logger, health: storeHealth, { try await processor.process(batch.messages) })
        else { return false }
        metrics?.record(result)
        if configuration.commitOffsetsToBroker { await consumer.commitInformational(result.nextOffsets, logger: logger) }
        return true
    }
}
