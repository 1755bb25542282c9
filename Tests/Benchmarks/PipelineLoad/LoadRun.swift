import AsyncHTTPClient
import AttendanceProtocol
import Foundation
import Logging
import PostgresNIO
import ServiceRuntime
import Synchronization

/// A steady load of keyed events from enrolled devices, each sent under the no-loss contract, then
/// the proof: PostgreSQL holds exactly the set of events the clients sent, and each device's
/// accepted events make one session.
struct LoadRun {
    struct Options: Sendable {
        var gateways: [String]
        var devices: Int
        var rate: Double
        var duration: Duration
        var drainTimeout: Duration
        var requestTimeout: Duration
    }

    struct Report: Codable {
        var sent = 0
        var finalStatuses: [String: Int] = [:]
        var retriedAttempts = 0
        var retriedStatuses: [String: Int] = [:]
        var unfinished = 0
        var inDatabase = 0
        var lost = 0
        var unexpected = 0
        var outcomeMismatches = 0
        /// Final answers other than 201 and 200: the load's devices are honest and send each event's
        /// bytes unchanged, so a refusal (409), a mismatch (422) or a 400 is an event lost (must be 0).
        var notAccepted = 0
        var duplicatedReceipts = 0
        /// Events sent under a key an earlier event of the run already had (must be 0: the table keys
        /// events by idempotency key, so a second event under one key would vanish into the first).
        var sentTwice = 0
        var acceptedPerSecond = 0.0
        var latencyMs: [String: Double] = [:]
        var wallSeconds = 0.0
        /// Per gateway: its devices' events, the final answers it gave, and how many of its own
        /// devices' events it answered 201 on the first attempt (its verdict came back to it).
        var gateways: [String: GatewayFigures] = [:]
        /// Users whose accepted events are not all in one live session (or who have several).
        var sessionMismatches = 0
        var usersChecked = 0
    }

    struct GatewayFigures: Codable {
        var devicesHomed = 0
        var eventsAsked = 0
        var finalAnswers = 0
        var acceptedOnFirstAttempt = 0
    }

    /// The merger's schema, as the merger reads it (`MERGER_SCHEMA`, default `merger`); an unusable
    /// name ends the run with the variable named.
    static var mergerSchema: String {
        get throws { try EnvironmentReader().schemaName("MERGER_SCHEMA", default: "merger") }
    }

    let options: Options
    let fleet: LoadFleet
    let client: ContractClient
    let postgres: PostgresClient
    let logger: Logger

    func run() async throws -> Report {
        let outcomes = OutcomeLog()
        let start = ContinuousClock.now
        let stopSending = start + options.duration
        let perDeviceInterval = Double(options.devices) / options.rate
        // Every device sends its own sequence at rate/devices, each event in its own task so a
        // retried event never holds back the next one (an app's outbox drains in order; the server
        // does not care, and the load stays steady while a service is down).
        await withTaskGroup(of: Void.self) { group in
            for (index, device) in fleet.devices.enumerated() {
                group.addTask {
                    await withTaskGroup(of: Void.self) { sends in
                        var sequence = 0
                        var next = start + .seconds(perDeviceInterval * Double(index) / Double(fleet.devices.count))
                        while next < stopSending {
                            try? await Task.sleep(until: next)
                            let event = ContractClient.event(fleet: fleet, device: device, sequence: sequence, at: Date())
                            sends.addTask {
                                let outcome = await client.send(
                                    event, device: device, home: index, stopRetryingAfter: stopSending + options.drainTimeout)
                                outcomes.append(outcome)
                            }
                            sequence += 1
                            next = next + .seconds(perDeviceInterval)
                        }
                    }
                }
            }
        }
        let wall = ContinuousClock.now - start
        return try await verify(outcomes.all, wall: wall)
    }

    private func verify(_ outcomes: [ContractClient.Outcome], wall: Duration) async throws -> Report {
        var report = Report()
        report.sent = outcomes.count
        report.wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        let finalSet: Set<Int> = [200, 201, 400, 409, 422]
        var sentByKey: [String: Int] = [:]
        for outcome in outcomes {
            sentByKey[outcome.key] = outcome.status
            report.finalStatuses[String(outcome.status), default: 0] += 1
            report.retriedAttempts += outcome.retried.count
            for status in outcome.retried { report.retriedStatuses[String(status), default: 0] += 1 }
            if !finalSet.contains(outcome.status) {
                report.unfinished += 1
            } else if outcome.status != 201 && outcome.status != 200 {
                report.notAccepted += 1
            }
        }
        report.sentTwice = outcomes.count - sentByKey.count
        let latencies = outcomes.filter { finalSet.contains($0.status) }.map { $0.latency }.sorted()
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)] where !latencies.isEmpty {
            let d = latencies[min(latencies.count - 1, Int(Double(latencies.count - 1) * q))]
            report.latencyMs[name] = (Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15).rounded(toPlaces: 1)
        }

        let users = fleet.devices.map(\.userId)
        let rows = try await postgres.query(
            "SELECT idempotency_key, outcome, server_receipt_id FROM \(unescaped: try Self.mergerSchema).events WHERE user_id = ANY(\(users))",
            logger: logger
        )
        var stored: [String: String] = [:]
        var receipts: Set<String> = []
        for try await (key, outcome, receipt) in rows.decode((String, String, String).self) {
            stored[key] = outcome
            if !receipts.insert(receipt).inserted { report.duplicatedReceipts += 1 }
        }
        report.inDatabase = stored.count
        report.lost = sentByKey.keys.filter { stored[$0] == nil }.count
        report.unexpected = stored.keys.filter { sentByKey[$0] == nil }.count
        for (key, status) in sentByKey {
            guard let outcome = stored[key] else { continue }
            if (status == 201 || status == 200) && outcome != "accepted" { report.outcomeMismatches += 1 }
            if status == 409 && outcome != "rejected" { report.outcomeMismatches += 1 }
        }
        let accepted = stored.values.filter { $0 == "accepted" }.count
        report.acceptedPerSecond = (Double(accepted) / max(report.wallSeconds, 0.001)).rounded(toPlaces: 1)

        for (index, gateway) in options.gateways.enumerated() {
            var figures = GatewayFigures()
            figures.devicesHomed = fleet.devices.indices.filter { $0 % options.gateways.count == index }.count
            for outcome in outcomes {
                if outcome.home == index { figures.eventsAsked += 1 }
                if outcome.answeredBy == index { figures.finalAnswers += 1 }
                if outcome.home == index && outcome.attempts == 1 && outcome.status == 201 { figures.acceptedOnFirstAttempt += 1 }
            }
            report.gateways[gateway] = figures
        }
        try await checkSessions(users: users, into: &report)
        return report
    }

    /// Every device sends one check-in and then heartbeats with one session key: each user must have
    /// exactly one live session, holding every accepted event of that user.
    private func checkSessions(users: [String], into report: inout Report) async throws {
        var acceptedByUser: [String: Int] = [:]
        let accepted = try await postgres.query(
            "SELECT user_id, count(*)::int FROM \(unescaped: try Self.mergerSchema).events WHERE user_id = ANY(\(users)) AND outcome = 'accepted' GROUP BY user_id",
            logger: logger)
        for try await (user, count) in accepted.decode((String, Int).self) { acceptedByUser[user] = count }
        var sessionsByUser: [String: [Int]] = [:]
        let sessions = try await postgres.query(
            "SELECT user_id, event_count FROM \(unescaped: try Self.mergerSchema).sessions WHERE user_id = ANY(\(users)) AND superseded_by IS NULL",
            logger: logger)
        for try await (user, count) in sessions.decode((String, Int).self) { sessionsByUser[user, default: []].append(count) }
        for user in users {
            let expected = acceptedByUser[user] ?? 0
            report.usersChecked += 1
            let live = sessionsByUser[user] ?? []
            if expected == 0 ? !live.isEmpty : live != [expected] {
                report.sessionMismatches += 1
                logger.warning(
                    "sessions differ from the accepted events",
                    metadata: [
                        "user": .string(user), "accepted": "\(expected)", "sessionEventCounts": .string("\(live)"),
                    ])
            }
        }
    }
}

/// Outcomes collected from many tasks.
final class OutcomeLog: Sendable {
    private let outcomes = Mutex<[ContractClient.Outcome]>([])
    func append(_ outcome: ContractClient.Outcome) { outcomes.withLock { $0.append(outcome) } }
    var all: [ContractClient.Outcome] { outcomes.withLock { $0 } }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        let factor = Foundation.pow(10, Double(places))
        return (self * factor).rounded() / factor
    }
}
