import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import Logging
import PostgresNIO
import Testing

@testable import ServiceRuntime

@Suite("Service runtime on the local PostgreSQL and broker", .serialized, .timeLimit(.minutes(2)))
struct PostgresIntegrationTests {
    let logger = LocalStack.logger

    init() throws {
        try LocalStack.ensureStarted()
    }

    func migrations(_ table: String) -> [Migration] {
        [
            Migration(version: 1, name: "create", sql: "CREATE TABLE \(table) (id int PRIMARY KEY);\nCREATE INDEX ON \(table) (id);"),
            Migration(version: 2, name: "column", sql: "-- adds a note\nALTER TABLE \(table) ADD COLUMN note text DEFAULT 'a;b';"),
        ]
    }

    @Test func migrationsApplyOnceInOrderAndAreRecorded() async throws {
        let service = "it_migr_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            let runner = MigrationRunner(service: service, migrations: migrations(service), client: db, logger: logger)
            let first = try await runner.run()
            #expect(first.map(\.version) == [1, 2])
            let second = try await runner.run()
            #expect(second.isEmpty)
            let rows = try await db.query(
                "SELECT version, name FROM schema_migrations WHERE service = \(service) ORDER BY version", logger: logger)
            var recorded: [String] = []
            for try await (version, name) in rows.decode((Int, String).self) { recorded.append("\(version)_\(name)") }
            #expect(recorded == ["1_create", "2_column"])
        }
    }

    @Test func concurrentRunnersApplyEachMigrationOnce() async throws {
        let service = "it_conc_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        try await MigrationRunner(service: service, migrations: self.migrations(service), client: db, logger: self.logger)
                            .run().count
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(applied == 2)
        }
    }

    /// A long transaction holds the table a migration alters: the migration gives up waiting after its
    /// lock timeout (so it never queues the table's other readers and writers behind it), is rolled back
    /// and tried again, and is applied once the table is free; with too few attempts, start-up fails
    /// saying why.
    @Test(arguments: [(10, true), (2, false)])
    func aMigrationWaitsForALockedTableInRoundsNotInTheQueue(attempts: Int, applies: Bool) async throws {
        let service = "it_migr_lock_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            let all = migrations(service)
            try await MigrationRunner(service: service, migrations: [all[0]], client: db, logger: logger).run()
            let (locked, lockedContinuation) = AsyncStream.makeStream(of: Void.self)
            let (released, release) = AsyncStream.makeStream(of: Void.self)
            let runner = MigrationRunner(
                service: service, migrations: all, client: db, logger: logger, lockTimeout: .milliseconds(200), lockAttempts: attempts)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await db.withTransaction(logger: self.logger) { connection in
                        try await connection.query(
                            PostgresQuery(unsafeSQL: "LOCK TABLE \(service) IN ACCESS EXCLUSIVE MODE"), logger: self.logger)
                        lockedContinuation.yield()
                        for await _ in released { break }
                    }
                }
                for await _ in locked { break }
                if applies {
                    // Held for a while, then released: the runner (ten rounds of a second or more) applies it.
                    group.addTask {
                        try await Task.sleep(for: .seconds(2))
                        release.yield()
                    }
                    #expect(try await runner.run().map(\.version) == [2])
                } else {
                    // Held until the runner gives up.
                    await #expect {
                        try await runner.run()
                    } throws: { error in
                        "\(error)".contains("could not lock what it changes in 2 attempts")
                    }
                    release.yield()
                }
                try await group.waitForAll()
            }
            let rows = try await db.query("SELECT count(*)::int FROM schema_migrations WHERE service = \(service)", logger: logger)
            for try await count in rows.decode(Int.self) { #expect(count == (applies ? 2 : 1)) }
        }
    }

    /// A replica asked to stop while another applies the service's migrations (a long index build)
    /// ends its wait at once, and starts nothing.
    @Test func aRunnerWaitingForAnotherReplicasMigrationsStopsWhenCancelled() async throws {
        let service = "it_migr_wait_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            let (locked, lockedContinuation) = AsyncStream.makeStream(of: Void.self)
            let (released, release) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The other replica: holds the service's migration lock.
                group.addTask {
                    try await db.withTransaction(logger: self.logger) { connection in
                        let key = "schema_migrations:\(service)"
                        try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(key)))", logger: self.logger)
                        lockedContinuation.yield()
                        for await _ in released { break }
                    }
                }
                for await _ in locked { break }
                let waiting = Task {
                    try await MigrationRunner(service: service, migrations: self.migrations(service), client: db, logger: self.logger)
                        .run()
                }
                try await Task.sleep(for: .seconds(1))
                let cancelled = ContinuousClock.now
                waiting.cancel()
                let outcome = await waiting.result
                #expect(ContinuousClock.now - cancelled < .seconds(3))
                #expect(throws: (any Error).self) { try outcome.get() }
                release.yield()
                try await group.waitForAll()
            }
            let rows = try await db.query("SELECT count(*)::int FROM schema_migrations WHERE service = \(service)", logger: logger)
            for try await count in rows.decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func runnersOfSeveralServicesStartTogetherOnANewDatabase() async throws {
        // A brand-new database, as on a first deploy where every service starts at once.
        let database = "it_fresh_\(UInt32.random(in: 0...UInt32.max))"
        _ = try await LocalStack.withPostgres { db in
            try await db.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"), logger: logger)
        }
        var settings = try LocalStack.postgres
        settings.database = database
        let fresh = settings.makeClient(logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await fresh.run() }
            let applied = try await withThrowingTaskGroup(of: Int.self) { runners in
                for service in 0..<8 {
                    runners.addTask {
                        try await MigrationRunner(
                            service: "svc\(service)", migrations: self.migrations("t\(service)"), client: fresh, logger: self.logger
                        )
                        .run().count
                    }
                }
                return try await runners.reduce(0, +)
            }
            #expect(applied == 16)
            // The trigger function they created is the one a later start compares with, so that start
            // finds the bookkeeping current and takes no lock.
            let rows = try await fresh.query(
                "SELECT prosrc FROM pg_proc WHERE proname = 'notify_outbox_relay' AND pronamespace = 'public'::regnamespace",
                logger: logger)
            var bodies: [String] = []
            for try await body in rows.decode(String.self) { bodies.append(body) }
            #expect(bodies == [MigrationRunner.outboxNotifyBody])
            group.cancelAll()
        }
        _ = try await LocalStack.withPostgres { db in
            try await db.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(database) WITH (FORCE)"), logger: logger)
        }
    }

    @Test func aPoolsConnectionsCarryTheirServicesName() async throws {
        var settings = try LocalStack.postgres
        settings.searchPath = ["public"]
        settings.applicationName = "it-app-\(UInt32.random(in: 0...UInt32.max))"
        let client = settings.makeClient(logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let rows = try await client.query(
                "SELECT current_setting('application_name'), current_setting('search_path')", logger: logger)
            var seen: [(String, String)] = []
            for try await row in rows.decode((String, String).self) { seen.append(row) }
            // Both startup parameters reach the server, the name beside the search path.
            #expect(seen.count == 1)
            #expect(seen.first?.0 == settings.applicationName)
            #expect(seen.first?.1 == "public")
        }
    }

    @Test func editedMigrationIsRefused() async throws {
        let service = "it_edit_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            try await MigrationRunner(service: service, migrations: migrations(service), client: db, logger: logger).run()
            var edited = migrations(service)
            edited[1] = Migration(version: 2, name: "column", sql: "ALTER TABLE \(service) ADD COLUMN other text;")
            let error = await #expect(throws: MigrationError.self) {
                try await MigrationRunner(service: service, migrations: edited, client: db, logger: logger).run()
            }
            #expect(
                error?.description.contains("migration \(service) 2_column was changed after it was applied (checksum differs)") == true,
                "\(String(describing: error))")
        }
    }

    @Test func brokenMigrationRollsBackAndSaysWhichOne() async throws {
        let service = "it_broken_\(UInt32.random(in: 0...UInt32.max))"
        try await LocalStack.withPostgres { db in
            let broken = [Migration(version: 1, name: "typo", sql: "CREATE TABLE \(service) (id int);\nCREAT TABLE nope (id int);")]
            do {
                try await MigrationRunner(service: service, migrations: broken, client: db, logger: logger).run()
                Issue.record("expected the migration to fail")
            } catch let error as MigrationError {
                #expect(error.description.contains("1_typo"))
            }
            // Nothing of it stays: the first statement was rolled back with the second.
            let rows = try await db.query("SELECT count(*)::int FROM pg_tables WHERE tablename = \(service)", logger: logger)
            for try await count in rows.decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func readinessChecksSeeRealDependencies() async throws {
        try await LocalStack.withPostgres { db in
            try await PostgresReadinessCheck(client: db).check()
        }
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(
                client: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks)), logger: logger)
        try await KafkaReadinessCheck(producer: producer).check()

        // A database that isn't there makes the check fail (and so /health/ready answer 503).
        var wrong = try LocalStack.postgres
        wrong.port = 1
        let client = wrong.makeClient(logger: logger)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            // The check's own answer within its bound, not this test's timeout.
            let error = await #expect(throws: (any Error).self) {
                try await withTimeout(.seconds(10)) { try await PostgresReadinessCheck(client: client).check() }
            }
            #expect(error is PostgresNotAnswering, "expected the check's own refusal, got \(String(describing: error))")
            group.cancelAll()
        }
    }

    /// A database that drops the connection is a 503 with Retry-After (the request can succeed later);
    /// a value it refuses is still a 400, and a statement it cannot run a 500.
    @Test func aDatabaseThatGoesAwayIsA503() async throws {
        let mapper = ProblemMapper()
        try await LocalStack.withPostgres { db in
            /// The statement's error, once its rows are read.
            func failure(_ sql: PostgresQuery) async throws -> any Error {
                let error = await #expect(throws: (any Error).self) {
                    for try await _ in try await db.query(sql, logger: logger) {}
                }
                return try #require(error)
            }
            #expect(mapper.problem(for: try await failure("SELECT 1 / 0")).status == 400)
            #expect(mapper.problem(for: try await failure("SELEC 1")).status == 500)
            // Last: the pool may hand out the terminated connection once more before it notices.
            let dropped = try await failure("SELECT pg_terminate_backend(pg_backend_pid())")
            let problem = mapper.problem(for: dropped)
            #expect(problem.status == 503 && problem.retryAfterSeconds == 1, "\(String(reflecting: dropped))")
        }
    }

    /// The reads people ask for run on a pool of their own: its statements stop at its timeout with an
    /// answer that says to ask for less, it writes nothing, and while every one of its connections is
    /// busy the pipeline's pool answers at once.
    @Test func reportReadsHaveAPoolOfTheirOwnWithATimeoutAndNoWrites() async throws {
        var settings = try LocalStack.postgres
        settings.reportMaxConnections = 2
        settings.reportTimeoutSeconds = 1
        let pipeline = settings.makeClient(logger: logger), reports = settings.makeReportClient(logger: logger)
        var patient = settings
        patient.reportTimeoutSeconds = 10
        let patientReports = patient.makeReportClient(logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await pipeline.run() }
            group.addTask { await reports.run() }
            group.addTask { await patientReports.run() }
            defer { group.cancelAll() }

            do {
                for try await _ in try await reports.query("SELECT pg_sleep(3)", logger: logger) {}
                Issue.record("a 3 s statement outlived the 1 s report timeout")
            } catch {
                #expect(PostgresFailure(error)?.sqlState == PostgresFailure.queryCanceled, "\(String(reflecting: error))")
                let problem = ProblemMapper().problem(for: error)
                #expect(problem.status == 503 && problem.retryAfterSeconds == nil, "\(problem)")
                #expect(problem.detail?.contains("ask for less") == true, "\(problem)")
            }
            let table = "report_write_\(UInt32.random(in: 0...UInt32.max))"
            do {
                for try await _ in try await reports.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int)"), logger: logger) {}
                Issue.record("the report pool wrote")
                try await pipeline.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"), logger: logger)
            } catch {
                #expect(PostgresFailure(error)?.sqlState == PostgresFailure.readOnlyTransaction, "\(String(reflecting: error))")
                // As a write that reached a standby during a failover: a 503 to retry, not a 500.
                let problem = ProblemMapper().problem(for: error)
                #expect(problem.status == 503 && problem.retryAfterSeconds == 1, "\(problem)")
            }

            // Both report connections busy for 2 s: the pipeline's pool (its connection already open) answers
            // before either of them ends; with one shared pool of two it would wait for one.
            for try await _ in try await pipeline.query("SELECT 1", logger: logger) {}
            let (busy, nowBusy) = AsyncStream<Void>.makeStream()
            let slow = Task {
                try await withThrowingTaskGroup(of: Void.self) { readers in
                    for _ in 0..<2 {
                        readers.addTask { for try await _ in try await patientReports.query("SELECT pg_sleep(2)", logger: self.logger) {} }
                    }
                    nowBusy.yield()
                    try await readers.waitForAll()
                }
                return ContinuousClock.now
            }
            for await _ in busy { break }
            try await Task.sleep(for: .milliseconds(300))
            for try await _ in try await pipeline.query("SELECT 1", logger: logger) {}
            let answered = ContinuousClock.now
            let reportsEnded = try await slow.value
            #expect(answered < reportsEnded, "the pipeline's statement waited for the reports: \(answered - reportsEnded)")
        }
    }
}
