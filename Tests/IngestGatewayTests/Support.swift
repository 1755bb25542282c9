import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayCore
import IngestGatewayService
import Logging
import PolicyServiceCore
import RegistryFeed
import Synchronization
import Testing

// MARK: - Device tokens

enum TestKeys {
    static let signer: DeviceTokenSigner = {
        let key = try! DeviceSigningKey(id: "gw-test", secret: Array(repeating: 5, count: 32))
        return try! DeviceTokenSigner(activeKey: key)
    }()

    /// Another deployment's key: its tokens are well formed but not ours.
    static let foreignSigner: DeviceTokenSigner = {
        let key = try! DeviceSigningKey(id: "gw-test", secret: Array(repeating: 6, count: 32))
        return try! DeviceTokenSigner(activeKey: key)
    }()

    static func token(
        device: String, user: String, issuedAt: Date = Date(), lifetime: Duration = .seconds(3_600), signer: DeviceTokenSigner = signer
    ) -> String {
        signer.sign(deviceId: device, userId: user, issuedAt: issuedAt, lifetime: lifetime).token
    }
}

/// A device of the tests: ids and a valid token.
struct TestDevice: Sendable {
    let deviceId: String
    let userId: String
    let token: String

    static func make(_ prefix: String = "dev") -> TestDevice {
        let tag = UUID().uuidString.prefix(8).lowercased()
        let device = "\(prefix)_\(tag)"
        let user = "usr_\(tag)"
        return TestDevice(deviceId: device, userId: user, token: TestKeys.token(device: device, user: user))
    }
}

// MARK: - Payloads

enum Sample {
    static let beaconUUID = "FF8488AE-921E-49F4-99D4-949B0F9F6171"

    /// Now, at the wire's millisecond precision (values survive a round trip unchanged).
    static func now() -> Date { WireTimestamp.truncatedToWirePrecision(Date()) }

    static func key() -> String {
        IdempotencyKeys.sha256Hex(Array(UUID().uuidString.utf8))
    }

    static func event(
        for device: TestDevice, key: String = key(), at: Date = now(), type: AttendanceEventType = .checkin
    ) -> AttendanceEvent {
        AttendanceEvent(
            id: UUID().uuidString.lowercased(), idempotencyKey: key, userId: device.userId, deviceId: device.deviceId,
            timestamp: at.addingTimeInterval(-5), type: type, siteId: "S_HQ",
            beacon: BeaconIdentity(uuid: beaconUUID, major: 10, minor: 3),
            rssiSeries: [-75, -71, -68, -66], txPower: -59,
            motion: .init(state: .walking, steps2min: 42), geofence: .init(inside: true, radius: 200),
            app: .init(version: "1.12.0", build: 345), device: .init(model: "iPhone14,5", os: "iOS 18.0")
        )
    }

    static func json<T: Encodable>(_ value: T) -> String {
        try! ProtocolCodec.wire.encodeToString(value)
    }
}

// MARK: - Fakes

/// Plays the policy service and the merger for router tests: records what the gateway produced and
/// answers each raw event as `decide` says, after `delay`.
final class FakePipeline: GatewayPublisher, Sendable {
    enum Decision: Sendable {
        case accept
        case reject(reasons: [String], action: AppAction)
        case duplicate(receipt: String)
        case silent
        case fail
    }

    struct State {
        var envelopes: [RawEventEnvelope] = []
        var telemetry: [DeviceTelemetryBatch] = []
        var decision: Decision = .accept
        var delay: Duration = .zero
        var failTelemetry = false
    }

    let state = Mutex(State())
    private let target = Mutex<IngestPipeline?>(nil)

    func attach(_ pipeline: IngestPipeline) { target.withLock { $0 = pipeline } }

    var envelopes: [RawEventEnvelope] { state.withLock { $0.envelopes } }
    var telemetry: [DeviceTelemetryBatch] { state.withLock { $0.telemetry } }

    func set(_ decision: Decision, delay: Duration = .zero) {
        state.withLock {
            $0.decision = decision
            $0.delay = delay
        }
    }

    func publish(_ envelope: RawEventEnvelope, payload: PreEncoded<RawEventPayload>) async throws {
        // The envelope must survive the wire, as the Kafka publisher writes it.
        let decoded = try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: try envelope.wireBytes(payload: payload))
        let (decision, delay) = state.withLock { state in
            (state.decision, state.delay)
        }
        if case .fail = decision { throw FakeError.brokerDown }
        state.withLock { $0.envelopes.append(decoded) }
        guard let verdict = Self.verdict(for: decoded, decision) else { return }
        let pipeline = target.withLock { $0 }
        Task {
            if delay > .zero { try? await Task.sleep(for: delay) }
            pipeline?.receive(verdict)
        }
    }

    func publish(_ batch: DeviceTelemetryBatch) async throws {
        if state.withLock({ $0.failTelemetry }) { throw FakeError.brokerDown }
        state.withLock { $0.telemetry.append(batch) }
    }

    static func verdict(for envelope: RawEventEnvelope, _ decision: Decision) -> AttendanceVerdict? {
        let base = { (outcome: VerdictOutcome, receipt: String?, session: String?, reasons: [String], action: AppAction) in
            AttendanceVerdict(
                requestId: envelope.requestId, idempotencyKey: envelope.idempotencyKey, userId: envelope.userId,
                deviceId: envelope.deviceId, siteId: envelope.siteId, outcome: outcome, serverReceiptId: receipt,
                sessionId: session, reasons: reasons, action: action, eventTime: envelope.payload.eventTime,
                decidedAt: Date(), gatewayInstance: envelope.gatewayInstance
            )
        }
        switch decision {
        case .accept: return base(.accepted, "rcpt_\(envelope.idempotencyKey.prefix(12))", "ses_\(envelope.userId)", [], .noAction)
        case .reject(let reasons, let action): return base(.rejected, nil, nil, reasons, action)
        case .duplicate(let receipt): return base(.duplicate, receipt, "ses_\(envelope.userId)", [], .noAction)
        case .silent, .fail: return nil
        }
    }

    enum FakeError: Error { case brokerDown }
}

/// The merger's tables, in memory.
final class FakeRepository: AttendanceReadRepository, Sendable {
    let outcomes = Mutex<[String: (deviceId: String, response: EventOutcomeResponse)]>([:])
    let sessions = Mutex<[String: [SessionSummary]]>([:])

    func outcome(idempotencyKeys: [String], deviceId: String) async throws -> EventOutcomeResponse? {
        outcomes.withLock { stored in
            idempotencyKeys.compactMap { stored[$0] }.first { $0.deviceId == deviceId }?.response
        }
    }

    func events(deviceId: String, since: Date, limit: Int) async throws -> [EventOutcomeResponse] {
        outcomes.withLock { Array($0.values) }
            .filter { $0.deviceId == deviceId && $0.response.receivedAt >= since }
            .map(\.response).sorted { $0.receivedAt < $1.receivedAt }.prefix(limit).map { $0 }
    }

    func openSessions(userId: String) async throws -> [SessionSummary] {
        sessions.withLock { $0[userId] ?? [] }
    }
}

// MARK: - Harness

struct RouterHarness: Sendable {
    let pipeline: IngestPipeline
    let fake: FakePipeline
    let repository: FakeRepository
    let cache: RegistryCache

    // Generous: a fake verdict due in 500 ms must not miss the wait when the whole suite loads both cores.
    static func settings(wait: Duration = .seconds(10)) -> GatewayConfiguration {
        var settings = GatewayConfiguration()
        settings.verdictWait = wait
        settings.rateLimit = TokenBucketConfiguration(ratePerSecond: 1_000, burst: 1_000)
        return settings
    }

    /// The gateway's routes over fakes.
    static func router(settings: GatewayConfiguration = settings()) -> Router<GatewayRequestContext> {
        let fake = FakePipeline()
        let cache = RegistryCache()
        let pipeline = IngestPipeline(
            instanceId: "gw-routes", settings: settings, publisher: fake, cache: cache, logger: Logger(label: "gateway-tests"))
        fake.attach(pipeline)
        return buildRouter(
            dependencies: GatewayDependencies(
                pipeline: pipeline, publisher: fake, repository: FakeRepository(), signer: TestKeys.signer, cache: cache, limiter: nil,
                challenges: nil
            ))
    }

    /// The gateway router over fakes (`app.test(.router)`).
    static func run(
        settings: GatewayConfiguration = settings(),
        limiter: DeviceRateLimiter? = nil,
        challenges: GattNonceCodec? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        _ body: @Sendable (RouterHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        let fake = FakePipeline()
        let cache = RegistryCache()
        let pipeline = IngestPipeline(
            instanceId: "gw-test-\(UUID().uuidString.prefix(6))", settings: settings, publisher: fake, cache: cache,
            logger: Logger(label: "gateway-tests")
        )
        fake.attach(pipeline)
        let repository = FakeRepository()
        let dependencies = GatewayDependencies(
            pipeline: pipeline, publisher: fake, repository: repository, signer: TestKeys.signer, cache: cache, limiter: limiter,
            challenges: challenges, now: now
        )
        let harness = RouterHarness(pipeline: pipeline, fake: fake, repository: repository, cache: cache)
        let app = Application(router: buildRouter(dependencies: dependencies))
        try await app.test(.router) { client in
            try await body(harness, client)
        }
    }
}

// MARK: - Requests

extension TestClientProtocol {
    /// A device request: token, `X-Device-Id`, JSON content type and `Idempotency-Key` unless told otherwise.
    func device(
        _ method: HTTPRequest.Method, _ uri: String, as device: TestDevice?, body: String? = nil, key: String? = nil,
        deviceIdHeader: String? = nil, token: String? = nil, contentType: String? = MediaType.json, extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        var headers = extra
        if let device {
            headers[.authorization] = "Bearer \(token ?? device.token)"
            headers[HTTPFieldName(HTTPHeader.deviceId)!] = deviceIdHeader ?? device.deviceId
        }
        if let key { headers[HTTPFieldName(HTTPHeader.idempotencyKey)!] = key }
        if body != nil, let contentType { headers[.contentType] = contentType }
        headers[HTTPFieldName(HTTPHeader.appVersion)!] = "1.12.0"
        return try await execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    /// `POST /v1/attendance/events` with the event's own key in the header.
    func postEvent(_ event: AttendanceEvent, as device: TestDevice) async throws -> TestResponse {
        try await self.device(.post, APIPath.events, as: device, body: Sample.json(event), key: event.idempotencyKey)
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    func header(_ name: String) -> String? { headers[HTTPFieldName(name)!] }

    func decode<T: Decodable>(_ type: T.Type, status expected: Int, sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
        #expect(status.code == expected, "\(text)", sourceLocation: sourceLocation)
        return try ProtocolCodec.wire.decode(T.self, from: text)
    }

    /// The problem+json body, expecting `status` and the problem type.
    @discardableResult
    func problem(_ expected: Int, _ type: ProblemType? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> ProblemDetails {
        #expect(status.code == expected, "\(text)", sourceLocation: sourceLocation)
        #expect(headers[.contentType] == ProblemDetails.mediaType, sourceLocation: sourceLocation)
        let problem = try ProtocolCodec.wire.decode(ProblemDetails.self, from: text)
        #expect(problem.status == expected, sourceLocation: sourceLocation)
        if let type { #expect(problem.type == type.uri, "\(text)", sourceLocation: sourceLocation) }
        return problem
    }
}
