import AttendanceProtocol
import IngestGatewayCore
import ServiceRuntime

/// The Kafka topics the gateway uses; configurable so tests run on topics of their own.
package struct GatewayTopics: Sendable, Hashable {
    package var rawEvents: String
    package var verdicts: String
    package var deviceTelemetry: String
    package var registryChanges: String

    package init(
        rawEvents: String = Topic.rawEvents.name, verdicts: String = Topic.verdicts.name,
        deviceTelemetry: String = Topic.deviceTelemetry.name, registryChanges: String = Topic.registryChanges.name
    ) {
        self.rawEvents = rawEvents
        self.verdicts = verdicts
        self.deviceTelemetry = deviceTelemetry
        self.registryChanges = registryChanges
    }
}

/// What the gateway's behaviour depends on, besides the shared `ServiceConfiguration`.
package struct GatewayConfiguration: ServiceSettings {
    /// How long a request waits for its verdict before it is answered 202 with a status URL.
    package var verdictWait: Duration = .milliseconds(3_000)
    /// How long a request waits for the broker to take its event before it is answered 503 with
    /// `Retry-After`: a phone gives up on a request after a few seconds, and with the broker away the
    /// producer's 30 s default held every request (and its key, answering its retries 409) past that,
    /// so the phone never saw the 503.
    package var produceTimeout: Duration = .milliseconds(3_000)
    /// Field limits, the accepted event-time window and the body size (413 beyond).
    package var limits: ValidationLimits = .default
    package var rateLimit: TokenBucketConfiguration = .default
    package var idempotency = IdempotencyTableConfiguration()
    package var topics = GatewayTopics()
    /// Events per `GET /v1/attendance/pending` answer at most.
    package var pendingMaxEvents = 200
    /// `Retry-After` of a 503 (the produce failed) and of a 409 in flight.
    package var retryAfterSeconds = 2

    package init() {}

    /// Reads (every one optional, defaults in brackets):
    /// - `VERDICT_WAIT_MS` [3000]: the bounded wait for a verdict before 202;
    /// - `PRODUCE_TIMEOUT_MS` [3000]: the bounded wait for the broker to take an event before 503;
    /// - `EVENT_MAX_AGE_SECONDS` [604800 = 7 days], `EVENT_MAX_AHEAD_SECONDS` [300]: the event-time window;
    /// - `MAX_BODY_BYTES` [65536]: larger bodies are 413;
    /// - `RATE_LIMIT_PER_SECOND` [2], `RATE_LIMIT_BURST` [20]: the per-device token bucket;
    /// - `IDEMPOTENCY_TTL_SECONDS` [3600], `INFLIGHT_TTL_SECONDS` [120], `IDEMPOTENCY_MAX_ENTRIES` [200000];
    /// - `PENDING_MAX_EVENTS` [200, at least 100];
    /// - `TOPIC_RAW_EVENTS`, `TOPIC_VERDICTS`, `TOPIC_DEVICE_TELEMETRY`, `TOPIC_REGISTRY_CHANGES`
    ///   [the `Topic` names].
    package static func load(from env: EnvironmentReader) throws(ConfigurationError) -> GatewayConfiguration {
        var settings = GatewayConfiguration()
        settings.verdictWait = try env.milliseconds("VERDICT_WAIT_MS", default: settings.verdictWait, in: 0...60_000)
        settings.produceTimeout = try env.milliseconds("PRODUCE_TIMEOUT_MS", default: settings.produceTimeout, in: 1_000...60_000)
        // At least the 72 h a phone may be offline plus its longest retry wait (300 s): an event refused
        // as too old is a final 400, and the phone drops it.
        settings.limits.maxEventAge = .seconds(
            try env.int("EVENT_MAX_AGE_SECONDS", default: 7 * 86_400, in: (72 * 3_600 + 300)...(365 * 86_400)))
        settings.limits.maxClockSkewAhead = .seconds(try env.int("EVENT_MAX_AHEAD_SECONDS", default: 300, in: 0...86_400))
        // At most 512 KiB: an event goes to Kafka inside an envelope, and a record that cannot be decoded
        // goes to the dead-letter topic in base64 (a third larger); both stay under the broker's and the
        // producer's 1 MB message limit, which no topic raises.
        settings.limits.maxBodyBytes = try env.int("MAX_BODY_BYTES", default: 64 * 1024, in: 1_024...(512 * 1024))
        settings.rateLimit = TokenBucketConfiguration(
            ratePerSecond: try env.double("RATE_LIMIT_PER_SECOND", default: 2, in: 0.001...1_000_000),
            burst: try env.int("RATE_LIMIT_BURST", default: 20, in: 1...1_000_000)
        )
        settings.idempotency = IdempotencyTableConfiguration(
            completedTTL: .seconds(try env.int("IDEMPOTENCY_TTL_SECONDS", default: 3_600, in: 0...(7 * 86_400))),
            inFlightTTL: .seconds(try env.int("INFLIGHT_TTL_SECONDS", default: 120, in: 1...86_400)),
            maxEntries: try env.int("IDEMPOTENCY_MAX_ENTRIES", default: 200_000, in: 100...10_000_000)
        )
        // At least a batch's events, which share one receipt time: a cut page's cursor then always moves.
        settings.pendingMaxEvents = try env.int("PENDING_MAX_EVENTS", default: 200, in: ValidationLimits().maxBatchEvents...5_000)
        settings.topics = GatewayTopics(
            rawEvents: env.topicName(.rawEvents),
            verdicts: env.topicName(.verdicts),
            deviceTelemetry: env.topicName(.deviceTelemetry),
            registryChanges: env.topicName(.registryChanges)
        )
        return settings
    }
}
