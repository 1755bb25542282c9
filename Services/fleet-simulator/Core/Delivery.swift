import AttendanceProtocol
import Foundation
import PresenceKit
import Synchronization

/// An HTTP answer as the device's client sees it, before it decides what it means.
package struct TransportAnswer: Sendable, Hashable {
    package var status: Int
    package var contentType: String?
    package var problemType: String?
    package var retryAfterMs: Int64?
    /// The `Date` header.
    package var date: String?

    package init(status: Int, contentType: String?, problemType: String? = nil, retryAfterMs: Int64? = nil) {
        self.status = status
        self.contentType = contentType
        self.problemType = problemType
        self.retryAfterMs = retryAfterMs
    }

    /// The same answer with a `Date` header.
    package func dated(_ date: String?) -> TransportAnswer {
        var answer = self
        answer.date = date
        return answer
    }
}

/// An answer's `Date` header and the true times its request left and its answer came back: what
/// the phone learns the server's clock from (`ServerClock`).
package struct ServerDate: Sendable, Hashable {
    package var sentAt: Int64
    package var answeredAt: Int64
    package var header: String
}

package enum ContractReading {
    /// The `Date` of an answer that is the gateway's own (JSON or problem+json); nil for anything else,
    /// such as a captive portal's page, whose clock says nothing of the server's.
    package static func gatewayDate(_ answer: TransportAnswer) -> String? {
        isGatewayAnswer(answer) ? answer.date : nil
    }

    /// JSON or problem+json: what the gateway answers, never a captive portal or a proxy's error page.
    static func isGatewayAnswer(_ answer: TransportAnswer) -> Bool {
        let type = answer.contentType?.lowercased() ?? ""
        return type.hasPrefix("application/json") || type.hasPrefix("application/problem+json")
    }

    /// Only the gateway's own JSON answers are verdicts. A captive portal (or a proxy's error page)
    /// answers 200 or 302 with HTML: taking that 200 as "stored" would delete the event from the
    /// outbox and lose it, so anything that is not JSON is a transport failure and is retried.
    package static func deliveryResult(_ answer: TransportAnswer) -> DeliveryResult {
        guard isGatewayAnswer(answer) else {
            return .transportError("not the gateway: HTTP \(answer.status) \(answer.contentType ?? "without a content type")")
        }
        return .response(status: answer.status, problemType: answer.problemType, retryAfterMs: answer.retryAfterMs)
    }
}

/// What the device knows about one delivery: a final verdict for an outbox entry.
package struct DeliveryRecord: Sendable, Hashable, Codable {
    package var key: String
    package var kind: String
    package var status: Int
    package var attempts: Int
    /// Virtual (true) time of the final verdict.
    package var verdictAt: Int64
    /// Wall-clock milliseconds from the entry's first attempt in this drain to its verdict (real stack only).
    package var wallLatencyMs: Double?
    /// Virtual (true) time the event first reached the server: the first attempt the server answered
    /// (any status), the moment the telemetry aggregator's SLO counts as the receipt.
    package var reachedServerAt: Int64
    /// The event's own time (epoch milliseconds) as the answered request carried it: what the server
    /// recorded, which the app may have corrected after the event was decided (nil when unknown).
    package var timestamp: Int64?

    package init(
        key: String, kind: String, status: Int, attempts: Int, verdictAt: Int64, wallLatencyMs: Double? = nil,
        reachedServerAt: Int64? = nil,
        timestamp: Int64? = nil
    ) {
        self.key = key
        self.kind = kind
        self.status = status
        self.attempts = attempts
        self.verdictAt = verdictAt
        self.wallLatencyMs = wallLatencyMs
        self.reachedServerAt = reachedServerAt ?? verdictAt
        self.timestamp = timestamp
    }
}

/// Statuses seen per attempt, final or not (the report's status-code mix), and the `Date` headers of
/// the answers (for the phone, not the report).
package struct AttemptLog: Sendable, Hashable, Codable {
    package var statuses: [String: Int] = [:]
    package var serverDates: [ServerDate] = []

    enum CodingKeys: String, CodingKey {
        case statuses
    }

    package init() {}

    /// Notes an answer's `Date` header (if it had one) and the true times its request left and its
    /// answer came back.
    package mutating func note(date header: String?, sentAt: Int64, answeredAt: Int64) {
        if let header { serverDates.append(ServerDate(sentAt: sentAt, answeredAt: answeredAt, header: header)) }
    }

    package mutating func count(_ result: DeliveryResult) {
        switch result {
        case .response(let status, _, _): statuses[String(status), default: 0] += 1
        case .timeout: statuses["timeout", default: 0] += 1
        case .transportError(let reason):
            let label = reason.hasPrefix("not the gateway") ? "captive_portal" : (reason == "offline" ? "offline" : "transport_error")
            statuses[label, default: 0] += 1
        }
    }

    package mutating func merge(_ other: AttemptLog) {
        for (k, v) in other.statuses { statuses[k, default: 0] += v }
        serverDates += other.serverDates
    }
}

/// How long the app waits for an answer.
package enum DeliveryTimeouts {
    /// The launch request (`GET /v1/attendance/pending`) tells the server's clock, which the outbox's
    /// entries stamped with the phone's clock wait for (the drainer holds them), so it waits 20 s where
    /// an event's request waits 4: a phone on a slow network learns the clock at its first answer instead
    /// of holding its events until the network is better. Under `ServerClock.maxRoundTripMs`.
    package static let launchRequestMs: Int64 = 20_000
}

/// Sends a device's outbox at a moment when the app runs. Implementations: `InProcessDelivery`
/// (virtual time, an in-process server) and the runtime's HTTP client against the real gateway.
package protocol DeliveryDriver: Sendable {
    /// Drains `outbox` starting at true virtual time `now`, until it is empty or `budgetMs` ends.
    func drain(
        outbox: Outbox, device: DeviceIdentity, profile: PhoneProfile, at now: Int64, budgetMs: Int64?,
        random: inout SimulationRandom, attempts: inout AttemptLog
    ) async throws -> [DeliveryRecord]

    /// Uploads the app's pending telemetry at true virtual time `now` through the phone's network
    /// (`finalSync`: the end-of-run sync, on a working network); returns how many of `records`, from
    /// the first, the server took (0: keep them all for the next upload).
    func uploadTelemetry(
        _ records: [TelemetryRecord], device: DeviceIdentity, siteId: String, profile: PhoneProfile, at now: Int64, finalSync: Bool
    ) async -> Int

    /// The app's request at launch (`GET /v1/attendance/pending`, what it shows the user) at true virtual
    /// time `now` through the phone's network; notes its answer's `Date` header in `answers`.
    func launchRequest(device: DeviceIdentity, profile: PhoneProfile, at now: Int64, answers: inout AttemptLog) async

    /// The device's configuration asked for again at true virtual time `now` (a background wake)
    /// through the phone's network: a new site directory when it changed since the one the phone holds,
    /// nil when it did not or could not be asked (offline, no registry in detection-only runs).
    func refreshedDirectory(device: DeviceIdentity, profile: PhoneProfile, at now: Int64) async -> SiteDirectory?
}

extension DeliveryDriver {
    /// No registry to ask: the phone keeps the directory it has.
    package func refreshedDirectory(device: DeviceIdentity, profile: PhoneProfile, at now: Int64) async -> SiteDirectory? {
        nil
    }
}

/// The server side for detection-only runs and scenario tests: refuses an event time outside the
/// gateway's window (400; 425 with the wait when it is at most a day ahead), dedupes by idempotency key like the gateway and the merger (first 201, a
/// repeat 200, the same key with another payload 422), and dates every answer.
package final class InProcessServer: Sendable {
    package struct Stored: Sendable, Hashable {
        package var key: String
        package var event: PresenceKit.AttendanceEvent
        package var receivedAt: Int64
        package var payloadHash: Int
        package var copiesReceived: Int
    }

    private let stored = Mutex<[String: Stored]>([:])
    private let telemetryIds = Mutex<Set<String>>([])
    let limits = ValidationLimits()

    package init() {}

    package func receive(_ payload: [UInt8], at now: Int64) -> TransportAnswer {
        let date = Self.date(at: now)
        guard let event = try? PresenceCoding.decodeEvent(payload) else {
            return TransportAnswer(status: 400, contentType: "application/problem+json", problemType: "validation").dated(date)
        }
        let window = limits.eventTimes(around: Date(timeIntervalSince1970: Double(now) / 1000))
        let eventTime = Date(timeIntervalSince1970: Double(event.timestamp.millisecondsSinceEpoch) / 1000)
        guard window.contains(eventTime) else {
            // Ahead by at most a day: 425 with the wait, as the gateway answers (it is taken later).
            let ahead = eventTime.timeIntervalSince(window.upperBound)
            if ahead > 0 && ahead <= Double(limits.maxEarlyWait.components.seconds) {
                return TransportAnswer(
                    status: 425, contentType: "application/problem+json", problemType: "urn:problem:attendance:too-early",
                    retryAfterMs: Int64(ahead.rounded(.up)) * 1000
                ).dated(date)
            }
            return TransportAnswer(status: 400, contentType: "application/problem+json", problemType: "validation").dated(date)
        }
        let hash = payload.hashValue
        return stored.withLock { table in
            let key = event.idempotencyKey.hex
            if var existing = table[key] {
                existing.copiesReceived += 1
                table[key] = existing
                return TransportAnswer(status: existing.payloadHash == hash ? 200 : 422, contentType: "application/json").dated(date)
            }
            table[key] = Stored(key: key, event: event, receivedAt: now, payloadHash: hash, copiesReceived: 1)
            return TransportAnswer(status: 201, contentType: "application/json").dated(date)
        }
    }

    /// The `Date` header of an answer written at true time `now`.
    package static func date(at now: Int64) -> String { Timestamp(millisecondsSinceEpoch: now).httpDate }

    /// Takes a telemetry upload (each record counted once by its id, as the aggregator does).
    package func receiveTelemetry(_ records: [TelemetryRecord], deviceId: String) {
        telemetryIds.withLock { ids in
            for record in records { ids.insert(deviceId + "/" + record.eventId) }
        }
    }

    /// Distinct telemetry records received.
    package var telemetryCount: Int { telemetryIds.withLock { $0.count } }

    /// When the server first received the event with this key (hex), as the SLO counts it.
    package func firstReceipt(ofKey key: String) -> Int64? { stored.withLock { $0[key]?.receivedAt } }

    package var events: [Stored] { stored.withLock { Array($0.values) } }
    package var count: Int { stored.withLock { $0.count } }
}

/// Delivery in virtual time to an `InProcessServer` through the phone's simulated network: latency,
/// offline periods, captive portals, request timeouts (the server may have stored an event whose
/// answer the phone never got: the retry with the same key must come back 200, not a second row).
package struct InProcessDelivery: DeliveryDriver {
    package let server: InProcessServer
    /// The app's request timeout (short, 2-4 s).
    package var requestTimeoutMs: Int64 = 4_000
    /// The launch request's: it tells the server's clock, which the entries stamped with the phone's
    /// wait for, so it waits longer (`DeliveryTimeouts.launchRequestMs`).
    package var launchRequestTimeoutMs: Int64 = DeliveryTimeouts.launchRequestMs

    package init(server: InProcessServer) { self.server = server }

    package func drain(
        outbox: Outbox, device: DeviceIdentity, profile: PhoneProfile, at now: Int64, budgetMs: Int64?,
        random: inout SimulationRandom, attempts: inout AttemptLog
    ) async throws -> [DeliveryRecord] {
        let clock = ManualClock(Timestamp(millisecondsSinceEpoch: now))
        let drainer = OutboxDrainer(outbox: outbox, clock: clock, sleep: { ms in clock.advance(by: ms) })
        var kinds: [UInt64: (String, String)] = [:]
        var times: [UInt64: Int64] = [:]
        var answered: [UInt64: (at: Int64, attempts: Int)] = [:]
        var reached: [UInt64: Int64] = [:]
        var log = AttemptLog()
        let server = self.server
        let timeout = requestTimeoutMs
        let report = try await drainer.drain(
            deadline: budgetMs.map { Timestamp(millisecondsSinceEpoch: now + $0) }, random: &random.generator
        ) { entry, payload in
            let t = clock.now().millisecondsSinceEpoch
            if let event = try? PresenceCoding.decodeEvent(payload) {
                kinds[entry.id] = (event.idempotencyKey.hex, event.type.rawValue)
                times[entry.id] = event.timestamp.millisecondsSinceEpoch
            }
            let result: DeliveryResult
            switch profile.network(at: t) {
            case .offline:
                clock.advance(by: 1_000)
                result = .transportError("offline")
            case .captivePortal:
                clock.advance(by: 300)
                result = ContractReading.deliveryResult(TransportAnswer(status: 200, contentType: "text/html; charset=utf-8"))
            case .online(let latency):
                let answer = server.receive(payload, at: t + Int64(latency) / 2)
                if reached[entry.id] == nil { reached[entry.id] = t + Int64(latency) / 2 }
                if Int64(latency) > timeout {
                    clock.advance(by: timeout)
                    result = .timeout
                } else {
                    clock.advance(by: Int64(latency))
                    result = ContractReading.deliveryResult(answer)
                    log.note(date: answer.date, sentAt: t, answeredAt: t + Int64(latency))
                }
            }
            log.count(result)
            answered[entry.id] = (clock.now().millisecondsSinceEpoch, (answered[entry.id]?.attempts ?? 0) + 1)
            return result
        }
        attempts.merge(log)
        var records: [DeliveryRecord] = []
        for delivered in report.delivered {
            let (key, kind) = kinds[delivered.id] ?? ("?", "?")
            let answer = answered[delivered.id] ?? (clock.now().millisecondsSinceEpoch, 1)
            // The server's first receipt, which an earlier drain's attempt may have made (its answer
            // lost to a timeout), else when this drain's reached it.
            records.append(
                DeliveryRecord(
                    key: key, kind: kind, status: delivered.status, attempts: answer.attempts, verdictAt: answer.at,
                    reachedServerAt: server.firstReceipt(ofKey: key) ?? reached[delivered.id], timestamp: times[delivered.id]))
        }
        return records
    }

    package func uploadTelemetry(
        _ records: [TelemetryRecord], device: DeviceIdentity, siteId: String, profile: PhoneProfile, at now: Int64, finalSync: Bool
    ) async -> Int {
        let reachable: Bool =
            if finalSync {
                true
            } else if case .online(let latency) = profile.network(at: now) {
                Int64(latency) <= requestTimeoutMs
            } else {
                false
            }
        guard reachable else { return 0 }
        server.receiveTelemetry(records, deviceId: device.deviceId)
        return records.count
    }

    package func launchRequest(device: DeviceIdentity, profile: PhoneProfile, at now: Int64, answers: inout AttemptLog) async {
        guard case .online(let latency) = profile.network(at: now), Int64(latency) <= launchRequestTimeoutMs else { return }
        answers.note(date: InProcessServer.date(at: now + Int64(latency) / 2), sentAt: now, answeredAt: now + Int64(latency))
    }
}
