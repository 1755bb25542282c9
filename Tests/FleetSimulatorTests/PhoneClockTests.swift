import Foundation
import PresenceKit
import Testing

@testable import FleetSimulatorCore

/// The in-process server judges event times like the gateway, and phones stamp with the server's clock.
@Suite("Phone clocks")
struct PhoneClockTests {
    static let outboxes = ScratchDirectory.fast("fleet-phone-clock-tests")

    static let now: Int64 = 1_767_600_000_123

    static func payload(timestamp: Int64) throws -> [UInt8] {
        var agent = PresenceAgent(
            machine: try PresenceStateMachine(
                config: PresenceConfig(),
                directory: SiteDirectory(sites: [
                    Site(
                        id: "S", center: GeoPoint(latitude: 0, longitude: 0),
                        beacons: [BeaconMatcher("f7826da6-4fa2-4e98-8024-bc5b71e0893e")])
                ]),
                identity: DeviceIdentity(userId: "u", deviceId: "d"), seed: 7, clockOffsetMs: timestamp - now))
        let at = Timestamp(millisecondsSinceEpoch: now)
        _ = agent.handle(.geofenceEntered(siteId: "S"), at: at)
        _ = agent.handle(.motionActivity(.walking), at: at)
        for second in Int64(1)...30 {
            for effect in agent.handle(
                .beaconReading(
                    BeaconReading(beacon: BeaconIdentity("f7826da6-4fa2-4e98-8024-bc5b71e0893e", major: 1, minor: 1), rssi: -55)),
                at: at + second * 1_000)
            {
                if case .postCheckIn(let event) = effect { return PresenceCoding.encode(event) }
            }
        }
        Issue.record("no check-in")
        return []
    }

    @Test(
        "an event more than 5 minutes ahead of the server is taken later (425 with the wait, up to a day), a week behind or a day ahead is refused; every answer is dated"
    )
    func window() throws {
        let server = InProcessServer()
        let cases: [(Int64, Int)] = [
            (-8 * 86_400_000, 400), (-6 * 86_400_000, 201), (4 * 60_000, 201), (6 * 60_000, 425), (2 * 86_400_000, 400),
        ]
        for (offset, status) in cases {
            let answer = server.receive(try Self.payload(timestamp: Self.now + offset), at: Self.now)
            #expect(answer.status == status, "event time \(offset) ms from the server's")
            if status == 425 { #expect((60_000...65_000).contains(answer.retryAfterMs ?? 0)) }
            let date = try #require(answer.date.flatMap { Timestamp(httpDate: $0) })
            #expect(date.millisecondsSinceEpoch == Self.now / 1000 * 1000)
        }
        #expect(server.count == 2)
    }

    /// A fresh outbox in a folder of its own, holding one event stamped `now`.
    static func outboxHoldingOneEvent(_ name: String) throws -> Outbox {
        let directory = outboxes + "/\(name)-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let outbox = try Outbox(path: directory + "/outbox.wal")
        _ = try outbox.append(try payload(timestamp: now))
        return outbox
    }

    @Test("a drain notes the Date header of every answer it got")
    func drainNotesDates() async throws {
        let outbox = try Self.outboxHoldingOneEvent("drain")
        defer { outbox.close() }
        var random = SimulationRandom(seed: 1)
        var log = AttemptLog()
        let records = try await InProcessDelivery(server: InProcessServer()).drain(
            outbox: outbox, device: DeviceIdentity(userId: "u", deviceId: "d"), profile: PhoneProfile(latencyMs: 120), at: Self.now,
            budgetMs: nil, random: &random, attempts: &log)
        #expect(records.map(\.status) == [201])
        let date = try #require(log.serverDates.first)
        #expect(log.serverDates.count == 1 && date.answeredAt - date.sentAt == 120)
        #expect(Timestamp(httpDate: date.header)?.millisecondsSinceEpoch == (Self.now + 60) / 1000 * 1000)
    }

    /// A request the server stored but whose answer the phone timed out on: the event reached the
    /// server then, not at the drain hours later that got the answer (the SLO counts first receipts).
    @Test("an event's time at the server is its first receipt, even when an earlier drain got no answer")
    func firstReceiptAcrossDrains() async throws {
        let outbox = try Self.outboxHoldingOneEvent("first-receipt")
        defer { outbox.close() }
        let server = InProcessServer()
        let delivery = InProcessDelivery(server: server)
        var random = SimulationRandom(seed: 1)
        var log = AttemptLog()
        let device = DeviceIdentity(userId: "u", deviceId: "d")
        // 2G: the server stores the event half a request in, the phone gives up before the answer.
        let slow = try await delivery.drain(
            outbox: outbox, device: device, profile: PhoneProfile(latencyMs: 40_000), at: Self.now, budgetMs: 10_000,
            random: &random, attempts: &log)
        #expect(slow.isEmpty && server.count == 1)
        let later = Self.now + 3_600_000
        let records = try await delivery.drain(
            outbox: outbox, device: device, profile: PhoneProfile(latencyMs: 100), at: later, budgetMs: nil, random: &random,
            attempts: &log)
        #expect(records.map(\.status) == [200])
        #expect(records.first?.reachedServerAt == Self.now + 20_000)
    }

    @Test(
        "a phone an hour fast whose app starts without an answer (offline, or too slow for the request's timeout) learns the server's clock later",
        arguments: [NetworkCondition.offline, .online(latencyMs: 5_000)])
    func noAnswerAtLaunch(_ condition: NetworkCondition) async throws {
        var options = FleetOptions()
        options.devices = 20
        var plan = FleetPlan(options: options)
        for (index, profile) in plan.profiles {
            var phone = profile
            phone.clockSkewMs = 3_600_000
            phone.networkWindows = [NetworkWindow(from: options.start, to: options.start + 6 * 3_600_000, condition: condition)]
            plan.profiles[index] = phone
        }
        let server = InProcessServer()
        let devices = try await DetectionRun(plan: plan, outboxDirectory: Self.outboxes + "/\(condition)").run(server: server)
        let posted = devices.flatMap(\.posted)
        let statuses = devices.flatMap(\.deliveries).map(\.status)
        #expect(!posted.isEmpty && statuses.count == posted.count)
        #expect(statuses.allSatisfy { $0 == 201 })
        // Stamped with the server's clock: within seconds of the (true) moment of decision, not an hour on.
        for event in posted where event.kind == "checkin" {
            #expect(abs(event.timestamp - event.decidedAt) < 5 * 60_000)
        }
    }

    @Test(
        "check-ins decided offline before any answer, on a phone an hour fast or eight days slow, reach the server at the server's time",
        arguments: [Int64(3_600_000), Int64(-8 * 86_400_000)])
    func decidedBeforeAnyAnswer(skewMs: Int64) async throws {
        var options = FleetOptions()
        options.devices = 20
        var plan = FleetPlan(options: options)
        for (index, profile) in plan.profiles {
            var phone = profile
            phone.clockSkewMs = skewMs
            phone.networkWindows = [NetworkWindow(from: options.start, to: options.start + 12 * 3_600_000, condition: .offline)]
            plan.profiles[index] = phone
        }
        let devices = try await DetectionRun(plan: plan, outboxDirectory: Self.outboxes + "/before-any-answer\(skewMs)")
            .run(server: InProcessServer())
        let checkIns = devices.flatMap(\.posted).filter { $0.kind == "checkin" }
        let deliveries = devices.flatMap(\.deliveries)
        try #require(!checkIns.isEmpty)
        #expect(deliveries.count == devices.flatMap(\.posted).count && deliveries.allSatisfy { $0.status == 201 })
        let recorded = Dictionary(deliveries.map { ($0.key, $0.timestamp) }, uniquingKeysWith: { a, _ in a })
        let online = options.start + 12 * 3_600_000
        #expect(checkIns.contains { $0.decidedAt < online })
        for checkIn in checkIns {
            // Decided offline on the phone's clock: stamped with its error, corrected before it was sent.
            if checkIn.decidedAt < online { #expect(abs(checkIn.timestamp - checkIn.decidedAt - skewMs) < 5 * 60_000) }
            let time = try #require(recorded[checkIn.key] ?? nil)
            #expect(abs(time - checkIn.decidedAt) < 5 * 60_000)
        }
    }
}
