import Foundation
import Synchronization
import Testing

@testable import PresenceKit

// Shared fixtures for the PresenceKit tests: a small world (two sites, three beacons), a path-loss
// signal model with deterministic noise, and a device harness running a `PresenceAgent` on virtual time.

enum World {
    static let companyUUID = "f7826da6-4fa2-4e98-8024-bc5b71e0893e"
    static let hqCenter = GeoPoint(latitude: 33.8938, longitude: 130.8403)
    static let labCenter = hqCenter.moved(meters: 60, bearingDegrees: 90)
    /// Two gates of the HQ site and one beacon of a lab next door (a different site).
    static let gateA = BeaconIdentity(companyUUID, major: 10, minor: 1)
    static let gateB = BeaconIdentity(companyUUID, major: 10, minor: 2)
    static let lab = BeaconIdentity(companyUUID, major: 20, minor: 1)
    /// Same UUID, a major no site claims.
    static let foreign = BeaconIdentity(companyUUID, major: 99, minor: 9)

    static let directory = SiteDirectory(sites: [
        Site(id: "S_HQ", center: hqCenter, radiusMeters: 200, beacons: [BeaconMatcher(companyUUID, major: 10)]),
        Site(id: "S_LAB", center: labCenter, radiusMeters: 150, beacons: [BeaconMatcher(companyUUID, major: 20, minor: 1)]),
    ])

    static let start = Timestamp.seconds(1_758_177_312) // 2025-09-18T06:35:12Z

    /// The configuration the mechanism tests are written against: ranging bursts on region events,
    /// check-out on beacon loss, enter above -70 dBm, dwell evidence above -80 dBm. Each mechanism is
    /// tested on its own here; the shipped defaults (continuous scan, geofence-exit check-out, -65 / -85)
    /// have their own tests in DefaultsTests.swift.
    static func config(_ change: (inout PresenceConfig) -> Void = { _ in }) -> PresenceConfig {
        var c = PresenceConfig()
        c.flags.continuousScan = false
        c.checkOutTrigger = .beaconLoss
        c.enterRssi = -70
        c.dwellEnterRssi = -80
        change(&c)
        return c
    }
}

/// Deterministic Gaussian noise (Box-Muller over SplitMix64).
struct Noise {
    var rng: SplitMix64

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    mutating func uniform() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

    mutating func gaussian(sigma: Double) -> Double {
        let u1 = max(uniform(), 1e-12)
        let u2 = uniform()
        return sigma * (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }

    mutating func chance(_ p: Double) -> Bool { uniform() < p }
}

/// Log-distance path loss: -59 dBm at 1 m, exponent 2.2 — the simulator's model.
enum PathLoss {
    static func rssi(distance: Double, txPower: Double = -59, exponent: Double = 2.2) -> Double {
        txPower - 10 * exponent * log10(max(distance, 0.3))
    }

    /// A 1 Hz reading with noise; nil when not heard (beyond `range` meters or a dropout).
    static func reading(distance: Double, noise: inout Noise, sigma: Double = 3, dropout: Double = 0.05, range: Double = 25) -> Int? {
        if distance > range || noise.chance(dropout) { return nil }
        let value = rssi(distance: distance) + noise.gaussian(sigma: sigma)
        return Int(max(-110, min(-30, value.rounded())))
    }
}

/// One simulated phone: a `PresenceAgent` on a `ManualClock`, optionally writing to an outbox, recording
/// every host effect.
struct DeviceHarness {
    var agent: PresenceAgent
    let clock: ManualClock
    var outbox: Outbox?
    var effects: [PresenceEffect] = []

    init(
        config: PresenceConfig = World.config(), userId: String? = "u_123", deviceId: String = "d_456", seed: UInt64 = 42,
        clock: ManualClock = ManualClock(World.start), outbox: Outbox? = nil, restoring: PresenceSnapshot? = nil,
        clockOffsetMs: Int64 = 0, directory: SiteDirectory = World.directory
    ) throws {
        self.clock = clock
        self.outbox = outbox
        agent = PresenceAgent(
            machine: try PresenceStateMachine(
                config: config, directory: directory, identity: DeviceIdentity(userId: userId, deviceId: deviceId),
                seed: seed, restoring: restoring, clockOffsetMs: clockOffsetMs))
    }

    var machine: PresenceStateMachine { agent.machine }
    var phase: PresencePhase { agent.machine.phase }
    var now: Timestamp { clock.now() }

    var posts: [AttendanceEvent] {
        effects.compactMap {
            switch $0 {
            case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e): return e
            default: return nil
            }
        }
    }
    var checkIns: [AttendanceEvent] { posts.filter { $0.type == .checkIn } }
    var checkOuts: [AttendanceEvent] { posts.filter { $0.type == .checkOut } }
    var heartbeats: [AttendanceEvent] { posts.filter { $0.type == .heartbeat } }
    var logs: [(LogLevel, String)] {
        effects.compactMap { if case let .log(level, text) = $0 { return (level, text) } else { return nil } }
    }
    var notifications: [UserNotification] {
        effects.compactMap { if case .notifyUser(let n) = $0 { return n } else { return nil } }
    }

    /// Delivers `event` as a phone host does: with an outbox, through `handle(_:at:storingIn:)`, so a
    /// failed store leaves the machine as it was (and rethrows).
    @discardableResult
    mutating func send(_ event: PresenceEvent) throws -> [PresenceEffect] {
        let now = clock.now()
        let fx =
            try outbox.map { outbox throws(OutboxError) in try agent.handle(event, at: now, storingIn: outbox) }
            ?? agent.handle(event, at: now)
        try record(fx, stored: true)
        return fx
    }

    /// Scans the machine asked for and has not stopped: a realistic host only delivers readings then.
    var scanning = Set<ScanMode>()
    var isScanning: Bool { !scanning.isEmpty }

    mutating func record(_ fx: [PresenceEffect], stored: Bool = false) throws {
        for effect in fx {
            switch effect {
            case .startScanning(let mode): scanning.insert(mode)
            case .stopScanning(let mode): scanning.remove(mode)
            default: break
            }
        }
        effects.append(contentsOf: fx)
        if !stored, let outbox { try outbox.store(fx) }
    }

    /// Moves virtual time forward, firing due timers.
    mutating func advance(ms: Int64) throws {
        clock.advance(by: ms)
        let now = clock.now()
        let fx = try outbox.map { outbox throws(OutboxError) in try agent.advance(to: now, storingIn: outbox) } ?? agent.advance(to: now)
        try record(fx, stored: true)
    }

    mutating func reading(_ beacon: BeaconIdentity, _ rssi: Int) throws {
        try send(.beaconReading(BeaconReading(beacon: beacon, rssi: rssi)))
    }

    /// `seconds` of 1 Hz readings: each second the clock moves 1 s, then every (beacon, rssi) returned
    /// by `signal(second)` is delivered (nil rssi = not heard).
    mutating func run(seconds: Int, _ signal: (Int) -> [(BeaconIdentity, Int?)]) throws {
        for s in 0..<seconds {
            try advance(ms: 1_000)
            for (beacon, rssi) in signal(s) {
                if let rssi { try reading(beacon, rssi) }
            }
        }
    }

    /// Like `run`, but readings only reach the machine while it has a scan running (what a phone does).
    mutating func runScanning(seconds: Int, _ signal: (Int) -> [(BeaconIdentity, Int?)]) throws {
        for s in 0..<seconds {
            try advance(ms: 1_000)
            guard isScanning else { _ = signal(s); continue }
            for (beacon, rssi) in signal(s) {
                if let rssi { try reading(beacon, rssi) }
            }
        }
    }

    /// Convenience: one beacon.
    mutating func run(seconds: Int, beacon: BeaconIdentity = World.gateA, _ rssi: (Int) -> Int?) throws {
        try run(seconds: seconds) { s in [(beacon, rssi(s))] }
    }

    /// The usual arrival: inside the HQ geofence, walking.
    mutating func arrive(site: String = "S_HQ") throws {
        try send(.geofenceEntered(siteId: site))
        try send(.motionActivity(.walking))
    }

    /// A phone running `config` that has just made the usual arrival.
    static func arriving(_ config: PresenceConfig) throws -> DeviceHarness {
        var d = try DeviceHarness(config: config)
        try d.arrive()
        return d
    }
}

/// A disk whose directory fsync fails while `failing` is on (with `errno`): after a compaction, every
/// fsynced write of an outbox opened through it fails until the directory fsync succeeds again.
final class FailingDirectorySync: Sendable {
    private let on = Mutex(false)
    let errno: Int32

    init(errno: Int32 = EIO) { self.errno = errno }

    var failing: Bool {
        get { on.withLock { $0 } }
        set { on.withLock { $0 = newValue } }
    }

    func outbox(path: String, options: OutboxOptions = OutboxOptions()) throws -> Outbox {
        try Outbox(
            path: path, options: options, clock: SystemClock(),
            syncDirectory: { (directory: String) throws(OutboxError) in
                if self.failing { throw .io(operation: "fsync", path: directory, errno: self.errno) }
            })
    }
}

/// A temporary directory removed when the value is dropped by `withTempDir`.
func withTempDir<T>(_ body: (String) throws -> T) throws -> T {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("presencekit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: base) }
    return try body(base.path)
}

func withTempDir<T>(_ body: (String) async throws -> T) async throws -> T {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("presencekit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: base) }
    return try await body(base.path)
}

func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Invariants every stream of posted events must satisfy (also used by the property tests).
/// Returns a list of violations (empty when fine).
///
/// `endedSilently`: sessions the device ended without a check-out, as it does when it leaves a site
/// while a kill switch is on (the server closes them at its idle cutoff).
func attendanceViolations(_ posts: [AttendanceEvent], endedSilently: Set<String> = []) -> [String] {
    var violations: [String] = []
    var openBySite: [String: String] = [:] // site -> open sessionKey
    var keys = Set<String>()
    for e in posts {
        if !keys.insert(e.idempotencyKey.hex).inserted {
            violations.append("duplicate idempotency key \(e.idempotencyKey)")
        }
        switch e.type {
        case .checkIn:
            if let open = openBySite[e.siteId], !endedSilently.contains(open) {
                violations.append("second open session at \(e.siteId): \(open) still open when \(e.sessionKey) checked in")
            }
            if openBySite.values.contains(e.sessionKey) { violations.append("session key reused \(e.sessionKey)") }
            openBySite[e.siteId] = e.sessionKey
        case .checkOut:
            if openBySite[e.siteId] != e.sessionKey {
                violations.append("check-out of \(e.sessionKey) at \(e.siteId) without its check-in")
            }
            openBySite[e.siteId] = nil
            if e.timestamp < e.tStart { violations.append("check-out before its check-in") }
        case .heartbeat:
            if openBySite[e.siteId] != e.sessionKey {
                violations.append("heartbeat of \(e.sessionKey) outside its session")
            }
        }
    }
    return violations
}
