import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import ServiceRuntime
import Synchronization
import TelemetryAggregatorCore
import Testing

@testable import TelemetryAggregatorService

/// A fixed "now" for the fixtures: 2026-11-20T10:30:30Z.
let fixtureNow = Date(timeIntervalSince1970: 1_795_170_630)

/// The real local PostgreSQL with the telemetry migrations applied to a schema of this test's own
/// (`LocalStack.withMigratedSchema`).
struct TelemetryDB: Sendable {
    let client: PostgresClient
    let configuration: TelemetryConfiguration
    let deadLetters: CollectingDeadLetters
    let repository: PostgresTelemetryQueryRepository

    static let logger = LocalStack.logger(label: "telemetry-tests")

    var schema: String { configuration.schema }

    static func run(_ body: @escaping @Sendable (TelemetryDB) async throws -> Void) async throws {
        try await LocalStack.withMigratedSchema(.telemetry, prefix: "telemetry_t") { client, schema in
            let suffix = schema.dropFirst("telemetry_t_".count)
            var configuration = TelemetryConfiguration(
                consumer: ConsumerGroupConfiguration(groupId: "telemetry-test-\(suffix)", maxBatchSize: 1_000), schema: schema)
            // Topics of the test's own: test.<suffix>.<the protocol's name>.
            for topic in [Topic.deviceTelemetry, .rawEvents, .verdicts, .sessions, .deadLetters] {
                configuration.topics[topic] = "test.\(suffix).\(topic.name)"
            }
            try await body(
                TelemetryDB(
                    client: client, configuration: configuration, deadLetters: CollectingDeadLetters(),
                    repository: PostgresTelemetryQueryRepository(client: client, logger: logger)))
        }
    }

    /// A processor as a (re)started service would build it.
    func processor() -> TelemetryBatchProcessor {
        TelemetryBatchProcessor(client: client, configuration: configuration, deadLetters: deadLetters, logger: Self.logger)
    }

    /// Every rollup row, for exact before/after comparisons.
    func snapshot() async throws -> [String] {
        var lines: [String] = []
        let counters = try await client.query(
            """
            SELECT metric, extract(epoch FROM minute)::int8, site, app_version, device_model, count, sum_micros
            FROM rollup_minute ORDER BY 1, 2, 3, 4, 5
            """, logger: Self.logger)
        for try await (metric, minute, site, app, model, count, micros) in counters.decode(
            (String, Int64, String, String, String, Int64, Int64).self)
        {
            lines.append("\(metric) \(minute) \(site) \(app) \(model) \(count) \(micros)")
        }
        let latencies = try await client.query(
            """
            SELECT metric, extract(epoch FROM minute)::int8, site, app_version, device_model, bucket, count
            FROM latency_minute ORDER BY 1, 2, 3, 4, 5, 6
            """, logger: Self.logger)
        for try await (metric, minute, site, app, model, bucket, count) in latencies.decode(
            (String, Int64, String, String, String, Int32, Int64).self)
        {
            lines.append("\(metric) \(minute) \(site) \(app) \(model) b\(bucket) \(count)")
        }
        return lines
    }

    func counter(_ metric: String, site: String? = nil, minute: Int64? = nil) async throws -> Int64 {
        let rows = try await client.query(
            """
            SELECT coalesce(sum(count), 0)::int8 FROM rollup_minute
            WHERE metric = \(metric) AND (\(site ?? "") = '' OR site = \(site ?? "")) AND (\(minute ?? -1) < 0 OR minute = to_timestamp(\(Double(minute ?? 0) * 60)))
            """, logger: Self.logger)
        for try await n in rows.decode(Int64.self) { return n }
        return 0
    }
}

/// Kafka messages as the consumer hands them over, numbered per topic partition.
struct MessageLog {
    let configuration: TelemetryConfiguration
    private(set) var messages: [KafkaMessage] = []
    private var next: [String: Int64] = [:]

    init(configuration: TelemetryConfiguration) {
        self.configuration = configuration
    }

    private mutating func append<M: TopicMessage>(_ message: M, topic: String, partition: Int32 = 0) throws {
        let offset = next[topic, default: 0]
        next[topic] = offset + 1
        messages.append(
            KafkaMessage(
                topic: topic, partition: partition, offset: offset, key: Array(message.partitionKey.value.utf8),
                value: try ProtocolCodec.wire.encode(message)))
    }

    mutating func telemetry(_ batch: DeviceTelemetryBatch) throws { try append(batch, topic: configuration.topics[.deviceTelemetry]) }
    mutating func raw(_ raw: RawEventEnvelope) throws { try append(raw, topic: configuration.topics[.rawEvents]) }
    mutating func verdict(_ verdict: AttendanceVerdict) throws { try append(verdict, topic: configuration.topics[.verdicts]) }
    mutating func session(_ change: SessionChange) throws { try append(change, topic: configuration.topics[.sessions]) }
    mutating func garbage() {
        let topic = configuration.topics[.deviceTelemetry]
        let offset = next[topic, default: 0]
        next[topic] = offset + 1
        messages.append(KafkaMessage(topic: topic, partition: 0, offset: offset, key: nil, value: Array("{not json".utf8)))
    }
}

/// Fixture messages.
enum Make {
    static let model = "iPhone15,2"
    static let version = "2.4.0"

    static func telemetry(
        device: String, site: String?, received: Date, events: [TelemetryEvent], appVersion: String = version, model: String = model
    ) -> DeviceTelemetryBatch {
        DeviceTelemetryBatch(
            batchId: "batch-\(token())", deviceId: device, userId: "user-\(device)", siteId: site, appVersion: appVersion,
            deviceModel: model, receivedAt: received, events: events)
    }

    static func event(_ id: String, _ name: TelemetryEventName, at: Date, value: Double? = nil) -> TelemetryEvent {
        TelemetryEvent(eventId: id, name: name, at: at, value: value)
    }

    /// A check-in triggered at `trigger` and received `delay` seconds later.
    static func raw(
        key: String, site: String, trigger: Date, delay: TimeInterval, offline: Bool = false, user: String = "u1"
    ) -> RawEventEnvelope {
        let event = AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: user, deviceId: "dev-\(user)", timestamp: trigger, type: .checkin,
            siteId: site, beacon: BeaconIdentity(uuid: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", major: 1, minor: 2),
            app: AttendanceEvent.App(version: version), device: AttendanceEvent.Device(model: model), queuedOffline: offline)
        return RawEventEnvelope(
            requestId: "req-\(token())", idempotencyKey: key, userId: user, deviceId: "dev-\(user)", siteId: site, appVersion: version,
            gatewayInstance: "gw-1", receivedAt: trigger.addingTimeInterval(delay), payloadFingerprint: "fp-\(key)", payload: .event(event))
    }

    static func verdict(
        key: String, site: String, trigger: Date?, decidedAfter: TimeInterval, base: Date, outcome: VerdictOutcome = .accepted
    ) -> AttendanceVerdict {
        AttendanceVerdict(
            requestId: "req-\(token())", idempotencyKey: key, userId: "u1", deviceId: "dev-u1", siteId: site, outcome: outcome,
            eventTime: trigger, decidedAt: (trigger ?? base).addingTimeInterval(decidedAfter), gatewayInstance: "gw-1")
    }

    static func session(site: String, version: Int64, at: Date, kind: SessionChangeKind = .opened) -> SessionChange {
        SessionChange(
            sessionId: "s-\(site)", userId: "u1", siteId: site, change: kind, checkInAt: at, eventIds: ["e1"], version: version,
            changedAt: at)
    }
}
