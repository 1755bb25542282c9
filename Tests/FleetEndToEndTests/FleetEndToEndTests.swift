import FleetSimulatorCore
import FleetSimulatorService
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LocalStackTesting
import Testing

/// A small fleet against the four services as processes (deploy/local/services.sh): 50 phones
/// running PresenceKit with their outboxes on disk, talking HTTP to the gateway for 45 minutes of
/// virtual morning (about two minutes of wall time), then the proof in `merger.events`.
///
/// The services share consumer groups and tables with everyone else's runs on the shared stack, so
/// the test holds the shared services lock (`.local/run/services.lock`, the file `flock(1)` takes)
/// from starting the services until they are stopped. A caller that already holds it (a script
/// wrapping `swift test` in `flock`) sets `SERVICES_LOCK_HELD=1`.
@Suite("Fleet end to end: services as processes", .serialized, .timeLimit(.minutes(30)))
struct FleetEndToEndTests {
    @Test func fiftyPhonesLoseAndDuplicateNothing() async throws {
        try LocalStack.ensureStarted()
        let lock = try ServicesLock.acquire()
        defer { lock.release() }
        try await Script.run("deploy/local/services.sh", "start")
        do {
            var options = FleetOptions()
            options.devices = 50
            options.durationMs = 45 * 60_000
            options.startOffsetMs = 7 * 3_600_000 + 45 * 60_000
            options.seed = 8
            var settings = StackRun.Settings(outboxDirectory: NSTemporaryDirectory() + "fleet-e2e-\(getpid())")
            settings.timeScale = 20
            settings.showProgress = false
            settings.gateway = "http://127.0.0.1:\(ProcessInfo.processInfo.environment["GATEWAY_PORT"] ?? "8080")"
            settings.tokenKeysFile = LocalStack.root.appendingPathComponent(".local/run/secrets/device-token-keys").path
            let report = try await StackRun(options: options, settings: settings).run()
            try? FileManager.default.removeItem(atPath: settings.outboxDirectory)
            _ = try? report.write(to: LocalStack.root.appendingPathComponent("reports/fleet-e2e").path)
            let d = report.delivery
            #expect(d.eventsPosted > 0, "\(report.headline)")
            #expect(d.lost == 0, "\(report.headline)")
            #expect(d.duplicated == 0, "\(report.headline)")
            #expect(d.unexpected == 0, "\(report.headline)")
            #expect(d.undeliveredAtEnd == 0, "\(report.headline)")
            #expect(d.serverEvents == d.eventsPosted, "\(report.headline)")
            #expect(report.score.matchedArrivals > 0, "\(report.headline)")
        } catch {
            try? await Script.run("deploy/local/services.sh", "stop")
            throw error
        }
        try await Script.run("deploy/local/services.sh", "stop")
    }
}

/// The shared services lock, taken with flock(2) on the same file `flock(1)` uses.
struct ServicesLock {
    let fd: Int32

    static func acquire(timeout: Duration = .seconds(3_600)) throws -> ServicesLock {
        if ProcessInfo.processInfo.environment["SERVICES_LOCK_HELD"] == "1" { return ServicesLock(fd: -1) }
        let path = LocalStack.root.appendingPathComponent(".local/run/services.lock").path
        let fd = open(path, O_RDWR | O_CREAT, 0o644)
        guard fd >= 0 else { throw ScriptFailure(output: "cannot open \(path): errno \(errno)") }
        let deadline = ContinuousClock.now + timeout
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard ContinuousClock.now < deadline else {
                close(fd)
                throw ScriptFailure(output: "the services lock \(path) stayed taken for \(timeout)")
            }
            usleep(500_000)
        }
        return ServicesLock(fd: fd)
    }

    func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
    }
}

struct ScriptFailure: Error, CustomStringConvertible {
    let output: String
    var description: String { output }
}

enum Script {
    /// Runs a project script to completion (posix_spawn + waitpid on a thread of its own, as the
    /// pipeline's end-to-end tests do: Foundation's Process did not return once services ran).
    static func run(_ path: String, _ arguments: String...) async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-e2e-\(UUID().uuidString).log")
        let command = ([LocalStack.root.appendingPathComponent(path).path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let argv = ["/bin/bash", "-c", "\(command) >'\(log.path)' 2>&1 </dev/null"]
        let status: Int32 = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var pid: pid_t = 0
                var cArgs = argv.map { strdup($0) } + [nil]
                defer { cArgs.forEach { free($0) } }
                guard posix_spawn(&pid, "/bin/bash", nil, nil, &cArgs, environ) == 0 else {
                    continuation.resume(returning: -1)
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: log)
        guard status == 0 else { throw ScriptFailure(output: "\(path) \(arguments.joined(separator: " ")) failed:\n\(output)") }
    }
}
