import AccessControl
import AsyncHTTPClient
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import LocalStackTesting
import Logging
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import PostgresNIO
import RegistryTestFixtures
import ServiceRuntime
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The pipeline's integration tests on the real local stack with the registry, policy service, merger
/// and gateway running as processes (`deploy/local/services.sh`, debug binaries built by
/// `swift build --build-tests`). `deploy/local/test.sh` runs this target in a process of its own,
/// after the other targets (beside only the fleet simulator's, which use no stack), so no other test
/// shares the merger's tables or the broker with the running services.
@Suite("Pipeline end to end: services as processes", .serialized, .timeLimit(.minutes(10)))
struct PipelineEndToEndTests {
    @Test func anEventSentThreeTimesConcurrentlyIsOneRowWithOneReceipt() async throws {
        let p = try await RunningPipeline.shared()
        let device = try await p.enroll()
        let event = p.event(device: device, type: .checkin, at: Date().addingTimeInterval(-30))
        let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
            for _ in 0..<3 { group.addTask { try await p.sendUntilFinal(event, device: device) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { [201, 200].contains($0.status) }, "\(answers)")
        #expect(answers.filter { $0.status == 201 }.count <= 1)
        #expect(Set(answers.compactMap(\.receipt)).count == 1, "one receipt for all three: \(answers)")
        #expect(try await p.rows(key: event.idempotencyKey) == 1)
        // A later repeat is replayed with the same receipt.
        let again = try await p.sendUntilFinal(event, device: device)
        #expect(again.status == 200 && again.replayed && again.receipt == answers.first?.receipt)
    }

    @Test func outOfOrderAnd72HourLateEventsLandInTheirSession() async throws {
        let p = try await RunningPipeline.shared()
        let device = try await p.enroll()
        let t0 = Date().addingTimeInterval(-72 * 3_600)
        // Sent newest first, as a phone back from 72 hours offline might (its outbox order is lost here on purpose).
        let checkOut = p.event(device: device, type: .checkout, at: t0.addingTimeInterval(8 * 3_600), offline: true)
        let heartbeat = p.event(device: device, type: .heartbeat, at: t0.addingTimeInterval(4 * 3_600), offline: true)
        let checkIn = p.event(device: device, type: .checkin, at: t0, offline: true)
        for event in [checkOut, heartbeat, checkIn] {
            let answer = try await p.sendUntilFinal(event, device: device)
            #expect([201, 200].contains(answer.status), "\(event.type): \(answer)")
        }
        let sessions = try await p.sessions(userId: device.userId)
        #expect(sessions.count == 1, "\(sessions)")
        let session = try #require(sessions.first)
        #expect(abs(session.checkIn.timeIntervalSince(t0)) < 0.001)
        #expect(session.checkOut.map { abs($0.timeIntervalSince(t0.addingTimeInterval(8 * 3_600))) < 0.001 } == true)
        #expect(session.status == "closed")
        #expect(try await p.sessionIds(keys: [checkOut, heartbeat, checkIn].map(\.idempotencyKey)) == [session.id])
    }

    @Test func presenceWithinTheGraceAfterACheckOutReopensTheSameSession() async throws {
        let p = try await RunningPipeline.shared()
        let device = try await p.enroll()
        let t0 = Date().addingTimeInterval(-3_600)
        let events = [
            p.event(device: device, type: .checkin, at: t0),
            p.event(device: device, type: .checkout, at: t0.addingTimeInterval(20 * 60)),
            p.event(device: device, type: .checkin, at: t0.addingTimeInterval(22 * 60)),
        ]
        for event in events {
            let answer = try await p.sendUntilFinal(event, device: device)
            #expect(answer.status == 201, "\(event.type): \(answer)")
        }
        let sessions = try await p.sessions(userId: device.userId)
        #expect(sessions.count == 1, "a check-out followed by presence within the grace is one session: \(sessions)")
        #expect(sessions.first?.status == "open")
        #expect(try await p.sessionIds(keys: events.map(\.idempotencyKey)).count == 1)
    }

    @Test func badInputIsRefusedWithAProblemAndNothingIsRecorded() async throws {
        let p = try await RunningPipeline.shared()
        let device = try await p.enroll()
        var keys: [String] = []
        func fresh() -> AttendanceEvent {
            let event = p.event(device: device, type: .heartbeat, at: Date().addingTimeInterval(-5))
            keys.append(event.idempotencyKey)
            return event
        }
        let good = try ProtocolCodec.wire.encode(fresh())
        // No token: 401. Wrong device id: 403. No key: 400.
        #expect(try await p.post(good, device: device, key: keys[0], token: nil).status == 401)
        #expect(try await p.post(good, device: device, key: keys[0], deviceId: "someone-else").status == 403)
        let noKey = try await p.post(good, device: device, key: nil)
        #expect(noKey.status == 400 && noKey.problemType?.contains("idempotency") == true, "\(noKey)")
        // RSSI out of range: 400 naming the field.
        var loud = fresh()
        loud.rssiSeries = [-70, 12]
        let rssi = try await p.post(try ProtocolCodec.wire.encode(loud), device: device, key: loud.idempotencyKey)
        #expect(rssi.status == 400 && rssi.fields.contains { $0.hasPrefix("rssiSeries") }, "\(rssi)")
        // A timestamp from two weeks ago: 400 naming it.
        var old = fresh()
        old.timestamp = Date().addingTimeInterval(-14 * 86_400)
        let stale = try await p.post(try ProtocolCodec.wire.encode(old), device: device, key: old.idempotencyKey)
        #expect(stale.status == 400 && stale.fields.contains("timestamp"), "\(stale)")
        // Over 64 KiB: 413. Not JSON: 400.
        let huge = Array(repeating: UInt8(ascii: " "), count: 70 * 1_024) + good
        #expect(try await p.post(huge, device: device, key: keys[0]).status == 413)
        #expect(try await p.post(Array("{\"id\": ".utf8), device: device, key: keys[0]).status == 400)

        // The same key with another payload after the first was recorded: 422.
        let first = p.event(device: device, type: .heartbeat, at: Date().addingTimeInterval(-3))
        #expect(try await p.sendUntilFinal(first, device: device).status == 201)
        // Recorded after everything above (the same user's partition, read in order): a refused request
        // that had reached Kafka would be in PostgreSQL by now.
        #expect(try await p.rows(keys: keys) == 0, "nothing refused reached PostgreSQL")
        var changed = first
        changed.rssiSeries = [-60, -61, -62, -63]
        let mismatch = try await p.post(try ProtocolCodec.wire.encode(changed), device: device, key: first.idempotencyKey)
        #expect(mismatch.status == 422, "\(mismatch)")
        #expect(try await p.rows(key: first.idempotencyKey) == 1)
    }

    /// The local stack's broker keeps everything in memory: a restart forgets every topic, group,
    /// offset and producer id. Each service sees it (its topics gone, the registry feed's end moved
    /// back), says so in one log line and exits; its supervisor (services.sh) starts it afresh, with
    /// no hand on the keyboard. A device enrolled before is then still accepted: the registry refills
    /// its feed topic from the outbox, from which every reader rebuilds its registry cache.
    @Test func aBrokerRestartHealsWithoutAHandOnTheKeyboard() async throws {
        let p = try await RunningPipeline.shared()
        let device = try await p.enroll()
        let before = p.event(device: device, type: .checkin, at: Date().addingTimeInterval(-120))
        let first = try await p.sendUntilFinal(before, device: device)
        #expect([201, 200].contains(first.status), "\(first)")

        let running = try RunningPipeline.servicePids()
        try #require(running.count == 5, "\(running)")
        // Only what the services log from now on counts (the logs keep earlier runs).
        var logStart: [String: Int] = [:]
        for name in running.keys { logStart[name] = try RunningPipeline.log(of: name).utf8.count }
        try await LocalStack.runScript("deploy/local/stack.sh", "restart-broker")
        let deadline = ContinuousClock.now + .seconds(90)
        var replaced: [String: pid_t] = [:]
        while ContinuousClock.now < deadline {
            replaced = try RunningPipeline.servicePids().filter { name, pid in running[name].map { $0 != pid } ?? false }
            if replaced.count == running.count { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(
            Set(replaced.keys) == Set(running.keys), "replaced by their supervisors: \(replaced.keys.sorted()) of \(running.keys.sorted())")
        for name in running.keys.sorted() {
            let log = String(decoding: try RunningPipeline.log(of: name).utf8.dropFirst(logStart[name] ?? 0), as: UTF8.self)
            #expect(log.contains("broker state lost"), "\(name) did not say why it exited")
            #expect(log.contains("exited with status 75"), "\(name) did not exit with 75")
        }

        try await LocalStack.runScript("deploy/local/services.sh", "wait-ready")
        let after = p.event(device: device, type: .heartbeat, at: Date().addingTimeInterval(-60))
        let second = try await p.sendUntilFinal(after, device: device)
        #expect([201, 200].contains(second.status), "the device enrolled before the restart: \(second)")
        #expect(try await p.rows(keys: [before.idempotencyKey, after.idempotencyKey]) == 2)
    }
}

// MARK: - Harness

struct Answer: Sendable, CustomStringConvertible {
    var status: Int
    var receipt: String?
    var sessionId: String?
    var replayed: Bool
    var problemType: String?
    var fields: [String]
    var description: String { "\(status) receipt=\(receipt ?? "-") type=\(problemType ?? "-") fields=\(fields)" }
}

struct EnrolledDevice: Sendable {
    let userId: String
    let deviceId: String
    let token: String
}

/// The four services started once per test process, a site with a beacon, and a way to enroll devices.
actor RunningPipeline {
    static let logger = LocalStack.logger(label: "pipeline-e2e")
    private static let instance = Task { try await RunningPipeline.start() }

    static func shared() async throws -> RunningPipeline { try await instance.value }

    let http: HTTPClient
    let postgres: PostgresClient
    let repository: PostgresRegistryRepository
    let siteId: String
    let beacon: BeaconIdentity
    let gateway = "http://127.0.0.1:\(ProcessInfo.processInfo.environment["GATEWAY_PORT"] ?? "8080")"

    private init(http: HTTPClient, postgres: PostgresClient, repository: PostgresRegistryRepository, siteId: String, beacon: BeaconIdentity)
    {
        self.http = http
        self.postgres = postgres
        self.repository = repository
        self.siteId = siteId
        self.beacon = beacon
    }

    private static func start() async throws -> RunningPipeline {
        try LocalStack.ensureStarted()
        try await LocalStack.runScript("deploy/local/services.sh", "start")
        let keys = try String(contentsOf: LocalStack.runDirectory.appendingPathComponent("secrets/device-token-keys"), encoding: .utf8)
        let signer = try DeviceTokenSigner.load(
            from: EnvironmentReader(["DEVICE_TOKEN_KEYS": keys.trimmingCharacters(in: .whitespacesAndNewlines)]))
        var settings = try LocalStack.postgres
        settings.searchPath = try RegistrySchema.searchPath(from: EnvironmentReader())
        let postgres = settings.makeClient(logger: logger)
        // The pool lives as long as the test process.
        Task.detached { await postgres.run() }
        let repository = PostgresRegistryRepository(client: postgres, logger: logger, tokenSigner: signer)
        let place = try await BeaconedSite.make(
            repository, name: "E2E \(LocalStack.uniqueName("e2e"))", serialPrefix: "E2E", advIntervalMs: 700)
        return RunningPipeline(
            http: HTTPClient(eventLoopGroupProvider: .singleton), postgres: postgres, repository: repository, siteId: place.site.id,
            beacon: place.identity
        )
    }

    nonisolated static let servicesDirectory = LocalStack.runDirectory.appendingPathComponent("services")

    /// A service's log (its supervisor's lines included).
    nonisolated static func log(of name: String) throws -> String {
        try String(contentsOf: servicesDirectory.appendingPathComponent("\(name).log"), encoding: .utf8)
    }

    /// The pids of the running services (not their supervisors), from `deploy/local/services.sh`'s pid files.
    nonisolated static func servicePids() throws -> [String: pid_t] {
        let directory = servicesDirectory
        var pids: [String: pid_t] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path)
        where file.hasSuffix(".pid") && !file.hasSuffix(".supervisor.pid") {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            if let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), kill(pid, 0) == 0 {
                pids[String(file.dropLast(4))] = pid
            }
        }
        return pids
    }

    /// A new user with an enrolled device, published to the gateway's and the policy's caches.
    func enroll() async throws -> EnrolledDevice {
        let (user, credentials) = try await repository.enrolledUser(name: "E2E user", siteIds: [siteId])
        // The running registry publishes its outbox; wait until it did, and a little for the caches.
        _ = try await RegistryChangePublisher.waitUntilPublished(
            client: postgres, logger: Self.logger, timeout: .seconds(60), interval: .milliseconds(100))
        try await Task.sleep(for: .seconds(2))
        return EnrolledDevice(userId: user.id, deviceId: credentials.device.id, token: credentials.token)
    }

    nonisolated func event(device: EnrolledDevice, type: AttendanceEventType, at time: Date, offline: Bool = false) -> AttendanceEvent {
        AttendanceEvent(
            id: UUID().uuidString, idempotencyKey: newKey(), userId: device.userId, deviceId: device.deviceId,
            timestamp: time, type: type, siteId: siteId, beacon: beacon, rssiSeries: [-75, -71, -68, -66, -70], txPower: -59,
            motion: .init(state: .walking, steps2min: 42), geofence: .init(inside: true, radius: 200), handshake: nil,
            network: .init(online: !offline, latencyMs: 40), app: .init(version: "1.12.0", build: 345),
            device: .init(model: "Pixel 8", os: "Android 15"), sessionKey: "e2e-\(device.deviceId)", tEnd: nil,
            queuedOffline: offline ? true : nil, location: .init(lat: 10.7772, lon: 106.7012, accuracyM: 15),
            attestation: .init(jailbroken: false, simulatedLocation: false)
        )
    }

    /// One POST; `token: nil` sends none.
    func post(
        _ body: [UInt8], device: EnrolledDevice, key: String?, token: String?? = .some(nil), deviceId: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: gateway + "/v1/attendance/events")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        let bearer: String? =
            switch token {
            case .some(.none): device.token;
            case .some(.some(let t)): t;
            case .none: nil
            }
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        request.headers.add(name: "X-Device-Id", value: deviceId ?? device.deviceId)
        request.headers.add(name: "X-App-Version", value: "1.12.0")
        if let key { request.headers.add(name: "Idempotency-Key", value: key) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await http.execute(request, timeout: .seconds(15))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: bytes))) as? [String: Any] ?? [:]
        let fields = (json["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
        return Answer(
            status: Int(response.status.code), receipt: json["serverReceiptId"] as? String, sessionId: json["sessionId"] as? String,
            replayed: response.headers.first(name: "Idempotent-Replayed") == "true", problemType: json["type"] as? String, fields: fields
        )
    }

    /// Sends like the app: the same key until a final answer (202, 5xx and an in-flight 409 are retried).
    func sendUntilFinal(_ event: AttendanceEvent, device: EnrolledDevice) async throws -> Answer {
        let body = try ProtocolCodec.wire.encode(event)
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            let answer = try await post(body, device: device, key: event.idempotencyKey)
            let inFlight = answer.status == 409 && answer.problemType?.contains("in-flight") == true
            if [200, 201, 400, 409, 422].contains(answer.status) && !inFlight { return answer }
            guard ContinuousClock.now < deadline else { return answer }
            try await Task.sleep(for: .milliseconds(inFlight ? 200 : 500))
        }
    }

    func rows(key: String) async throws -> Int { try await rows(keys: [key]) }

    func rows(keys: [String]) async throws -> Int {
        let rows = try await postgres.query(
            "SELECT count(*)::int FROM merger.events WHERE idempotency_key = ANY(\(keys))", logger: Self.logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    struct StoredSession: Sendable, CustomStringConvertible {
        var id: String
        var status: String
        var checkIn: Date
        var checkOut: Date?
        var description: String { "\(id) \(status) \(checkIn) \(checkOut.map { "\($0)" } ?? "-")" }
    }

    /// The user's sessions, superseded ones left out.
    func sessions(userId: String) async throws -> [StoredSession] {
        let rows = try await postgres.query(
            """
            SELECT session_id, status, check_in_at, check_out_at FROM merger.sessions
            WHERE user_id = \(userId) AND coalesce(close_reason, '') <> 'superseded' ORDER BY check_in_at
            """, logger: Self.logger
        )
        var sessions: [StoredSession] = []
        for try await (id, status, checkIn, checkOut) in rows.decode((String, String, Date, Date?).self) {
            sessions.append(StoredSession(id: id, status: status, checkIn: checkIn, checkOut: checkOut))
        }
        return sessions
    }

    func sessionIds(keys: [String]) async throws -> Set<String> {
        let rows = try await postgres.query(
            "SELECT session_id FROM merger.events WHERE idempotency_key = ANY(\(keys))", logger: Self.logger)
        var ids: Set<String> = []
        for try await id in rows.decode(String?.self) { if let id { ids.insert(id) } }
        return ids
    }
}
