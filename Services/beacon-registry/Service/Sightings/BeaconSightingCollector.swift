import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import KafkaClient
import Logging
import ServiceLifecycle
import ServiceRuntime

/// Feeds broadcast verification from what devices report: every telemetry event naming a beacon
/// (`TelemetryEvent.beacon`) and every raw attendance event with a beacon is a sighting of that
/// beacon by that device.
///
/// Reads `device.telemetry` and `attendance.events.raw` in its own consumer group, keeps per batch
/// only the newest sighting per (beacon, device), stores them in one statement, then commits. A
/// crash before the commit stores a batch twice, which only repeats a sighting (verification counts
/// distinct devices and the newest time). Undecodable records are skipped: they are the business of
/// the consumers that own those topics (and their dead letters), not of this one. Sightings older
/// than `retention` are pruned every `pruneInterval`.
package final class BeaconSightingCollector: Service, Sendable {
    package struct Configuration: Sendable {
        package var groupId = "beacon-registry-sightings"
        package var telemetryTopic: String
        package var rawEventsTopic: String
        package var retention: Duration = .seconds(2 * 86_400)
        package var pruneInterval: Duration = .seconds(3_600)

        package init(topics: TopicNames = TopicNames()) {
            telemetryTopic = topics[.deviceTelemetry]
            rawEventsTopic = topics[.rawEvents]
        }
    }

    private let consumer: KafkaConsumer
    private let repository: any RegistryRepository
    private let configuration: Configuration
    private let logger: Logger

    package init(
        kafka: KafkaConfiguration, repository: any RegistryRepository, configuration: Configuration = Configuration(), logger: Logger
    ) throws(KafkaError) {
        self.consumer = try KafkaConsumer(
            configuration: .background(
                client: kafka, groupId: configuration.groupId, topics: [configuration.telemetryTopic, configuration.rawEventsTopic]),
            logger: logger
        )
        self.repository = repository
        self.configuration = configuration
        self.logger = logger
    }

    package func run() async throws {
        try await consumer.consume(alongside: { [self] in await self.pruneForever() }) { batch in
            try await store(batch)
            return true
        }
    }

    private func store(_ batch: KafkaMessageBatch) async throws {
        let sightings = Self.sightings(in: batch.messages, rawEventsTopic: configuration.rawEventsTopic)
        // Storage errors are retried: the batch is neither committed nor dropped until it is stored. A
        // shutdown ends the retries; the batch, uncommitted, is read again at the next start.
        let stored: Void? = await BatchStoreRetry.untilStored(messages: batch.messages.count, logger: logger) {
            try await repository.recordSightings(sightings)
        }
        guard stored != nil else { return }
        await consumer.commitOrWarn(batch, logger: logger)
    }

    /// The newest sighting per (beacon, device) in `messages`.
    static func sightings(in messages: [KafkaMessage], rawEventsTopic: String) -> [BeaconSighting] {
        var newest: [String: BeaconSighting] = [:]
        func add(_ beacon: BeaconIdentity, device: String, at time: Date) {
            let key = "\(beacon.uuid.uppercased()):\(beacon.major):\(beacon.minor)|\(device)"
            if newest[key].map({ $0.seenAt < time }) ?? true {
                newest[key] = BeaconSighting(beacon: beacon, deviceId: device, seenAt: time)
            }
        }
        for message in messages {
            guard let value = message.value else { continue }
            if message.topic == rawEventsTopic {
                guard let raw = try? ProtocolCodec.wire.decode(RawEventEnvelope.self, from: value),
                    case .event(let event) = raw.payload
                else { continue }
                add(event.beacon, device: raw.deviceId, at: event.timestamp)
            } else {
                guard let telemetry = try? ProtocolCodec.wire.decode(DeviceTelemetryBatch.self, from: value) else { continue }
                for event in telemetry.events {
                    if let beacon = event.beacon { add(beacon, device: telemetry.deviceId, at: event.at) }
                }
            }
        }
        return newest.values.sorted { $0.seenAt < $1.seenAt }
    }

    private func pruneForever() async {
        while !Task.isCancelled {
            do {
                let cutoff = Date().addingTimeInterval(-Double(configuration.retention.components.seconds))
                let pruned = try await repository.pruneSightings(before: cutoff)
                if pruned > 0 { logger.info("old sightings pruned", metadata: ["count": "\(pruned)"]) }
            } catch {
                logger.warning("pruning sightings failed", metadata: ["error": .string(String(describing: error))])
            }
            try? await Task.sleep(for: configuration.pruneInterval)
        }
    }
}
