import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Dispatch
import Foundation
import Logging
import PostgresNIO
import RegistryFeed
import ServiceRuntime

// Registry figures:
//  1. resolve-lookup latency: 100,000 random (uuid, major, minor) lookups on a RegistryCache of
//     10,000 beacons (plus their gates, sites and namespaces), each timed on its own; p50/p99.
//     Target p99 < 1 ms. Also the same while another task keeps applying beacon updates.
//  2. minor allocations per second on the real PostgreSQL (deploy/local): 200 allocations from 4
//     concurrent tasks through PostgresRegistryRepository.
// Run: swift run -c release RegistryLookupBenchmark  (needs the local stack for part 2).

func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
}

func format(_ ns: UInt64) -> String {
    ns < 10_000 ? "\(ns) ns" : String(format: "%.1f µs", Double(ns) / 1_000)
}

enum Bench {
    static let now = Date()
    static let beaconCount = 10_000
    static let lookupCount = 100_000
    static let shards = (0..<64).map { _ in UUID() }
}

func buildCache() -> (RegistryCache, [RegistryBeaconKey]) {
    let now = Bench.now, shards = Bench.shards, beaconCount = Bench.beaconCount
    let cache = RegistryCache()
    var records: [RegistryRecord] = []
    var keys: [RegistryBeaconKey] = []
    var version: Int64 = 0
    func add<E: Encodable>(_ type: String, _ id: String, _ entity: E) {
        version += 1
        records.append(
            .upsert(
                try! RegistryChange.upsert(RegistryEntityType(rawValue: type), id: id, version: version, changedAt: now, entity: entity)))
    }
    // 100 organizations, each a namespace, 2 sites, 10 gates, 100 beacons.
    for org in 0..<100 {
        let orgId = "org_\(org)"
        let uuid = shards[org % 64]
        let major = org / 64 + 1
        add("organization", orgId, Organization(id: orgId, name: "Org \(org)", createdAt: now))
        let ns = BusinessNamespace(organizationId: orgId, uuid: uuid, major: major, allocatedAt: now)
        add("namespace", ns.key, ns)
        for s in 0..<2 {
            let siteId = "site_\(org)_\(s)"
            add(
                "site", siteId,
                Site(
                    id: siteId, organizationId: orgId, name: "Site \(s)", timezone: "Asia/Ho_Chi_Minh",
                    geofence: Geofence(latitude: 10.7, longitude: 106.7, radiusMeters: 200),
                    shift: ShiftSettings(
                        start: TimeOfDay(hour: 8, minute: 0)!, end: TimeOfDay(hour: 17, minute: 0)!,
                        checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 10),
                    createdAt: now
                ))
        }
        for g in 0..<10 {
            add("gate", "gate_\(org)_\(g)", Gate(id: "gate_\(org)_\(g)", siteId: "site_\(org)_\(g % 2)", name: "Gate \(g)", createdAt: now))
        }
        for b in 0..<(beaconCount / 100) {
            let minor = b + 1
            let id = "bcn_\(org)_\(b)"
            let mac = String(format: "AA:BB:%02X:%02X:%02X:%02X", org, b / 256, b % 256, 1)
            add(
                "beacon", id,
                Beacon(
                    id: id, uuid: uuid, major: major, minor: minor, serial: nil, mac: mac, txPower: -59, advIntervalMs: 350,
                    batteryReplacedOn: nil, status: .active, gateId: "gate_\(org)_\(b % 10)", createdAt: now, updatedAt: now
                ))
            keys.append(RegistryBeaconKey(uuid: uuid, major: UInt16(major), minor: UInt16(minor)))
        }
    }
    let start = ContinuousClock.now
    cache.apply(records)
    print("cache: \(records.count) records applied in \(ContinuousClock.now - start); \(cache.counts.beacons) beacons")
    return (cache, keys)
}

func measureLookups(_ cache: RegistryCache, _ keys: [RegistryBeaconKey], label: String) {
    let lookupCount = Bench.lookupCount
    var generator = SystemRandomNumberGenerator()
    // Mostly known beacons, 10% strangers (unknown minor), as a gateway sees them.
    let probes: [RegistryBeaconKey] = (0..<lookupCount).map { i in
        var key = keys.randomElement(using: &generator)!
        if i % 10 == 0 { key.minor = 60_000 }
        return key
    }
    var samples = [UInt64](repeating: 0, count: lookupCount)
    var found = 0
    // Warm up.
    for key in probes.prefix(10_000) { if cache.resolve(key) != nil { found += 0 } }
    let wall = ContinuousClock.now
    for (i, key) in probes.enumerated() {
        let t0 = DispatchTime.now().uptimeNanoseconds
        let result = cache.resolve(key)
        let t1 = DispatchTime.now().uptimeNanoseconds
        samples[i] = t1 - t0
        if result != nil { found += 1 }
    }
    let elapsed = ContinuousClock.now - wall
    samples.sort()
    print(
        "\(label): \(lookupCount) lookups (\(found) found) in \(elapsed): p50 \(format(percentile(samples, 0.50))), p99 \(format(percentile(samples, 0.99))), p99.9 \(format(percentile(samples, 0.999))), max \(format(samples.last!)); p99 < 1 ms: \(percentile(samples, 0.99) < 1_000_000 ? "yes" : "NO")"
    )
}

func allocationsPerSecond() async throws {
    var logger = Logger(label: "registry-benchmark")
    logger.logLevel = .warning
    var settings = try PostgresConfiguration.load(from: EnvironmentReader())
    settings.searchPath = try RegistrySchema.searchPath(from: EnvironmentReader())
    let client = settings.makeClient(logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        try await ServiceMigrations.registry.apply(client: client, logger: logger)
        let signer = try DeviceTokenSigner(activeKey: try DeviceSigningKey(id: "bench", secret: Array(repeating: 9, count: 32)))
        let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer)
        let organization = try await repository.createOrganization(NewOrganization(name: "Bench \(UUID().uuidString.prefix(8))"))
        _ = try await repository.allocateNamespace(organizationId: organization.id)
        let site = try await repository.createSite(
            NewSite(
                organizationId: organization.id, name: "Bench site", timezone: "Asia/Ho_Chi_Minh",
                geofence: Geofence(latitude: 10.7, longitude: 106.7, radiusMeters: 200),
                shift: ShiftSettings(
                    start: TimeOfDay(hour: 8, minute: 0)!, end: TimeOfDay(hour: 17, minute: 0)!,
                    checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 10)
            ))
        var gates: [String] = []
        for g in 0..<4 { gates.append(try await repository.createGate(NewGate(siteId: site.id, name: "Gate \(g)")).id) }
        let total = 200
        let tasks = 4
        let gateIds = gates
        let start = ContinuousClock.now
        let minors = try await withThrowingTaskGroup(of: [Int].self) { allocations in
            for t in 0..<tasks {
                let gateId = gateIds[t]
                allocations.addTask {
                    var got: [Int] = []
                    for _ in 0..<(total / tasks) { got.append(try await repository.allocateMinor(gateId: gateId).minor) }
                    return got
                }
            }
            var all: [Int] = []
            for try await part in allocations { all += part }
            return all
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            String(
                format: "allocations: %d minors from %d concurrent tasks in %.2f s = %.0f allocations/s (distinct: %@)",
                minors.count, tasks, seconds, Double(minors.count) / seconds, Set(minors).count == minors.count ? "yes" : "NO"))
    }
}

/// Keeps applying beacon updates, as the loader does while following the topic.
func startWriter(_ cache: RegistryCache) -> Task<Void, Never> {
    let now = Bench.now, shards = Bench.shards
    return Task.detached {
        var version: Int64 = 1_000_000
        while !Task.isCancelled {
            version += 1
            let b = Int(version % 100)
            let beacon = Beacon(
                id: "bcn_0_\(b)", uuid: shards[0], major: 1, minor: b + 1, serial: nil, mac: nil, txPower: -60, advIntervalMs: 350,
                batteryReplacedOn: nil, status: version % 2 == 0 ? .active : .lost, gateId: "gate_0_\(b % 10)", createdAt: now,
                updatedAt: now
            )
            cache.apply(.upsert(try! RegistryChange.upsert(.beacon, id: beacon.id, version: version, changedAt: now, entity: beacon)))
            try? await Task.sleep(for: .microseconds(100))
        }
    }
}

let (cache, keys) = buildCache()
measureLookups(cache, keys, label: "resolve")
let writer = startWriter(cache)
measureLookups(cache, keys, label: "resolve with a concurrent writer")
writer.cancel()

do {
    try await allocationsPerSecond()
} catch {
    print("allocations: skipped, PostgreSQL not reachable (start deploy/local/stack.sh): \(error)")
}
