import Foundation
import PresenceKit

/// What a fleet run simulates.
package struct FleetOptions: Sendable, Hashable {
    package var devices = 100
    package var sites = 1
    package var gatesPerSite = 2
    /// Advertising interval of each site's main door (busy doors advertise faster).
    package var busyDoorIntervalMs = 250
    package var gateIntervalMs = 700
    /// Virtual time simulated, from `start + startOffsetMs`.
    package var durationMs: Int64 = 86_400_000
    /// Where in the first day the simulated window begins (schedules are laid out from `start`, a
    /// midnight): a one-hour run from 07:30 sees the morning arrivals.
    package var startOffsetMs: Int64 = 0
    package var seed: UInt64 = 1
    /// Virtual start (a midnight, epoch ms). Detection-only runs use a fixed date so they repeat.
    package var start: Int64 = 1_767_571_200_000 // 2026-01-05T00:00:00Z
    package var radio = RadioParameters()
    /// Working days from a midnight, or a morning rush compressed into the run (runs against the
    /// stack: real time).
    package var scheduleKind = ScheduleKind.workingDays
    package var schedule = ScheduleSettings()
    package var rush = RushSettings()
    package var phones = PhoneMix()
    /// Shares of people who only walk past, who stand at the gate, and visitors without a device
    /// (the rest are employees). Visitors come on top of `devices`.
    package var walkPastShare = 0.05
    package var gateStanderShare = 0.05
    package var visitorShare = 0.02
    /// Shares of runners, cyclists and pavement stoppers passing by, and of employees who take breaks
    /// in the doorway (a sweep's people; none in the default world).
    package var runnerShare = 0.0
    package var cyclistShare = 0.0
    package var pavementStopperShare = 0.0
    package var doorwayLoitererShare = 0.0
    /// Gates this far apart in a site's front wall, metres.
    package var gateSpacingMeters = 12.0
    /// What the phones' PresenceKit runs with before `heartbeatMinutes`.
    package var detection = PresenceConfig()
    /// Heartbeat interval while present, minutes (nil: the library's default).
    package var heartbeatMinutes: Double?

    package init() {}

    package var simulationStart: Int64 { start + startOffsetMs }
    package var simulationEnd: Int64 { start + startOffsetMs + durationMs }

    /// Puts the run's start at `nowMs` (epoch ms) for a real-time run: a rush starts right there;
    /// working days keep their midnight (`start`: today's, UTC) and begin at the current time of day.
    package mutating func setRealTimeStart(nowMs: Int64) {
        switch scheduleKind {
        case .morningRush:
            start = nowMs
            startOffsetMs = 0
        case .workingDays:
            start = nowMs - nowMs % ScheduleGenerator.dayMs
            startOffsetMs = nowMs - start
        }
    }

    /// How much of each end of the run the score leaves out: a working day's run starts and ends at
    /// arbitrary moments, so a gate pass in its first or last 5 minutes may be half seen; a rush is
    /// laid out so that every phone sees its whole approach and has the rush's tail to decide.
    package var scoringEdgeMs: Int64 { scheduleKind == .morningRush ? 0 : 300_000 }

    /// The PresenceKit configuration of a run: `detection` (the library's defaults unless a config file
    /// says otherwise), with the heartbeat every `heartbeatMinutes` when set.
    package var presenceConfig: PresenceConfig { presenceConfig(detection: detection) }

    /// `detection` (a phone's settings as its site serves them) with the run's heartbeat.
    package func presenceConfig(detection: PresenceConfig) -> PresenceConfig {
        var config = detection
        if let heartbeatMinutes { config.heartbeatIntervalMs = Int64(heartbeatMinutes * 60_000) }
        return config
    }
}

/// The people, phones and world of a run, generated from the options and the seed.
package struct FleetPlan: Sendable {
    package var options: FleetOptions
    package var world: World
    /// Every person; visitors have no device.
    package var people: [Person]
    package var profiles: [Int: PhoneProfile]

    /// `world`: the sites to use instead of `World.standard` from the options (a sweep's own world).
    package init(options: FleetOptions, world: World? = nil) {
        self.options = options
        let world =
            world
            ?? World.standard(
                sites: max(1, options.sites), gatesPerSite: options.gatesPerSite, busyDoorIntervalMs: options.busyDoorIntervalMs,
                gateIntervalMs: options.gateIntervalMs, gateSpacingMeters: options.gateSpacingMeters, radio: options.radio)
        self.world = world
        var random = SimulationRandom(seed: options.seed, stream: 0xF1EE7)
        let visitors = Int((Double(options.devices) * options.visitorShare).rounded())
        var people: [Person] = []
        var profiles: [Int: PhoneProfile] = [:]
        for index in 0..<(options.devices + visitors) {
            var personRandom = SimulationRandom(seed: options.seed, stream: UInt64(index) &+ 0x1000)
            let kind: PersonKind
            if index >= options.devices {
                kind = .visitor
            } else {
                let r = random.unit()
                let shares: [(PersonKind, Double)] = [
                    (.walkPast, options.walkPastShare), (.gateStander, options.gateStanderShare), (.runner, options.runnerShare),
                    (.cyclist, options.cyclistShare), (.pavementStopper, options.pavementStopperShare),
                    (.doorwayLoiterer, options.doorwayLoitererShare),
                ]
                var cumulative = 0.0
                kind =
                    shares.first {
                        cumulative += $0.1; return r < cumulative
                    }?.0 ?? .employee
            }
            let siteIndex = index % world.sites.count
            let person =
                switch options.scheduleKind {
                case .workingDays:
                    ScheduleGenerator.person(
                        index: index, kind: kind, siteIndex: siteIndex, site: world.sites[siteIndex], start: options.start,
                        durationMs: options.startOffsetMs + options.durationMs, settings: options.schedule, random: &personRandom)
                case .morningRush:
                    ScheduleGenerator.rushPerson(
                        index: index, kind: kind, siteIndex: siteIndex, site: world.sites[siteIndex], start: options.simulationStart,
                        durationMs: options.durationMs, settings: options.schedule, rush: options.rush, random: &personRandom)
                }
            people.append(person)
            if person.hasDevice {
                profiles[index] = options.phones.profile(
                    start: options.simulationStart, durationMs: options.durationMs, random: &personRandom)
            }
        }
        self.people = people
        self.profiles = profiles
    }

    package var devicePeople: [Person] { people.filter(\.hasDevice) }
}

/// Runs every device of a plan in virtual time, as fast as the machine allows, against an
/// in-process server (detection-only mode: the scale and detection-quality figures).
package struct DetectionRun {
    package let plan: FleetPlan
    package let outboxDirectory: String
    package var parallelism = max(1, ProcessInfo.processInfo.activeProcessorCount)
    package var config: PresenceConfig

    package init(plan: FleetPlan, outboxDirectory: String) {
        self.plan = plan
        self.outboxDirectory = outboxDirectory
        config = plan.options.presenceConfig
    }

    package func run(server: InProcessServer, progress: (@Sendable (Int) -> Void)? = nil) async throws -> [DeviceResult] {
        try FileManager.default.createDirectory(atPath: outboxDirectory, withIntermediateDirectories: true)
        let people = plan.devicePeople
        let plan = self.plan
        let directory = outboxDirectory
        let config = self.config
        return try await withThrowingTaskGroup(of: [DeviceResult].self) { group in
            let chunk = (people.count + parallelism - 1) / max(parallelism, 1)
            for worker in 0..<parallelism {
                let slice = Array(people.dropFirst(worker * chunk).prefix(chunk))
                guard !slice.isEmpty else { continue }
                group.addTask {
                    var results: [DeviceResult] = []
                    for person in slice {
                        let path = "\(directory)/device-\(person.index).wal"
                        try? FileManager.default.removeItem(atPath: path)
                        var simulation = DeviceSimulation(
                            person: person, world: plan.world, profile: plan.profiles[person.index] ?? PhoneProfile(),
                            identity: DeviceIdentity(userId: "u_sim_\(person.index)", deviceId: "d_sim_\(person.index)"),
                            config: config, outboxPath: path, start: plan.options.simulationStart,
                            end: plan.options.simulationEnd, seed: plan.options.seed)
                        results.append(try await simulation.run(delivery: InProcessDelivery(server: server)))
                        try? FileManager.default.removeItem(atPath: path)
                        progress?(1)
                    }
                    return results
                }
            }
            var all: [DeviceResult] = []
            for try await part in group { all.append(contentsOf: part) }
            return all.sorted { $0.person < $1.person }
        }
    }
}

/// Where simulated outboxes go when only the simulation's speed matters: tmpfs when the machine has
/// one (the outbox code path and its fsyncs are the same; they just cost nothing there).
package enum ScratchDirectory {
    package static func fast(_ name: String) -> String {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        return base + "\(name)-\(ProcessInfo.processInfo.processIdentifier)"
    }
}
