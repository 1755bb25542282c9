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
        try await LocalStack.runScript("deploy/local/services.sh", "start")
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
            try? await LocalStack.runScript("deploy/local/services.sh", "stop")
            throw error
        }
        try await LocalStack.runScript("deploy/local/services.sh", "stop")
    }
}

/// The shared services lock, taken with flock(2) on the same file `flock(1)` uses.
struct ServicesLock {
    let fd: Int32

    static func acquire(timeout: Duration = .seconds(3_600)) throws -> ServicesLock {
        if ProcessInfo.processInfo.environment["SERVICES_LOCK_HELD"] == "1" { return ServicesLock(fd: -1) }
        let path = LocalStack.root.appendingPathComponent(".local/run/services.lock").path
        // Close-on-exec: the services started while the lock is held must not inherit (and keep) it.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
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

