import AsyncHTTPClient
import AttendanceProtocol
import Foundation
import Hummingbird
import KafkaClient
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The end-to-end benchmark of the pipeline (release builds, everything on this machine):
/// sustained accepted events/s through gateway → policy → merger → verdict, request latency at
/// half that load, and the two ceilings measured in the same run: a bare Hummingbird endpoint
/// decoding the same JSON, and pgbench inserting the same rows with the merger's batch size; plus
/// the merger alone (vetted events produced straight to its topic) against the pgbench figure.
struct PipelineBench {
    struct Options: Sendable {
        var gateway: String
        var concurrency: Int
        var seconds: Int
        var mergerBatch: Int
        var mergerEvents: Int
        var brokers: String
        var phases: Set<Phase> = Set(Phase.allCases)
        /// The open loop's rate; default half the closed loop's accepted rate.
        var halfRate: Double?
    }

    enum Phase: String, CaseIterable, Sendable {
        case bare, e2e, half, pgbench, merger
    }

    let options: Options
    let fleet: LoadFleet
    let http: HTTPClient
    let postgres: PostgresClient
    let logger: Logger

    func run() async throws {
        let contract = ContractClient(http: http, gateway: options.gateway, requestTimeout: .seconds(10))
        let phases = options.phases
        var bare: BareCeiling?, saturated: LoopResult?, half: Latency?, halfRate: Double?, pgbench: PgbenchCeiling?, merger: StorageRun?
        var saturatedCPU: StackCPU.Usage?

        if phases.contains(.bare) {
            say("ceiling: bare Hummingbird endpoint decoding the event JSON (\(options.concurrency) clients, \(options.seconds) s)…")
            let ceiling = try await bareEndpointCeiling()
            bare = ceiling
            say(
                String(
                    format: "    %.0f requests/s; the endpoint's process %.3f ms of CPU per request", ceiling.requestsPerSecond,
                    ceiling.cpuSecondsPerRequest * 1e3))
        }
        if phases.contains(.e2e) {
            say("end to end, closed loop (\(options.concurrency) clients, \(options.seconds) s)…")
            let (result, cpu) = await StackCPU.measure { await closedLoop(contract: contract, seconds: options.seconds) }
            saturated = result
            saturatedCPU = cpu
            say(
                String(
                    format: "    %.0f accepted events/s (%d accepted, %d other final, %d unfinished)", result.acceptedPerSecond,
                    result.accepted, result.otherFinal, result.unfinished))
            say(
                String(format: "    cores busy %.0f %% of %d; CPU per accepted event: ", cpu.busyShare * 100, cpu.cores)
                    + cpu.perUnit(result.accepted, scale: 1e3, unit: "ms"))
        }
        if phases.contains(.half) {
            let rate = options.halfRate ?? max(1, (saturated?.acceptedPerSecond ?? 200) / 2)
            halfRate = rate
            say(String(format: "end to end at half load (%.0f events/s, open loop, %d s)…", rate, options.seconds))
            let result = await openLoop(contract: contract, rate: rate, seconds: options.seconds)
            half = result
            say(
                String(
                    format: "    latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (%d requests)", result.p50, result.p90, result.p99,
                    result.count))
        }
        if phases.contains(.pgbench) {
            say(
                "ceiling: pgbench, \(options.mergerBatch)-row INSERT … ON CONFLICT DO NOTHING transactions into merger.events, then into an empty copy…"
            )
            pgbench = try await pgbenchCeiling()
        }
        if phases.contains(.merger) {
            // The telemetry aggregator records every verdict the merger produces (a row each): its work
            // and its PostgreSQL's are the pipeline's, not the merger's. Paused meanwhile, it catches up after.
            let telemetry = StackCPU.pids(of: .telemetry)
            say(
                "the merger alone: \(options.mergerEvents) vetted events produced to its topic, until all are rows"
                    + (telemetry.isEmpty ? "…" : " (the telemetry aggregator paused meanwhile)…"))
            for pid in telemetry { kill(pid, SIGSTOP) }
            do {
                await settleDatabase()
                merger = try await mergerAlone()
                for pid in telemetry { kill(pid, SIGCONT) }
            } catch {
                for pid in telemetry { kill(pid, SIGCONT) }
                throw error
            }
            say(
                String(
                    format: "    %.0f rows/s; cores busy %.0f %% of %d; CPU per row: ", merger!.rowsPerSecond, merger!.cpu.busyShare * 100,
                    merger!.cpu.cores)
                    + merger!.cpu.perUnit(merger!.rows, scale: 1e6, unit: "µs"))
        }

        say("")
        say("== pipeline benchmark (\(fleet.devices.count) devices, release build, one machine) ==")
        if let saturated {
            let busy = (saturatedCPU?.busyShare ?? 0) * 100
            say(
                String(
                    format: "end-to-end accepted events/s ........ %8.0f   (target >= 2000; %d clients, cores busy %.0f %%",
                    saturated.acceptedPerSecond, options.concurrency, busy) + (busy < 90 ? ", NOT saturated: raise --concurrency)" : ")"))
            if let bare {
                say(
                    String(
                        format: "  vs bare Hummingbird decode ......... %8.0f req/s   ratio %.2f", bare.requestsPerSecond,
                        saturated.acceptedPerSecond / bare.requestsPerSecond))
            }
            if let bare, let cpu = saturatedCPU, saturated.accepted > 0, bare.cpuSecondsPerRequest > 0 {
                let gateway = cpu.seconds(of: .gateway, perUnit: saturated.accepted)
                say(
                    String(
                        format: "  gateway CPU per event vs bare ...... %8.3f ms   ratio %.1f   (the bare endpoint: %.3f ms per request)",
                        gateway * 1e3, gateway / bare.cpuSecondsPerRequest, bare.cpuSecondsPerRequest * 1e3))
            }
            if let cpu = saturatedCPU, saturated.accepted > 0 {
                // What 2,000/s would leave each event: every core's second shared by 2,000 events.
                say(
                    String(
                        format:
                            "  CPU per accepted event ............. %8.2f ms   (2,000/s on %d cores allows %.2f ms; the broker alone takes %.2f ms)",
                        cpu.total(perUnit: saturated.accepted) * 1e3, cpu.cores, Double(cpu.cores) / 2_000 * 1e3,
                        cpu.seconds(of: .broker, perUnit: saturated.accepted) * 1e3))
            }
        }
        if let half, let halfRate {
            say(
                String(
                    format: "latency at half load (%5.0f/s) ....... p50 %.1f ms  p99 %.1f ms   (bar p99 <= 150 ms)", halfRate, half.p50,
                    half.p99))
        }
        if let merger {
            say(String(format: "merger rows/s (alone) ................ %8.0f", merger.rowsPerSecond))
            if let pgbench {
                let same = pgbench.sameTable, single = pgbench.singleClient, empty = pgbench.emptyCopy
                say(
                    String(
                        format:
                            "  vs pgbench %3d-row batches ......... %8.0f rows/s   ratio %.2f   (into merger.events, 2 clients)",
                        options.mergerBatch, same.rowsPerSecond, merger.rowsPerSecond / same.rowsPerSecond))
                say(
                    String(
                        format:
                            "  vs pgbench, one client ............. %8.0f rows/s   ratio %.2f   (one transaction at a time, as the merger with MERGER_WRITE_LANES=1)",
                        single.rowsPerSecond, merger.rowsPerSecond / single.rowsPerSecond))
                say(
                    String(
                        format: "  vs pgbench into an empty copy ...... %8.0f rows/s   ratio %.2f", empty.rowsPerSecond,
                        merger.rowsPerSecond / empty.rowsPerSecond))
                // Half of pgbench's rate on these cores leaves each row this much CPU, for everything.
                let allowed = Double(merger.cpu.cores) / (0.5 * same.rowsPerSecond) * 1e6
                say(
                    String(
                        format: "  CPU per row, whole machine ......... %8.0f µs   (half of pgbench's rate on %d cores allows %.0f µs)",
                        merger.cpu.total(perUnit: merger.rows) * 1e6, merger.cpu.cores, allowed))
                say(
                    String(
                        format: "  PostgreSQL's CPU per row ........... %8.0f µs   (pgbench's: %.0f µs)", merger.postgresMicrosecondsPerRow,
                        same.postgresMicrosecondsPerRow))
                say(
                    String(
                        format: "    without other services' backends %8.0f µs   (pgbench's: %.0f µs)",
                        merger.postgresOwnMicrosecondsPerRow,
                        same.postgresOwnMicrosecondsPerRow))
                say("    by backend: " + PostgresCPU.line(merger.postgresByOwner, perUnits: merger.rows))
                say("  PostgreSQL's time per merger row, by statement (pg_stat_statements):")
                for line in StatementProfile.lines(merger.statements, perUnits: merger.rows) { say(line) }
                say("  and per pgbench row (2 clients):")
                for line in StatementProfile.lines(same.statements, perUnits: same.rows, limit: 3) { say(line) }
            }
        }
        say("")
        for line in PerformanceBars.lines(
            saturated: saturated.map { ($0, saturatedCPU) }, bare: bare?.requestsPerSecond, half: half, merger: merger,
            pgbench: pgbench?.sameTable)
        {
            say(line)
        }
    }

    // MARK: Closed and open loops against the gateway

    struct LoopResult {
        var accepted = 0
        var otherFinal = 0
        var unfinished = 0
        var acceptedPerSecond = 0.0
    }

    private func closedLoop(contract: ContractClient, seconds: Int) async -> LoopResult {
        let counts = Counts()
        let start = ContinuousClock.now
        let end = start + .seconds(seconds)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<options.concurrency {
                let device = fleet.devices[worker % fleet.devices.count]
                group.addTask {
                    var sequence = 1_000_000 * (worker + 1)
                    while ContinuousClock.now < end {
                        let event = ContractClient.event(fleet: fleet, device: device, sequence: sequence, at: Date())
                        sequence += 1
                        let outcome = await contract.send(event, device: device, stopRetryingAfter: end + .seconds(30))
                        counts.record(outcome.status)
                    }
                }
            }
        }
        let elapsed = ContinuousClock.now - start
        var result = LoopResult()
        (result.accepted, result.otherFinal, result.unfinished) = counts.snapshot
        result.acceptedPerSecond = Double(result.accepted) / elapsed.seconds
        return result
    }

    struct Latency { var p50 = 0.0, p90 = 0.0, p99 = 0.0, count = 0 }

    private func openLoop(contract: ContractClient, rate: Double, seconds: Int) async -> Latency {
        let log = OutcomeLog()
        let start = ContinuousClock.now
        let total = Int(rate * Double(seconds))
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                let at = start + .seconds(Double(index) / rate)
                try? await Task.sleep(until: at)
                let device = fleet.devices[index % fleet.devices.count]
                let event = ContractClient.event(fleet: fleet, device: device, sequence: 10_000_000 + index, at: Date())
                group.addTask { log.append(await contract.send(event, device: device, stopRetryingAfter: at + .seconds(60))) }
            }
        }
        let latencies = log.all.map { $0.latency.seconds * 1_000 }.sorted()
        guard !latencies.isEmpty else { return Latency() }
        func q(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count - 1) * p))] }
        return Latency(p50: q(0.5), p90: q(0.9), p99: q(0.99), count: latencies.count)
    }

    // MARK: Ceiling 1: the same JSON decoded by a bare Hummingbird endpoint

    /// The bare endpoint's rate, and its CPU per request: it runs in a process of its own
    /// (`pipeline-load bare-endpoint`), so its CPU is told apart from the load generator's and the
    /// gateway's CPU per event has a floor measured in the same run.
    struct BareCeiling {
        var requestsPerSecond: Double
        var cpuSecondsPerRequest: Double
    }

    private func bareEndpointCeiling() async throws -> BareCeiling {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["bare-endpoint"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        // Its first line names the port it listens on.
        var line: [UInt8] = []
        while true {
            let byte = pipe.fileHandleForReading.readData(ofLength: 1)
            guard let first = byte.first else { throw LoadError("the bare endpoint exited before it listened") }
            if first == UInt8(ascii: "\n") { break }
            line.append(first)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).dropFirst("port ".count)) else {
            throw LoadError("the bare endpoint said \"\(String(decoding: line, as: UTF8.self))\", not its port")
        }
        let contract = ContractClient(http: http, gateway: "http://127.0.0.1:\(port)", requestTimeout: .seconds(10))
        let before = ProcessStat.read(pid: process.processIdentifier)?.ownSeconds ?? 0
        let result = await closedLoop(contract: contract, seconds: options.seconds)
        let cpu = (ProcessStat.read(pid: process.processIdentifier)?.ownSeconds ?? 0) - before
        return BareCeiling(
            requestsPerSecond: result.acceptedPerSecond, cpuSecondsPerRequest: result.accepted > 0 ? cpu / Double(result.accepted) : 0)
    }

    // MARK: Ceiling 2: pgbench with the merger's batch size

    /// pgbench rows/s into `merger.events` itself (the table the merger writes, at its size and with
    /// its indexes; the rows are deleted afterwards) and into an empty copy of it.
    struct PgbenchCeiling {
        var sameTable: StorageRun
        /// One client: one transaction at a time, as the merger reading one partition in one lane.
        var singleClient: StorageRun
        var emptyCopy: StorageRun
    }

    /// Rows stored into PostgreSQL by one writer (`owner`: the `application_name` of its
    /// connections, `pgbench` or `session-merger`), with what it cost.
    struct StorageRun {
        var owner: String
        var rowsPerSecond: Double
        var rows: Int
        /// From the first write until every row was stored.
        var cpu: StackCPU.Usage
        /// PostgreSQL's time per statement meanwhile.
        var statements: [StatementProfile.Counters]
        /// PostgreSQL's CPU seconds by whose backend spent them.
        var postgresByOwner: [String: Double]

        var postgresMicrosecondsPerRow: Double { cpu.seconds(of: .postgres, perUnit: rows) * 1e6 }
        /// Without what other connections spent meanwhile (the telemetry aggregator records the
        /// merger's verdicts, for one).
        var postgresOwnMicrosecondsPerRow: Double {
            PostgresCPU.ownMicrosecondsPerRow(cpu: cpu, byOwner: postgresByOwner, own: owner, rows: rows)
        }

        func report(_ label: String) {
            say(
                "    \(label): "
                    + String(
                        format: "%.0f rows/s; cores busy %.0f %%; PostgreSQL %.0f µs of CPU per row", rowsPerSecond, cpu.busyShare * 100,
                        postgresMicrosecondsPerRow))
        }
    }

    private func pgbenchCeiling() async throws -> PgbenchCeiling {
        // The rows of this run are found and removed through their devices (an index), not scanning the table.
        let tag = "pgbench-\(UUID().uuidString.prefix(8).lowercased())-"
        let devices = (0..<fleet.devices.count).map { "\(tag)device-\($0)" }
        // Unmeasured first: with keys spread over the whole table, a server whose buffers are cold (just
        // started) reads most index leaves from disk, and the ceiling would be a fraction of itself
        // (measured: 6,496 rows/s cold, 24,255-35,567 warm).
        _ = try await pgbench(into: "merger.events", tag: tag, clients: 2)
        await settleDatabase()
        let sameTable = try await pgbench(into: "merger.events", tag: tag, clients: 2)
        sameTable.report("into merger.events, 2 clients")
        await settleDatabase()
        let singleClient = try await pgbench(into: "merger.events", tag: tag, clients: 1)
        singleClient.report("into merger.events, 1 client")
        let deleted = try await postgres.query(
            "WITH d AS (DELETE FROM merger.events WHERE device_id = ANY(\(devices)) RETURNING 1) SELECT count(*)::int FROM d",
            logger: logger)
        for try await n in deleted.decode(Int.self) { say("    (\(n) pgbench rows removed from merger.events)") }
        // Reclaimed now, not by autovacuum during a later phase: dead rows keep their heap pages and index
        // entries, so each run would grow the table by its pgbench rows and slow the merger phases after it
        // (docs/PERFORMANCE.md, "The bars depend on how much merger.events holds").
        let vacuumStart = ContinuousClock.now
        _ = try await postgres.query("VACUUM (ANALYZE) merger.events", logger: logger)
        say(String(format: "    (merger.events vacuumed in %.1f s)", (ContinuousClock.now - vacuumStart).seconds))

        _ = try await postgres.query("CREATE SCHEMA IF NOT EXISTS bench", logger: logger)
        _ = try await postgres.query("DROP TABLE IF EXISTS bench.merger_events", logger: logger)
        _ = try await postgres.query("CREATE TABLE bench.merger_events (LIKE merger.events INCLUDING ALL)", logger: logger)
        await settleDatabase()
        let emptyCopy = try await pgbench(into: "bench.merger_events", tag: tag, clients: 2)
        emptyCopy.report("into an empty copy, 2 clients")
        _ = try? await postgres.query("DROP TABLE IF EXISTS bench.merger_events", logger: logger)
        return PgbenchCeiling(sameTable: sameTable, singleClient: singleClient, emptyCopy: emptyCopy)
    }

    /// Each storage phase starts from the same state: no autovacuum worker at work (the rows of the
    /// phase before may have started one) and a checkpoint just taken, so that no phase pays for
    /// another's dirty pages or shares the cores with a vacuum it did not cause. The local stack grants
    /// the application role `pg_checkpoint`; without it the phase runs unsettled and says so.
    private func settleDatabase() async {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            var workers = 0
            do {
                let rows = try await postgres.query(
                    "SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'", logger: logger)
                for try await count in rows.decode(Int.self) { workers = count }
            } catch {
                break
            }
            if workers == 0 { break }
            try? await Task.sleep(for: .milliseconds(500))
        }
        do {
            _ = try await postgres.query("CHECKPOINT", logger: logger)
        } catch {
            say("    (no checkpoint before this phase: \(String(reflecting: error)))")
        }
    }

    private func pgbench(into table: String, tag: String, clients: Int) async throws -> StorageRun {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("merger-batch-\(UUID().uuidString).sql")
        // One transaction of `mergerBatch` rows shaped like the merger's: 64 hex digits of key spread
        // over the whole primary key (as SHA-256 keys are), timestamps, a JSON envelope of the stored
        // envelopes' average size (~1,280 bytes), and as many users, devices and sessions as the load's
        // fleet. (Keys under one prefix, and one user, device and session, put every index entry of a
        // batch in a few leaves: a cheaper insert than the merger's, whose entries land all over.)
        // The lateral's `g * 0` makes it draw a device per row rather than once per statement.
        let envelope = String(repeating: "x", count: 1_270)
        let sql = """
            INSERT INTO \(table) (idempotency_key, request_id, user_id, device_id, site_id, kind, event_type, session_key,
              event_time, received_at, recorded_at, payload_fingerprint, outcome, http_status, server_receipt_id, session_id,
              reasons, action, decided_at, envelope, gateway_instance, source_topic, source_partition, source_offset)
            SELECT md5(:client_id || '-' || random()::text || '-' || g) || md5(random()::text), 'req', '\(tag)user-' || d,
              '\(tag)device-' || d, 'site', 'event', 'heartbeat', 'sk-' || d, now(), now(), now(), md5(g::text), 'accepted', 201,
              md5(random()::text || g), '\(tag)session-' || d, '[]'::jsonb, 'none', now(), json_build_object('pad', '\(envelope)'),
              'pgbench', 'attendance.events.vetted', 0, g
            FROM generate_series(1, \(options.mergerBatch)) g, LATERAL (SELECT floor(random() * \(fleet.devices.count) + g * 0)::int AS d) device
            ON CONFLICT DO NOTHING;
            """
        try sql.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let pgbench =
            ["/usr/lib/postgresql/15/bin/pgbench", "/usr/bin/pgbench"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")).flatMap {
                $0.sorted().last.map { "/usr/lib/postgresql/\($0)/bin/pgbench" }
            }
            ?? "pgbench"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pgbench)
        // A fixed number of transactions per client: a time limit (-T) did not stop pgbench when started from here.
        // About 80 transactions in all, whatever the number of clients.
        let perClient = 80 / clients
        process.arguments = ["-n", "-f", script.path, "-c", "\(clients)", "-j", "\(clients)", "-t", "\(perClient)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let statementsAtStart = await StatementProfile.snapshot(postgres, logger: logger)
        let backendsAtStart = await PostgresCPU.snapshot(postgres, logger: logger)
        let start = StackCPU.snapshot()
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let cpu = StackCPU.usage(from: start, to: StackCPU.snapshot())
        // pgbench's backends are gone by now: its share is what is left of the total.
        let backends = PostgresCPU.usage(from: backendsAtStart, to: await PostgresCPU.snapshot(postgres, logger: logger))
        let statements = await StatementProfile.difference(statementsAtStart, postgres: postgres, logger: logger)
        guard process.terminationStatus == 0,
            let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let tps = Double(line.dropFirst(6).prefix { $0 != " " })
        else { throw LoadError("pgbench failed:\n\(output)") }
        return StorageRun(
            owner: "pgbench", rowsPerSecond: tps * Double(options.mergerBatch), rows: perClient * clients * options.mergerBatch, cpu: cpu,
            statements: statements, postgresByOwner: backends)
    }

    // MARK: The merger alone

    private func mergerAlone() async throws -> StorageRun {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaConfiguration(bootstrapServers: options.brokers, clientId: "pipeline-bench")), logger: logger)
        return try await withThrowingTaskGroup(of: StorageRun?.self) { group in
            group.addTask {
                try await producer.run(); return nil
            }
            defer { group.cancelAll() }
            let runTag = UUID().uuidString.prefix(8).lowercased()
            var messages: [KafkaOutgoingMessage] = []
            messages.reserveCapacity(options.mergerEvents)
            let now = Date()
            for index in 0..<options.mergerEvents {
                let device = fleet.devices[index % fleet.devices.count]
                // One millisecond apart, ending now: each device's events in time order, as a phone
                // sends them (all at one instant, every event would land mid-timeline).
                let at = now.addingTimeInterval(-Double(options.mergerEvents - index) / 1_000)
                var event = ContractClient.event(fleet: fleet, device: device, sequence: 20_000_000 + index, at: at)
                // The wire format wants the app's key shape (hex sha256); the request id marks the run.
                event.idempotencyKey = ContractClient.idempotencyKey(
                    device: device, beaconId: fleet.beaconId, at: at, nonce: "bench-\(runTag)-\(index)")
                let raw = RawEventEnvelope(
                    requestId: "req-\(runTag)-\(index)", idempotencyKey: event.idempotencyKey, userId: device.userId,
                    deviceId: device.deviceId,
                    siteId: fleet.siteId, appVersion: "1.12.0", gatewayInstance: "bench", receivedAt: now,
                    payloadFingerprint: String(repeating: "c", count: 64), payload: .event(event)
                )
                let vetted = VettedEvent(
                    raw: raw,
                    decision: PolicyDecision(
                        outcome: .accept, ruleResults: [], riskScore: 0, action: .noAction, policyVersion: 0, decidedAt: now))
                let record = try ProtocolCodec.wire.record(for: vetted)
                messages.append(KafkaOutgoingMessage(topic: Topic.vettedEvents.name, key: record.key, value: record.value))
            }
            // Timed from the first produce (the broker takes them far faster than PostgreSQL).
            let statementsAtStart = await StatementProfile.snapshot(postgres, logger: logger)
            let backendsAtStart = await PostgresCPU.snapshot(postgres, logger: logger)
            let start = ContinuousClock.now
            let cpuAtStart = StackCPU.snapshot()
            let reports = try await producer.sendBatch(messages)
            guard reports.allSatisfy({ $0.isDelivered }) else { throw LoadError("vetted events not delivered") }
            say(String(format: "    produced in %.2f s", (ContinuousClock.now - start).seconds))
            // Done when the merger's stored offsets (written in the same transaction as the rows) pass
            // every produced offset: a cheap primary-key read, where counting the rows each time
            // would scan merger.events and compete with the merger for PostgreSQL.
            var last: [Int32: Int64] = [:]
            for report in reports { last[report.partition] = max(last[report.partition] ?? -1, report.offset) }
            let partitions = last.keys.sorted()
            let deadline = start + .seconds(300)
            while ContinuousClock.now < deadline {
                let rows = try await postgres.query(
                    """
                    SELECT partition, min(next_offset) FROM merger.consumer_offsets
                    WHERE group_id = 'session-merger' AND topic = \(Topic.vettedEvents.name) AND partition = ANY(\(partitions))
                    GROUP BY partition
                    """, logger: logger
                )
                var caughtUp = 0
                for try await (partition, next) in rows.decode((Int32, Int64).self) where next > (last[partition] ?? Int64.max) {
                    caughtUp += 1
                }
                if caughtUp == partitions.count {
                    let elapsed = (ContinuousClock.now - start).seconds
                    let cpu = StackCPU.usage(from: cpuAtStart, to: StackCPU.snapshot())
                    let backends = PostgresCPU.usage(from: backendsAtStart, to: await PostgresCPU.snapshot(postgres, logger: logger))
                    let statements = await StatementProfile.difference(statementsAtStart, postgres: postgres, logger: logger)
                    let counted = try await postgres.query(
                        "SELECT count(*)::int FROM merger.events WHERE request_id LIKE \("req-\(runTag)-%")", logger: logger
                    )
                    var stored = 0
                    for try await n in counted.decode(Int.self) { stored = n }
                    guard stored == options.mergerEvents else {
                        throw LoadError("the merger stored \(stored) of \(options.mergerEvents) rows")
                    }
                    return StorageRun(
                        owner: "session-merger", rowsPerSecond: Double(stored) / elapsed, rows: stored, cpu: cpu, statements: statements,
                        postgresByOwner: backends)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw LoadError("the merger did not store \(options.mergerEvents) rows within 300 s")
        }
    }
}

/// Final statuses counted from many tasks.
final class Counts: Sendable {
    private let state = Mutex<(accepted: Int, otherFinal: Int, unfinished: Int)>((0, 0, 0))

    func record(_ status: Int) {
        state.withLock {
            switch status {
            case 201, 200: $0.accepted += 1
            case 400, 409, 422: $0.otherFinal += 1
            default: $0.unfinished += 1
            }
        }
    }

    var snapshot: (Int, Int, Int) { state.withLock { ($0.accepted, $0.otherFinal, $0.unfinished) } }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// `print` and flush: the phases are long, and stdout to a file is block-buffered.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
