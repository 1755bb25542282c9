import AttendanceProtocol
import CoreMetrics
import Foundation
import IngestGatewayCore
import Logging
import RegistryFeed
import ServiceRuntime
import Synchronization

/// What happens to a validated, authenticated request: idempotency check, the raw-event envelope
/// produced to `attendance.events.raw`, and a bounded wait for its verdict.
///
/// - New key: produce (503 when that fails; nothing is remembered, the device retries), then wait
///   up to `verdictWait`: the verdict's status (201 accepted, 200 duplicate, 409 rejected, 422
///   payload mismatch), or 202 queued with the status URL.
/// - Same key, same payload, still in flight here: 409 in flight (retry with the same key).
/// - Same key, same payload, finished: the outcome again with `Idempotent-Replayed: true` (an
///   accepted event is a 200 with the original receipt).
/// - Same key, another payload: 422.
/// - A key this instance forgot (restart, expiry, another instance) is simply produced again; the
///   merger answers `duplicate` (200 with the original receipt) or `payload_mismatch` (422).
package final class IngestPipeline: Sendable {
    package let instanceId: String
    package let settings: GatewayConfiguration
    package let table: IdempotencyTable
    package let cache: RegistryCache
    let publisher: any GatewayPublisher
    let logger: Logger
    /// Events and telemetry not produced (the broker away), logged at most once per 10 s: each is
    /// counted in `ingest_gateway_produce_failures_total`.
    package let produceFailureLog = RepeatedFailureLog()
    /// The phones' reads of stored outcomes that failed (PostgreSQL away), logged at most once per 10 s.
    package let outcomeStoreFailureLog = RepeatedFailureLog()
    /// False until the verdict reader has fixed where it starts reading (`markVerdictsRead()`). A request
    /// produced before that could have its verdict written before the reader's start and skipped: its
    /// phone would wait out the in-flight time (2 minutes) for a confirmation. Until then every request
    /// is answered 503 with nothing produced or remembered, and the phone retries a second later.
    private let verdictsRead: Atomic<Bool>

    /// - Parameter verdictsRead: false when a `VerdictListener` will call `markVerdictsRead()` once
    ///   positioned (the service); true when nothing waits for verdicts to be read (tests over fakes).
    package init(
        instanceId: String, settings: GatewayConfiguration, publisher: any GatewayPublisher, cache: RegistryCache, logger: Logger,
        verdictsRead: Bool = true
    ) {
        self.instanceId = instanceId
        self.settings = settings
        self.publisher = publisher
        self.cache = cache
        self.logger = logger
        self.table = IdempotencyTable(settings: settings.idempotency)
        self.verdictsRead = Atomic(verdictsRead)
    }

    /// The verdict reader starts at a fixed position: every request produced from now on has its verdict read.
    package func markVerdictsRead() { verdictsRead.store(true, ordering: .releasing) }

    /// The verdict reader lost its partitions (its group session expired while the broker was away, or
    /// the process is stopping): until it is positioned again, a verdict produced meanwhile could be
    /// missed, so requests are answered 503 instead of waiting for one.
    package func markVerdictsUnread() { verdictsRead.store(false, ordering: .releasing) }

    /// One request to process.
    package struct Submission: Sendable {
        package var idempotencyKey: String
        package var payload: RawEventPayload
        package var device: AuthenticatedDevice
        package var appVersion: String?
        package var requestId: String
    }

    /// The answer for one request (or one batch item).
    package enum Answer: Sendable, Hashable {
        /// 201, 200 or 202 with its body.
        case accepted(AcceptedResponse, status: Int, replayed: Bool)
        case problem(ProblemDetails, replayed: Bool)

        package var status: Int {
            switch self {
            case .accepted(_, let status, _): return status
            case .problem(let problem, _): return problem.status
            }
        }
    }

    package func submit(_ submission: Submission, now clock: Date = Date()) async -> Answer {
        // The receipt at the wire's millisecond, here as in the envelope and the merger's record, so the
        // in-flight table and a poll's `since` compare the instant a later read of the store gives back.
        let now = WireTimestamp.truncatedToWirePrecision(clock)
        let key = submission.idempotencyKey
        guard verdictsRead.load(ordering: .acquiring) else {
            GatewayMetrics.unpositioned.increment()
            return .problem(
                .unavailable(
                    "the gateway's verdict reader is not positioned (starting, or rejoining after the broker was away); "
                        + "retry with the same Idempotency-Key",
                    retryAfterSeconds: 1),
                replayed: false)
        }
        // Encoded once: the fingerprint hashes it and the producer sends it inside the envelope.
        let encodedPayload: PreEncoded<RawEventPayload>
        do {
            encodedPayload = try PreEncoded(submission.payload)
        } catch {
            return .problem(.validation([FieldError(field: error.path, reason: error.reason)]), replayed: false)
        }
        let fingerprint = IdempotencyKeys.fingerprint(encodedPayload)
        switch table.begin(
            key: key, deviceId: submission.device.deviceId, fingerprint: fingerprint, requestId: submission.requestId,
            eventTime: submission.payload.eventTime, now: now
        ) {
        case .mismatch:
            return .problem(.payloadMismatch(instance: APIPath.event(idempotencyKey: key)), replayed: false)
        case .inFlight:
            return .problem(
                .inFlight(retryAfterSeconds: settings.retryAfterSeconds, instance: APIPath.event(idempotencyKey: key)), replayed: false)
        case .completed(_, let outcome):
            return Self.answer(for: outcome, key: key, replayed: true)
        case .full:
            GatewayMetrics.tableFull.increment()
            return .problem(
                .unavailable(
                    "the gateway holds as many requests awaiting their verdict as it may (the pipeline is behind); "
                        + "retry with the same Idempotency-Key", retryAfterSeconds: settings.retryAfterSeconds * 10),
                replayed: false)
        case .started:
            break
        }

        let envelope = RawEventEnvelope(
            requestId: submission.requestId, idempotencyKey: key, userId: submission.device.userId,
            deviceId: submission.device.deviceId, siteId: siteId(for: submission.payload), appVersion: submission.appVersion,
            gatewayInstance: instanceId, receivedAt: now, payloadFingerprint: fingerprint, payload: submission.payload
        )
        do {
            try await publisher.publish(envelope, payload: encodedPayload)
        } catch {
            table.abandon(key: key, requestId: submission.requestId)
            GatewayMetrics.produceFailures.increment()
            produceFailureLog.log(
                .warning, "raw event not produced; the device retries",
                metadata: ["idempotencyKey": .string(key), "error": .string(String(describing: error))], logger: logger)
            return .problem(
                .unavailable(
                    "the event could not be queued; retry with the same Idempotency-Key", retryAfterSeconds: settings.retryAfterSeconds),
                replayed: false
            )
        }

        let started = ContinuousClock.now
        let outcome = await table.waitForOutcome(key: key, timeout: settings.verdictWait)
        GatewayMetrics.verdictWait.recordNanoseconds(Self.nanoseconds(ContinuousClock.now - started))
        guard let outcome else {
            let url = APIPath.event(idempotencyKey: key)
            return .accepted(AcceptedResponse(status: .queued, statusUrl: url), status: AcceptanceStatus.queued.httpStatus, replayed: false)
        }
        return Self.answer(for: outcome, key: key, replayed: false)
    }

    /// A verdict from `attendance.verdicts`: completes this instance's waiting request, if any.
    /// `false` when it is another instance's, or no request with that key is held here.
    @discardableResult
    package func receive(_ verdict: AttendanceVerdict, now: Date = Date()) -> Bool {
        guard verdict.gatewayInstance == instanceId else { return false }
        return table.complete(key: verdict.idempotencyKey, requestId: verdict.requestId, outcome: RecordedOutcome(verdict), now: now)
    }

    /// The site of a request: the beacon's (through the registry feed) for an event, else the
    /// payload's own; `nil` when neither is known (check-out and heartbeat carry no site).
    package func siteId(for payload: RawEventPayload) -> String? {
        switch payload {
        case .event(let event):
            return cache.resolve(event.beacon)?.siteId ?? event.siteId
        case .checkIn(let request):
            return request.siteId
        case .checkOut, .heartbeat:
            return nil
        }
    }

    /// The answer for a verdict: accepted 201 (200 when replayed), duplicate 200, rejected 409 with
    /// reasons and action, payload mismatch 422.
    static func answer(for outcome: RecordedOutcome, key: String, replayed: Bool) -> Answer {
        let instance = APIPath.event(idempotencyKey: key)
        switch outcome.outcome {
        case .accepted:
            let body = AcceptedResponse(serverReceiptId: outcome.serverReceiptId, sessionId: outcome.sessionId, status: .accepted)
            return .accepted(body, status: replayed ? 200 : AcceptanceStatus.accepted.httpStatus, replayed: replayed)
        case .duplicate:
            let body = AcceptedResponse(serverReceiptId: outcome.serverReceiptId, sessionId: outcome.sessionId, status: .duplicate)
            return .accepted(body, status: AcceptanceStatus.duplicate.httpStatus, replayed: true)
        case .rejected:
            return .problem(
                .policyConflict(
                    reasons: outcome.reasons, action: outcome.action, retryAfterSeconds: outcome.retryAfterSeconds, instance: instance),
                replayed: replayed
            )
        case .payloadMismatch:
            return .problem(.payloadMismatch(instance: instance), replayed: replayed)
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
