import AsyncHTTPClient
import AttendanceProtocol
import FleetSimulatorCore
import Foundation
import NIOCore
import NIOHTTP1
import PresenceKit
import Synchronization

/// Maps wall time to the simulation's time: `scale` virtual seconds per wall second from
/// `virtualStart`. Runs against the stack use scale 1 from the current time (real time).
package final class VirtualClock: VirtualPacer, Sendable {
    package let virtualStart: Int64
    package let scale: Double
    let wallStart: ContinuousClock.Instant

    package init(virtualStart: Int64, scale: Double) {
        self.virtualStart = virtualStart
        self.scale = scale
        wallStart = .now
    }

    package func virtualNow() -> Int64 {
        let elapsed = ContinuousClock.now - wallStart
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        return virtualStart + Int64(ms * scale)
    }

    /// Sleeps while `t` is ahead of the virtual clock; short leads are let through so that thousands
    /// of devices do not each sleep a few microseconds every simulated second.
    package func waitUntil(virtual t: Int64) async {
        let lead = Double(t - virtualNow()) / scale
        guard lead > 20 else { return }
        try? await Task.sleep(for: .milliseconds(Int64(lead)))
    }
}

/// The device's HTTP client: the device payload to `POST /v1/attendance/events` with the
/// stored `Idempotency-Key`, under the no-loss contract (PresenceKit's `OutboxDrainer`: the same
/// key on every retry, the entry deleted only on a final verdict). The phone's network troubles are
/// applied before the request leaves: offline (no attempt), a captive portal (an HTML 200 that must
/// not count as a verdict), 2G latency.
package struct GatewayDelivery: DeliveryDriver {
    package let http: HTTPClient
    package let gateway: String
    package let tokens: [String: String]
    package let clock: VirtualClock
    package var requestTimeout: TimeAmount = .seconds(4)
    /// Bounds the end-of-run sync (no background budget then) in wall time.
    package var finalSyncWall: Duration = .seconds(180)
    /// Asks the registry for a phone's configuration again on its background wakes (nil: never).
    package var configurationRefresh: ConfigurationRefresh?

    package func refreshedDirectory(device: DeviceIdentity, profile: PhoneProfile, at now: Int64) async -> SiteDirectory? {
        guard let configurationRefresh, case .online = profile.network(at: now) else { return nil }
        return await configurationRefresh.refreshed(deviceId: device.deviceId)
    }

    package func drain(
        outbox: Outbox, device: DeviceIdentity, profile: PhoneProfile, at now: Int64, budgetMs: Int64?,
        random: inout SimulationRandom, attempts: inout AttemptLog
    ) async throws -> [DeliveryRecord] {
        let wall = SystemClock()
        let drainer = OutboxDrainer(outbox: outbox, clock: wall, sleep: { ms in try? await Task.sleep(for: .milliseconds(ms)) })
        let budget = budgetMs ?? Int64(finalSyncWall.components.seconds * 1000)
        let deadline = wall.now() + budget
        var kinds: [UInt64: (key: String, kind: String, timestamp: Int64?, firstAttempt: ContinuousClock.Instant)] = [:]
        var answered: [UInt64: (at: Int64, attempts: Int, wallMs: Double)] = [:]
        var reached: [UInt64: Int64] = [:]
        var log = AttemptLog()
        let token = tokens[device.deviceId] ?? ""
        let report = try await drainer.drain(deadline: deadline, random: &random.generator) { entry, payload in
            let event = try? PresenceCoding.decodeEvent(payload)
            kinds[entry.id] = (
                event?.idempotencyKey.hex ?? "?", event?.type.rawValue ?? "?", event?.timestamp.millisecondsSinceEpoch,
                kinds[entry.id]?.firstAttempt ?? .now
            )
            // The final sync happens on a working network; before it, the phone's own conditions.
            let condition = budgetMs == nil ? NetworkCondition.online(latencyMs: 0) : profile.network(at: clock.virtualNow())
            let result: DeliveryResult
            switch condition {
            case .offline:
                result = .transportError("offline")
            case .captivePortal:
                result = ContractReading.deliveryResult(TransportAnswer(status: 200, contentType: "text/html; charset=utf-8"))
            case .online(let latency):
                if latency > 300 { try? await Task.sleep(for: .milliseconds(min(latency, 2_500))) }
                if let event {
                    let sentAt = clock.virtualNow()
                    let (answer, date) = await post(event, token: token, model: profile.model)
                    result = answer
                    log.note(date: date, sentAt: sentAt, answeredAt: clock.virtualNow())
                } else {
                    result = .response(status: 400, problemType: "undecodable outbox entry", retryAfterMs: nil)
                }
            }
            log.count(result)
            if case .response = result, reached[entry.id] == nil { reached[entry.id] = clock.virtualNow() }
            let first = kinds[entry.id]?.firstAttempt ?? .now
            let elapsed = ContinuousClock.now - first
            answered[entry.id] = (
                clock.virtualNow(), (answered[entry.id]?.attempts ?? 0) + 1,
                Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            )
            return result
        }
        attempts.merge(log)
        return report.delivered.map { delivered in
            let k = kinds[delivered.id]
            let a = answered[delivered.id]
            return DeliveryRecord(
                key: k?.key ?? "?", kind: k?.kind ?? "?", status: delivered.status, attempts: a?.attempts ?? 1,
                verdictAt: a?.at ?? clock.virtualNow(), wallLatencyMs: a?.wallMs, reachedServerAt: reached[delivered.id],
                timestamp: k?.timestamp)
        }
    }

    /// `POST /v1/telemetry` in chunks the gateway takes (at most 500 records), through the phone's
    /// network like the attendance events; stops at the first chunk not answered 202.
    package func uploadTelemetry(
        _ records: [TelemetryRecord], device: DeviceIdentity, siteId: String, profile: PhoneProfile, at now: Int64, finalSync: Bool
    ) async -> Int {
        if !finalSync {
            switch profile.network(at: clock.virtualNow()) {
            case .offline, .captivePortal: return 0
            case .online(let latency): if latency > 300 { try? await Task.sleep(for: .milliseconds(min(latency, 2_500))) }
            }
        }
        var taken = 0
        while taken < records.count {
            let chunk = records[taken..<min(records.count, taken + 500)]
            let upload = TelemetryUploadRequest(
                appVersion: Self.appVersion, deviceModel: profile.model, osVersion: Self.osVersion, siteId: siteId,
                events: chunk.map { record in
                    TelemetryEvent(
                        eventId: record.eventId, name: TelemetryEventName(rawValue: record.name),
                        at: Date(timeIntervalSince1970: Double(record.at.millisecondsSinceEpoch) / 1000),
                        value: record.value, attributes: record.attributes)
                })
            guard let body = try? ProtocolCodec.wire.encode(upload) else { return taken }
            var request = HTTPClientRequest(url: gateway + "/v1/telemetry")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Authorization", value: "Bearer \(tokens[device.deviceId] ?? "")")
            request.headers.add(name: "X-Device-Id", value: device.deviceId)
            request.headers.add(name: "X-App-Version", value: Self.appVersion)
            request.body = .bytes(ByteBuffer(bytes: body))
            guard let response = try? await http.execute(request, timeout: requestTimeout) else { return taken }
            _ = try? await response.body.collect(upTo: 1 << 20)
            guard response.status.code == 202 else { return taken }
            taken += chunk.count
        }
        return taken
    }

    /// The `launchRequest` of the app: `GET /v1/attendance/pending` for the last day, waiting up to
    /// `DeliveryTimeouts.launchRequestMs` for its answer.
    package func launchRequest(device: DeviceIdentity, profile: PhoneProfile, at now: Int64, answers: inout AttemptLog) async {
        guard case .online(let latency) = profile.network(at: clock.virtualNow()) else { return }
        if latency > 300 { try? await Task.sleep(for: .milliseconds(min(latency, 2_500))) }
        let since = WireTimestamp.string(from: Date(timeIntervalSince1970: Double(now - 86_400_000) / 1000))
        var request = HTTPClientRequest(url: gateway + "/v1/attendance/pending?since=" + since)
        request.headers.add(name: "Authorization", value: "Bearer \(tokens[device.deviceId] ?? "")")
        request.headers.add(name: "X-Device-Id", value: device.deviceId)
        request.headers.add(name: "X-App-Version", value: Self.appVersion)
        let sentAt = clock.virtualNow()
        guard let response = try? await http.execute(request, timeout: .milliseconds(DeliveryTimeouts.launchRequestMs)) else { return }
        _ = try? await response.body.collect(upTo: 1 << 20)
        let answer = TransportAnswer(status: Int(response.status.code), contentType: response.headers.first(name: "Content-Type"))
        answers.note(
            date: ContractReading.gatewayDate(answer.dated(response.headers.first(name: "Date"))), sentAt: sentAt,
            answeredAt: clock.virtualNow())
    }

    /// One event; the answer and its `Date` header.
    func post(_ event: PresenceKit.AttendanceEvent, token: String, model: String) async -> (DeliveryResult, date: String?) {
        let body: [UInt8]
        do {
            body = try ProtocolCodec.wire.encode(Self.wireEvent(event, model: model))
        } catch {
            return (.response(status: 400, problemType: "unencodable: \(error)", retryAfterMs: nil), nil)
        }
        var request = HTTPClientRequest(url: gateway + "/v1/attendance/events")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "X-Device-Id", value: event.deviceId)
        request.headers.add(name: "X-App-Version", value: Self.appVersion)
        request.headers.add(name: "Idempotency-Key", value: event.idempotencyKey.hex)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await http.execute(request, timeout: requestTimeout)
            let bytes = try await response.body.collect(upTo: 1 << 20)
            var problemType: String?
            if response.status.code >= 400,
                let problem = try? JSONDecoder().decode(ProblemDetails.self, from: Data(bytes.readableBytesView))
            {
                problemType = problem.type
            }
            let retryAfter = response.headers.first(name: "Retry-After").flatMap { Int64($0) }.map { $0 * 1_000 }
            let answer = TransportAnswer(
                status: Int(response.status.code), contentType: response.headers.first(name: "Content-Type"),
                problemType: problemType, retryAfterMs: retryAfter
            ).dated(response.headers.first(name: "Date"))
            return (ContractReading.deliveryResult(answer), ContractReading.gatewayDate(answer))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return (.timeout, nil)
        } catch {
            return (.transportError(String(describing: error)), nil)
        }
    }

    /// The app the simulated phones run.
    package static let appVersion = "1.12.0"
    static let osVersion = "iOS 18.0"

    /// PresenceKit's event as the device API's REST payload (an event stored while offline says so).
    package static func wireEvent(_ e: PresenceKit.AttendanceEvent, model: String) -> AttendanceProtocol.AttendanceEvent {
        let type: AttendanceEventType =
            switch e.type {
            case .checkIn: .checkin
            case .checkOut: .checkout
            case .heartbeat: .heartbeat
            }
        return AttendanceProtocol.AttendanceEvent(
            id: e.id, idempotencyKey: e.idempotencyKey.hex, userId: e.userId, deviceId: e.deviceId,
            timestamp: Date(timeIntervalSince1970: Double(e.timestamp.millisecondsSinceEpoch) / 1000), type: type, siteId: e.siteId,
            beacon: AttendanceProtocol.BeaconIdentity(
                uuid: e.beacon.uuid.uuidString, major: Int(e.beacon.major), minor: Int(e.beacon.minor)),
            rssiSeries: e.rssiSeries?.isEmpty == false ? e.rssiSeries : nil, txPower: -59,
            motion: .init(state: MotionState(rawValue: e.motion.state.rawValue), steps2min: e.motion.steps2min),
            geofence: .init(inside: e.geofence.inside, radius: e.geofence.radius),
            handshake: e.handshake.map { .init(ok: $0.ok, rt: $0.rt) },
            network: .init(online: e.network.online), app: .init(version: appVersion, build: 345),
            device: .init(model: model, os: osVersion), sessionKey: e.sessionKey, queuedOffline: e.network.online ? nil : true,
            attestation: .init(jailbroken: false, simulatedLocation: false)
        )
    }
}
