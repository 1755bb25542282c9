import AccessControl
import AsyncHTTPClient
import AttendanceProtocol
import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import PresenceKit

/// Sends one event the way the app does under the no-loss contract: the same body and
/// `Idempotency-Key` on every attempt, until a final verdict (201/200/409/422/400); 202, 5xx,
/// timeouts and connection errors are retried after PresenceKit's `RetryPolicy` delays.
///
/// With several gateways, each device has a home gateway and asks it first; after no answer or a 5xx
/// the next attempt goes to the next gateway, as a load balancer that took the dead one out would.
struct ContractClient: Sendable {
    let http: HTTPClient
    let gateways: [String]
    let requestTimeout: TimeAmount
    let policy = RetryPolicy()
    let classifier = DeliveryClassifier()

    init(http: HTTPClient, gateway: String, requestTimeout: TimeAmount) {
        self.init(http: http, gateways: [gateway], requestTimeout: requestTimeout)
    }

    init(http: HTTPClient, gateways: [String], requestTimeout: TimeAmount) {
        precondition(!gateways.isEmpty, "at least one gateway")
        self.http = http
        self.gateways = gateways
        self.requestTimeout = requestTimeout
    }

    struct Outcome: Sendable {
        let key: String
        let status: Int
        let attempts: Int
        /// From the first attempt to the final verdict.
        let latency: Duration
        /// Statuses of the attempts that were retried (202, 5xx, 0 = no answer).
        let retried: [Int]
        /// The gateway the device asked first, and the one that gave the last answer (indexes into `gateways`).
        var home = 0
        var answeredBy = 0
    }

    func send(
        _ event: AttendanceProtocol.AttendanceEvent, device: LoadFleet.Device, home: Int = 0,
        stopRetryingAfter: ContinuousClock.Instant? = nil
    ) async -> Outcome {
        let body = (try? ProtocolCodec.wire.encode(event)) ?? []
        let start = ContinuousClock.now
        var attempt = 0
        var retried: [Int] = []
        var random = SystemRandomNumberGenerator()
        var target = home % gateways.count
        while true {
            attempt += 1
            let result = await post(body, key: event.idempotencyKey, device: device, gateway: gateways[target])
            var status = 0
            if case .response(let code, _, _) = result { status = code }
            let verdict = classifier.verdict(for: result)
            func outcome() -> Outcome {
                Outcome(
                    key: event.idempotencyKey, status: status, attempts: attempt, latency: ContinuousClock.now - start, retried: retried,
                    home: home % gateways.count, answeredBy: target)
            }
            if case .final = verdict { return outcome() }
            retried.append(status)
            if let stop = stopRetryingAfter, ContinuousClock.now > stop { return outcome() }
            if status == 0 || status >= 500 { target = (target + 1) % gateways.count }
            var delay = policy.delay(beforeRetry: attempt, using: &random)
            if case .retry(_, let notBefore?) = verdict { delay = max(delay, notBefore) }
            try? await Task.sleep(for: .milliseconds(delay))
        }
    }

    /// The answer as PresenceKit's classifier reads it: status, problem type, Retry-After.
    private func post(_ body: [UInt8], key: String, device: LoadFleet.Device, gateway: String) async -> DeliveryResult {
        var request = HTTPClientRequest(url: gateway + "/v1/attendance/events")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer \(device.token)")
        request.headers.add(name: "X-Device-Id", value: device.deviceId)
        request.headers.add(name: "X-App-Version", value: "1.12.0")
        request.headers.add(name: "Idempotency-Key", value: key)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await http.execute(request, timeout: requestTimeout)
            let bytes = try await response.body.collect(upTo: 1 << 20)
            var problemType: String?
            if response.status.code >= 400, let problem = try? JSONDecoder().decode(ProblemDetails.self, from: Data(buffer: bytes)) {
                problemType = problem.type
            }
            let retryAfter = response.headers.first(name: "Retry-After").flatMap { Int64($0) }.map { $0 * 1_000 }
            return .response(status: Int(response.status.code), problemType: problemType, retryAfterMs: retryAfter)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .timeout
        } catch {
            return .transportError(String(describing: error))
        }
    }

    /// The device's key: sha256(userId|deviceId|beaconId|tStart|nonce), hex.
    static func idempotencyKey(device: LoadFleet.Device, beaconId: String, at time: Date, nonce: String) -> String {
        let text = "\(device.userId)|\(device.deviceId)|\(beaconId)|\(Int64(time.timeIntervalSince1970 * 1_000))|\(nonce)"
        // Foundation's String(format:) per byte was a seventh of the load generator's CPU, taken from
        // the services it measures.
        return Secrets.sha256Hex(text)
    }

    /// An honest event at the fleet's beacon: a check-in first, then heartbeats (which are not
    /// punches, so the rate-limit rule lets a steady load through).
    static func event(fleet: LoadFleet, device: LoadFleet.Device, sequence: Int, at time: Date) -> AttendanceProtocol.AttendanceEvent {
        let key = idempotencyKey(device: device, beaconId: fleet.beaconId, at: time, nonce: "\(sequence)")
        return AttendanceProtocol.AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: key, userId: device.userId, deviceId: device.deviceId, timestamp: time,
            type: sequence == 0 ? .checkin : .heartbeat, siteId: fleet.siteId, beacon: fleet.beacon,
            rssiSeries: [-75, -71, -68, -66, -70], txPower: -59, motion: .init(state: .walking, steps2min: 42),
            geofence: .init(inside: true, radius: 200), handshake: nil, network: .init(online: true, latencyMs: 40),
            app: .init(version: "1.12.0", build: 345), device: .init(model: "Pixel 8", os: "Android 15"),
            sessionKey: "load-\(device.deviceId)", tEnd: nil, queuedOffline: nil,
            location: .init(lat: 10.7772, lon: 106.7012, accuracyM: 15), attestation: .init(jailbroken: false, simulatedLocation: false)
        )
    }
}
