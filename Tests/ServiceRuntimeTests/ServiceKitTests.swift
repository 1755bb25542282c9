import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import ServiceRuntime

/// Records what happened, in order.
final class Journal: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A service that notes its start and its graceful shutdown.
struct NotingService: Service {
    let name: String
    let journal: Journal

    func run() async throws {
        journal.add("\(name) started")
        try? await gracefulShutdown()
        journal.add("\(name) stopped")
    }
}

@Suite("Service kit: nothing starts before the preparation, and shutdown never waits on it", .timeLimit(.minutes(1)))
struct ServiceKitTests {
    func group(_ preparation: Preparation, _ services: [any Service], maximumGracefulShutdown: Duration = .seconds(45)) -> ServiceGroup {
        ServiceKit.group(
            first: [], preparation: preparation, services: services, logger: Logger(label: "test"),
            maximumGracefulShutdown: maximumGracefulShutdown)
    }

    /// A service stuck in a wait that graceful shutdown does not end (a database that stopped
    /// answering) is cancelled once the bound passes: the process ends, and a supervisor restarts it.
    @Test func aServiceThatIgnoresGracefulShutdownIsCancelledAfterTheBound() async throws {
        struct Stuck: Service {
            let journal: Journal
            func run() async throws {
                journal.add("stuck started")
                do { try await Task.sleep(for: .seconds(3_600)) } catch { journal.add("stuck cancelled") }
            }
        }
        let journal = Journal()
        let group = group(
            Preparation(logger: Logger(label: "test")) {}, [Stuck(journal: journal)], maximumGracefulShutdown: .milliseconds(300))
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            while journal.all.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            await group.triggerGracefulShutdown()
            // The group reports the cancelled service's end as an error or not, depending on the version: either way it ends.
            try? await tasks.waitForAll()
        }
        #expect(journal.all == ["stuck started", "stuck cancelled"])
        #expect(ContinuousClock.now - started < .seconds(600), "far under the service's hour")
    }

    @Test func servicesStartAfterThePreparationAndStopInReverseOrder() async throws {
        let journal = Journal()
        let preparation = Preparation(logger: Logger(label: "test")) {
            try await Task.sleep(for: .milliseconds(200))
            journal.add("prepared")
        }
        let group = group(preparation, [NotingService(name: "a", journal: journal), NotingService(name: "b", journal: journal)])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            while journal.all.count < 3 { try await Task.sleep(for: .milliseconds(10)) }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let entries = journal.all
        #expect(entries.first == "prepared", "\(entries)")
        #expect(Set(entries.dropFirst().prefix(2)) == ["a started", "b started"], "\(entries)")
        #expect(Array(entries.suffix(2)) == ["b stopped", "a stopped"], "\(entries)")
    }

    @Test func aShutdownDuringAPreparationThatNeverEndsStopsEverything() async throws {
        let journal = Journal()
        let preparation = Preparation(logger: Logger(label: "test")) { try await Task.sleep(for: .seconds(3_600)) }
        let group = group(preparation, [NotingService(name: "a", journal: journal)])
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await Task.sleep(for: .milliseconds(100))
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(journal.all.isEmpty, "a service started although the preparation never finished: \(journal.all)")
        // Far under the preparation's hour, far over a starved pool's delays (12 s seen beside a build).
        #expect(ContinuousClock.now - started < .seconds(600))
    }

    @Test func aFailedPreparationStartsNothingAndFailsTheGroup() async throws {
        struct Broken: Error {}
        let journal = Journal()
        // The preparation's own error, every time: a waiting service does not return before it.
        for _ in 0..<20 {
            let preparation = Preparation(logger: Logger(label: "test")) { throw Broken() }
            let group = group(preparation, [NotingService(name: "a", journal: journal), NotingService(name: "b", journal: journal)])
            let error = await #expect(throws: (any Error).self) { try await group.run() }
            #expect(error is Broken, "\(String(describing: error))")
        }
        #expect(journal.all.isEmpty, "\(journal.all)")
    }
}

@Suite("Service kit: the command line")
struct ServiceCommandTests {
    @Test func noArgumentsServesAndMigrateOnlyMigrates() throws {
        #expect(try ServiceKit.Command.parse(service: "session-merger", arguments: []) == .serve)
        #expect(try ServiceKit.Command.parse(service: "session-merger", arguments: ["migrate"]) == .migrate)
    }

    @Test(arguments: [["serve"], ["migrate", "now"], ["--migrate"], [""]])
    func anythingElseIsAUsageErrorThatShowsTheUsage(arguments: [String]) {
        do {
            let command = try ServiceKit.Command.parse(service: "policy-service", arguments: arguments)
            Issue.record("\(arguments) parsed as \(command)")
        } catch {
            #expect(error.description.contains("unknown arguments"))
            #expect(error.description.contains("policy-service migrate"))
        }
    }
}
