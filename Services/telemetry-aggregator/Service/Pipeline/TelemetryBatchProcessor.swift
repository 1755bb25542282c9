import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime
import TelemetryAggregatorCore

/// The four kinds of message the aggregator counts; the raw values are the `kind` label of
/// `telemetry_aggregated_total`.
package enum AggregatedKind: String, CaseIterable, Sendable, Hashable {
    /// One event of a telemetry upload (not the upload).
    case telemetryEvent = "telemetry_event"
    case rawEvent = "raw_event"
    case verdict
    case sessionChange = "session_change"
}

/// What one batch did, after its transaction committed.
package struct TelemetryBatchResult: Sendable, Hashable {
    /// Counted for the first time, per kind.
    package var new: [AggregatedKind: Int] = [:]
    /// Seen before (a replay, a re-upload, a gateway retry, a repeated verdict).
    package var duplicates = 0
    package var deadLetters = 0
    /// The offsets stored with the batch (next offset to read per partition).
    package var nextOffsets: [TopicPartition: Int64] = [:]
    /// Transaction attempts (more than 1 when a deadlock or serialization failure forced a retry).
    package var attempts = 0
}

/// Turns a polled batch of the four topics into ONE PostgreSQL transaction:
///
/// 1. decode by topic; undecodable messages become dead letters (sent before the transaction);
/// 2. drop repeats inside the batch (first occurrence wins);
/// 3. record the identities (device event id, idempotency key for receipts and for verdicts,
///    session id + version); only those not recorded before are counted;
/// 4. aggregate them (`Aggregation`, pure) and add the delta to the minute rollups;
/// 5. store the partitions' next offsets; commit.
///
/// A replayed message (restart, rebalance, a broker that lost its offsets) finds its identity
/// recorded and adds nothing: every number is a function of the set of distinct messages, whatever
/// their batching or order.
package final class TelemetryBatchProcessor: Sendable {
    private let client: PostgresClient
    private let configuration: TelemetryConfiguration
    private let store: TelemetryStore
    private let deadLetters: any DeadLetterSink
    private let logger: Logger
    private let objective: SLOObjective
    /// What this process loaded or stored per partition: a table restored under it stops the process.
    private let offsetsWatch = StoredOffsetsWatch()

    package init(client: PostgresClient, configuration: TelemetryConfiguration, deadLetters: any DeadLetterSink, logger: Logger) {
        self.client = client
        self.configuration = configuration
        self.store = TelemetryStore(logger: logger)
        self.deadLetters = deadLetters
        self.logger = logger
        self.objective = SLOObjective(
            targetPermyriad: configuration.objective.targetPermyriad, thresholdSeconds: configuration.objective.thresholdSeconds)
    }

    var consumerName: String { "telemetry-aggregator/\(configuration.consumer.groupId)" }

    package func storedOffsets(for partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        let stored = try await StoredOffsetsTable.load(
            groupId: configuration.consumer.groupId, partitions: partitions, client: client, logger: logger)
        offsetsWatch.loaded(stored, of: partitions)
        return stored
    }

    /// The decoded contents of a batch, repeats inside the batch already dropped.
    struct Decoded: Sendable {
        var telemetry: [DeviceTelemetryBatch] = []
        var raw: [RawEventFacts] = []
        var verdicts: [AttendanceVerdict] = []
        var sessions: [SessionChange] = []
        var repeats = 0
    }

    @discardableResult
    package func process(_ messages: [KafkaMessage]) async throws -> TelemetryBatchResult {
        var decoded = Decoded()
        var letters: [DeadLetter] = []
        var seenKeys = Set<String>(), seenVerdicts = Set<String>(), seenSessions = Set<TelemetryStore.SessionVersionID>()
        let failedAt = Date()
        for message in messages {
            guard let value = message.value, !value.isEmpty else {
                letters.append(DeadLetter(emptyRecord: message, consumer: consumerName, failedAt: failedAt))
                continue
            }
            do {
                switch message.topic {
                case configuration.topics[.deviceTelemetry]:
                    decoded.telemetry.append(try ProtocolCodec.wire.decode(DeviceTelemetryBatch.self, from: value))
                case configuration.topics[.rawEvents]:
                    let raw = try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: value)
                    if seenKeys.insert(raw.idempotencyKey).inserted { decoded.raw.append(RawEventFacts(raw)) } else { decoded.repeats += 1 }
                case configuration.topics[.verdicts]:
                    let verdict = try ProtocolCodec.wire.decode(AttendanceVerdict.self, from: value)
                    if seenVerdicts.insert(verdict.idempotencyKey).inserted {
                        decoded.verdicts.append(verdict)
                    } else {
                        decoded.repeats += 1
                    }
                case configuration.topics[.sessions]:
                    let change = try ProtocolCodec.wire.decode(SessionChange.self, from: value)
                    if seenSessions.insert(.init(sessionId: change.sessionId, version: change.version)).inserted {
                        decoded.sessions.append(change)
                    } else {
                        decoded.repeats += 1
                    }
                default:
                    logger.warning("message from a topic this consumer does not read; skipped", metadata: ["topic": .string(message.topic)])
                }
            } catch {
                letters.append(DeadLetter(undecodable: message, error: error, consumer: consumerName, failedAt: failedAt))
            }
        }
        let polled = KafkaMessageBatch(messages: messages)
        let nextOffsets = polled.nextOffsets
        offsetsWatch.reading(from: polled.firstOffsets)
        var (result, attempts) = try await BatchTransaction.run(
            client: client, deadLetters: letters, to: deadLetters, retries: 5, logger: logger
        ) { connection in
            try await self.apply(decoded, nextOffsets: nextOffsets, on: connection)
        }
        offsetsWatch.committed(nextOffsets)
        result.deadLetters = letters.count
        result.nextOffsets = nextOffsets
        result.attempts = attempts
        return result
    }

    private func apply(
        _ batch: Decoded, nextOffsets: [TopicPartition: Int64], on connection: PostgresConnection
    ) async throws -> TelemetryBatchResult {
        var result = TelemetryBatchResult()
        result.duplicates = batch.repeats
        var delta = RollupDelta()

        // Receipts before verdicts: a verdict in the same batch finds its raw event's attribution.
        let freshKeys = try await store.recordRawEvents(batch.raw, on: connection)
        for facts in batch.raw {
            guard let earlier = freshKeys[facts.idempotencyKey] else { continue }
            Aggregation.addRawEvent(facts, objective: objective, into: &delta)
            // A verdict read before (by this instance or another): counted now, under the device's dimensions.
            if let earlier {
                Aggregation.addVerdict(
                    outcome: earlier.outcome, decidedAt: earlier.decidedAt, triggerAt: facts.triggerAt, dimensions: facts.dimensions,
                    into: &delta)
            }
        }
        result.new[.rawEvent] = freshKeys.count
        result.duplicates += batch.raw.count - freshKeys.count

        let attributions = try await store.recordVerdicts(batch.verdicts, on: connection)
        for verdict in batch.verdicts {
            guard let attribution = attributions[verdict.idempotencyKey], attribution.received else { continue }
            Aggregation.addVerdict(verdict, trigger: attribution.triggerAt, dimensions: attribution.dimensions, into: &delta)
        }
        result.new[.verdict] = attributions.count
        result.duplicates += batch.verdicts.count - attributions.count

        var eventIds: [TelemetryStore.DeviceEventID] = []
        var inBatch = Set<TelemetryStore.DeviceEventID>()
        for upload in batch.telemetry {
            for event in upload.events {
                let id = TelemetryStore.DeviceEventID(deviceId: upload.deviceId, eventId: event.eventId)
                if inBatch.insert(id).inserted { eventIds.append(id) }
            }
        }
        var fresh = try await store.recordTelemetryEvents(eventIds, on: connection)
        let totalEvents = batch.telemetry.reduce(0) { $0 + $1.events.count }
        result.new[.telemetryEvent] = fresh.count
        result.duplicates += totalEvents - fresh.count
        for upload in batch.telemetry {
            // `remove` makes a repeat of an event later in the batch count as seen.
            Aggregation.addTelemetry(
                upload, isNew: { fresh.remove(.init(deviceId: upload.deviceId, eventId: $0.eventId)) != nil }, into: &delta)
        }

        let freshSessions = try await store.recordSessionChanges(
            batch.sessions.map { .init(sessionId: $0.sessionId, version: $0.version) }, on: connection)
        for change in batch.sessions where freshSessions.contains(.init(sessionId: change.sessionId, version: change.version)) {
            Aggregation.addSessionChange(change, into: &delta)
        }
        result.new[.sessionChange] = freshSessions.count
        result.duplicates += batch.sessions.count - freshSessions.count

        try await store.add(delta, on: connection)
        try await StoredOffsetsTable.store(
            groupId: configuration.consumer.groupId, nextOffsets, watch: offsetsWatch, on: connection, logger: logger)
        return result
    }

    /// Deletes rollups and identities past the retention (the pruning task calls it).
    package func prune(now: Date = Date()) async throws {
        let cutoff = now.addingTimeInterval(-Double(configuration.retentionDays) * 86_400)
        let store = self.store
        try await client.withConnection { connection in
            try await store.prune(before: cutoff, on: connection)
        }
    }
}
