import Foundation
import PresenceKit

/// An attendance event a device produced (written to its outbox), with the true time it was decided.
package struct PostedEvent: Sendable, Hashable, Codable {
    package var key: String
    package var kind: String
    package var siteId: String
    package var sessionKey: String
    package var reason: String
    /// The event's own time on the device's clock (session start, last presence, or emission).
    package var timestamp: Int64
    /// True virtual time the device decided it.
    package var decidedAt: Int64
    /// The gate whose beacon the event names (nil: a beacon of no simulated gate).
    package var gate: Int?
}

/// Everything one simulated phone did.
package struct DeviceResult: Sendable {
    package var person: Int
    package var userId: String
    package var deviceId: String
    package var posted: [PostedEvent] = []
    package var deliveries: [DeliveryRecord] = []
    package var attempts = AttemptLog()
    /// Outbox entries still waiting at the end (must be 0 after the final sync).
    package var undelivered = 0
    package var launches = 0
    package var outboxBytes: Int64 = 0
    /// Telemetry records the server took, and those still pending at the end.
    package var telemetryUploaded = 0
    package var telemetryPending = 0
}

/// Waits for the wall clock in runs against the real stack (the simulation's time never ahead of it).
package protocol VirtualPacer: Sendable {
    func waitUntil(virtual t: Int64) async
}

/// One phone running PresenceKit in the simulated world, on virtual time: the OS side (region and
/// geofence monitoring with their delays, ranging callbacks at 1 Hz, motion, app termination and
/// relaunch, reboot), the app side (a `PresenceAgent`, its outbox on disk, draining it within the
/// background budget when the network allows), all driven by the person's itinerary.
///
/// Deterministic for a given seed with `InProcessDelivery`; the time steps are 1 s near a beacon and
/// jumps to the next thing that can happen elsewhere.
package struct DeviceSimulation: Sendable {
    package let person: Person
    package let world: World
    package let profile: PhoneProfile
    package let identity: DeviceIdentity
    package let config: PresenceConfig
    /// The sites the phone knows (geofences and check-in points): the world's, or what it was served.
    package let directory: SiteDirectory
    package let outboxPath: String
    package let start: Int64
    package let end: Int64
    var random: SimulationRandom

    /// The background execution the OS grants per wake (about 10 s).
    package static let backgroundBudgetMs: Int64 = RetryPolicy.backgroundBudgetMs
    /// The continuous-scan app's background fetch interval (15 min).
    package static let periodicWakeMs: Int64 = 15 * 60_000
    /// Rest shorter than this is not reported by the motion coprocessor.
    package static let stillnessNoticedMs: Int64 = 4_000
    /// iOS reports a beacon region exit about 30 s after the last packet.
    package static let regionExitDelayMs: Int64 = 30_000

    package init(
        person: Person, world: World, profile: PhoneProfile, identity: DeviceIdentity, config: PresenceConfig,
        directory: SiteDirectory? = nil, outboxPath: String, start: Int64, end: Int64, seed: UInt64
    ) {
        self.person = person
        self.world = world
        self.profile = profile
        self.identity = identity
        self.config = config
        self.directory = directory ?? world.directory
        self.outboxPath = outboxPath
        self.start = start
        self.end = end
        random = SimulationRandom(seed: seed, stream: UInt64(person.index) &+ 1)
    }

    enum AppState { case running, terminated, forceQuit, rebooting }

    enum OSEvent {
        case regionEntered, regionExited, regionState, geofenceEntered, geofenceExited, motion(MotionActivity), gattResult
    }

    struct Pending {
        var at: Int64
        var event: OSEvent
    }

    /// Runs the whole itinerary; `finalSync` opens the app online at the end so the outbox drains
    /// completely (the report's lost / undelivered figures are measured after it).
    package mutating func run(
        delivery: some DeliveryDriver, pacer: (any VirtualPacer)? = nil, finalSync: Bool = true
    ) async throws -> DeviceResult {
        var result = DeviceResult(person: person.index, userId: identity.userId ?? "", deviceId: identity.deviceId)
        let site = world.sites[person.siteIndex]
        // The outbox stamps entries with the phone's (skewed) clock at the current virtual time.
        let outboxClock = ManualClock(Timestamp(millisecondsSinceEpoch: start + profile.clockSkewMs))
        let outbox = try Outbox(path: outboxPath, clock: outboxClock)
        defer { outbox.close() }
        var channel = RadioChannel(site: site, radio: world.radio, phoneLossDb: profile.phoneLossDb, random: &random)
        let skew = profile.clockSkewMs
        // How far the phone's wall clock was set so far, and how far when the app last launched: the app's
        // steady clock starts at the wall clock's reading then, and the machine runs on it. What the app
        // stamps with is the server's clock, learnt from the answers' `Date` headers since the launch.
        var wallShift: Int64 = 0
        var launchShift: Int64 = 0
        var jumpIndex = 0
        var serverClock = ServerClock()
        func deviceTime(_ t: Int64) -> Timestamp { Timestamp(millisecondsSinceEpoch: t + skew + launchShift) }
        /// How far the phone's wall clock reads ahead of the app's steady clock.
        func wallOffset() -> Int64 { wallShift - launchShift }

        var agent: PresenceAgent?
        var appState = AppState.running
        var rebootUntil: Int64 = 0
        /// The phone rebooted since the app last ran: its next launch says so (`appLaunchedAfterDeviceRestart`).
        var rebootedSinceLaunch = false
        var scanning = false
        var pending: [Pending] = []
        var regionOS = false
        var geofenceOS = false
        var walkingOS = false
        var activityOS = MotionActivity.stationary
        var nextStepsAt: Int64 = 0
        var nextWake = start + Self.periodicWakeMs
        var lifecycleIndex = 0
        var lastNetwork = profile.network(at: start)
        var drainWanted = false
        var hint = 0
        var seedCounter: UInt64 = 0
        // The app's telemetry (uploaded after each drain) and the battery it reports.
        // One recorder for the whole simulated stay (it outlives the app's relaunches), so a fixed launch
        // id keeps its record ids unique and the run reproducible.
        var telemetry = TelemetryRecorder(installId: (UInt64(person.index) &* 0x9E37_79B9_7F4A_7C15) ^ start.magnitude, launchId: 0)
        var scanningMs: Int64 = 0
        func batteryLevel(at t: Int64) -> Double {
            let hours = Double(t - start) / 3_600_000, scanHours = Double(scanningMs) / 3_600_000
            return profile.batteryStartLevel - (profile.idleDrainPercentPerHour * hours + profile.scanDrainPercentPerHour * scanHours) / 100
        }

        // FLEET_TRACE_PERSON=<index> prints what this person's phone hears and decides (debugging).
        let tracing = ProcessInfo.processInfo.environment["FLEET_TRACE_PERSON"].flatMap(Int.init) == person.index

        // The sites as the phone last fetched them: a relaunch builds its machine on them.
        var currentDirectory = directory
        func makeAgent(at t: Int64) throws -> PresenceAgent {
            seedCounter += 1
            let machine = try PresenceStateMachine(
                config: config, directory: currentDirectory, identity: identity,
                seed: random.generator.next() ^ seedCounter, restoring: outbox.lastSnapshot(), clockOffsetMs: wallOffset())
            return PresenceAgent(machine: machine)
        }

        // Learns the server's clock from answers (true times on the steady clock) and tells the machine.
        func learn(_ dates: [ServerDate], at t: Int64) throws {
            for date in dates {
                guard let header = Timestamp(httpDate: date.header) else { continue }
                serverClock.record(serverDate: header, sentAt: deviceTime(date.sentAt), answeredAt: deviceTime(date.answeredAt))
            }
            try tellClock(at: t)
        }

        // Tells the machine (and the telemetry recorder) the clock to stamp with when it moved
        // (`PresenceStateMachine.clockEvent`), or, with `again`, the server's even if it did not: what is
        // still marked gets corrected.
        func tellClock(at t: Int64, again: Bool = false) throws {
            guard let machine = agent?.machine else { return }
            let offset = serverClock.offsetMs, ahead = serverClock.phoneAheadMs(wallClockOffsetMs: wallOffset())
            let event: PresenceEvent
            if again, let offset, let ahead {
                event = .serverClockKnown(offsetMs: offset, phoneAheadMs: ahead)
            } else {
                guard let owed = machine.clockEvent(serverOffsetMs: offset, phoneAheadMs: ahead, wallClockOffsetMs: wallOffset())
                else { return }
                event = owed
            }
            telemetry.observe(event, at: deviceTime(t))
            try apply(agent!.handle(event, at: deviceTime(t), storingIn: outbox), at: t)
        }

        // Acts on a batch of effects the agent has stored in the outbox (`storingIn:`).
        func apply(_ effects: [PresenceEffect], at t: Int64) throws {
            guard !effects.isEmpty else { return }
            if tracing {
                for e in effects {
                    switch e {
                    case .postCheckIn(let a), .postCheckOut(let a), .postHeartbeat(let a):
                        print("# \(t) post \(a.type.rawValue) \(a.reason.rawValue)")
                    case .log(_, let m): print("# \(t) log \(m)")
                    case .persistSnapshot: break
                    default: print("# \(t) \(e)")
                    }
                }
            }
            telemetry.observe(effects, at: deviceTime(t))
            for effect in effects {
                switch effect {
                case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e):
                    result.posted.append(
                        PostedEvent(
                            key: e.idempotencyKey.hex, kind: e.type.rawValue, siteId: e.siteId, sessionKey: e.sessionKey,
                            reason: e.reason.rawValue, timestamp: e.timestamp.millisecondsSinceEpoch, decidedAt: t,
                            gate: site.beacons.first { $0.identity == e.beacon }?.gateIndex))
                    if case .offline = profile.network(at: t) { telemetry.recordOfflineEnqueue(backlog: outbox.count, at: deviceTime(t)) }
                    drainWanted = true
                case .requestRegionState: pending.append(Pending(at: t + 500, event: .regionState))
                case .performGattChallenge: pending.append(Pending(at: t + Int64(random.int(150...600)), event: .gattResult))
                case .drainOutbox: drainWanted = true
                default: break
                }
            }
            // Both scan modes feed the same 1 Hz callbacks here.
            scanning = (agent?.machine.continuousScanActive ?? false) || (agent?.machine.rangingActive ?? false)
        }

        // The app's request for its pending state: at launch and, until an answer of this process has
        // told the server's clock, whenever the network changes and at every periodic wake.
        func askServer(at t: Int64, network: PhoneProfile? = nil) async throws {
            var answers = AttemptLog()
            await delivery.launchRequest(device: identity, profile: network ?? profile, at: t, answers: &answers)
            try learn(answers.serverDates, at: t)
        }

        // The drainer never sends an entry stamped with the phone's clock: before a drain that would meet
        // one, the app asks the server's clock, or, knowing it, has the entries corrected.
        func prepareDrain(at t: Int64, network: PhoneProfile? = nil) async throws {
            guard outbox.hasPhoneClockStamps else { return }
            if serverClock.offsetMs == nil { try await askServer(at: t, network: network) } else { try tellClock(at: t, again: true) }
        }

        func launch(at t: Int64) async throws {
            launchShift = wallShift
            serverClock = ServerClock()
            try await askServer(at: t)
            agent = try makeAgent(at: t)
            // One recorder across the stay's launches: a relaunch restarts its steady clock, it sets no clock.
            telemetry.relaunched(clockOffsetMs: wallOffset())
            try tellClock(at: t)
            appState = .running
            scanning = false
            result.launches += 1
            telemetry.recordBattery(level: batteryLevel(at: t), at: deviceTime(t))
            let launched: PresenceEvent = rebootedSinceLaunch ? .appLaunchedAfterDeviceRestart : .appLaunched
            rebootedSinceLaunch = false
            try apply(agent!.handle(launched, at: deviceTime(t), storingIn: outbox), at: t)
            if case .offline = profile.network(at: t) {
                try apply(agent!.handle(.connectivityChanged(online: false), at: deviceTime(t), storingIn: outbox), at: t)
            }
            if walkingOS { try apply(agent!.handle(.motionActivity(activityOS), at: deviceTime(t), storingIn: outbox), at: t) }
        }

        func terminate(at t: Int64, forceQuit: Bool) throws {
            guard var a = agent else { return }
            try apply(a.handle(.appTerminated(forceQuit: forceQuit), at: deviceTime(t), storingIn: outbox), at: t)
            agent = nil
            scanning = false
        }

        // A drain's answers: the server's clock they tell, the report's status mix, and every attempt's
        // outcome as the app's telemetry (`api_201`, `api_timeout`, ...).
        func take(_ log: AttemptLog, at t: Int64) throws {
            try learn(log.serverDates, at: t)
            var counted = log
            counted.serverDates = []
            result.attempts.merge(counted)
            for (label, n) in log.statuses.sorted(by: { $0.key < $1.key }) {
                let outcome: DeliveryResult? =
                    if let status = Int(label) { .response(status: status) } else if label == "timeout" { .timeout } else { nil }
                guard let outcome else { continue }
                for _ in 0..<n { telemetry.recordAttempt(outcome, at: deviceTime(t)) }
            }
        }

        func drain(at t: Int64, budget: Int64?) async throws {
            drainWanted = false
            if case .offline = profile.network(at: t) { return } // reachability: no route, no attempt
            try await prepareDrain(at: t)
            // A drain held at a marked entry (the clock still unknown) sends nothing from there on; when the
            // answers of what it did send told the clock, the entries are corrected and it goes on once,
            // from where it stopped, within what is left of its budget.
            var sending = false
            var at = t
            var remaining = budget
            for pass in 0..<2 {
                guard outbox.first().map({ !$0.stampedWithPhoneClock }) == true else { break }
                sending = true
                var log = AttemptLog()
                let records = try await delivery.drain(
                    outbox: outbox, device: identity, profile: profile, at: at, budgetMs: remaining, random: &random, attempts: &log)
                try take(log, at: at)
                result.deliveries.append(contentsOf: records)
                if !records.isEmpty { telemetry.recordOutboxSent(backlog: outbox.count, at: deviceTime(at)) }
                guard outbox.first()?.stampedWithPhoneClock == true else {
                    if budget != nil && !outbox.isEmpty { telemetry.recordBackgroundTimeout(at: deviceTime(at)) }
                    break
                }
                let ended = records.map(\.verdictAt).max() ?? at
                remaining = budget.map { $0 - (ended - t) }
                guard pass == 0, serverClock.offsetMs != nil, (remaining ?? 1) > 0 else { break }
                at = ended
                try tellClock(at: at, again: true)
            }
            // Telemetry rides along with attendance sends (one radio wake-up), or goes alone once it piles up.
            if sending || telemetry.pending.count >= 100 { try await uploadTelemetry(at: t, finalSync: budget == nil) }
        }

        func uploadTelemetry(at t: Int64, finalSync: Bool) async throws {
            guard !telemetry.pending.isEmpty else { return }
            telemetry.recordBattery(level: batteryLevel(at: t), at: deviceTime(t))
            let taken = await delivery.uploadTelemetry(
                telemetry.pending, device: identity, siteId: site.id, profile: profile, at: t, finalSync: finalSync)
            telemetry.acknowledge(taken)
            result.telemetryUploaded += taken
        }

        try await launch(at: start)
        var t = start
        while t < end {
            if let pacer { await pacer.waitUntil(virtual: t) }
            outboxClock.advance(to: deviceTime(t))

            // The app process: scheduled troubles.
            while lifecycleIndex < profile.lifecycle.count && profile.lifecycle[lifecycleIndex].at <= t {
                let event = profile.lifecycle[lifecycleIndex].event
                lifecycleIndex += 1
                switch event {
                case .terminated:
                    if appState == .running { try terminate(at: t, forceQuit: false); appState = .terminated }
                case .forceQuit:
                    if appState == .running { try terminate(at: t, forceQuit: true); appState = .forceQuit }
                case .reboot:
                    if appState == .running { try terminate(at: t, forceQuit: false) }
                    appState = .rebooting
                    rebootUntil = t + 60_000
                    rebootedSinceLaunch = true
                    regionOS = false
                    pending.removeAll()
                case .userOpens:
                    if appState != .running && appState != .rebooting { try await launch(at: t) }
                }
            }
            while jumpIndex < profile.wallClockJumps.count && profile.wallClockJumps[jumpIndex].at <= t {
                wallShift += profile.wallClockJumps[jumpIndex].byMs
                jumpIndex += 1
                try learn([], at: t)
            }
            if appState == .rebooting && t >= rebootUntil {
                appState = .terminated
                // After boot the OS evaluates the monitored geofences again and wakes the app.
                if geofenceOS { pending.append(Pending(at: t + 5_000, event: .geofenceEntered)) }
            }

            // The world around the phone.
            hint = person.itinerary.segmentIndex(at: t, hint: hint)
            let here = person.itinerary.whereabouts(at: t, hint: hint)
            var ranged: [RangedBeacon] = []
            let audible = channel.anyBeaconAudible(from: here.position)
            if audible || regionOS {
                ranged = channel.listen(at: t, here: here, random: &random)
                if profile.inSignalGap(at: t) {
                    ranged = ranged.map { RangedBeacon(beaconIndex: $0.beaconIndex, rssi: 0, packetsHeard: 0) }
                }
            }
            if appState != .rebooting {
                let heardNow = ranged.contains { $0.packetsHeard > 0 }
                if !regionOS && heardNow {
                    regionOS = true
                    pending.append(Pending(at: t + Int64(random.uniform(1_000...5_000)), event: .regionEntered))
                } else if regionOS && t - channel.lastHeardAnyAt >= Self.regionExitDelayMs {
                    regionOS = false
                    pending.append(Pending(at: t + Int64(random.uniform(0...5_000)), event: .regionExited))
                }
                let distance = here.position.distance(to: Point(x: 0, y: 0))
                if !geofenceOS && distance <= site.geofenceRadiusMeters {
                    geofenceOS = true
                    // A crossing is reported 3-20 s late; a phone already inside when the run starts gets the
                    // OS's answer to the app's state request at launch, within a second.
                    let delay = t == start ? random.uniform(0...1_000) : random.uniform(3_000...20_000)
                    pending.append(Pending(at: t + Int64(delay), event: .geofenceEntered))
                } else if geofenceOS && distance > site.geofenceRadiusMeters + 50 {
                    geofenceOS = false
                    pending.append(Pending(at: t + Int64(random.uniform(3_000...20_000)), event: .geofenceExited))
                }
                // The motion coprocessor reports rest only after a few seconds of it: a shorter pause (a
                // door held open) goes unreported.
                let segment = person.itinerary.segments[hint]
                let briefPause = !here.walking && walkingOS && segment.end - t < Self.stillnessNoticedMs
                if !briefPause && (here.walking != walkingOS || (here.walking && here.activity != activityOS)) {
                    walkingOS = here.walking
                    activityOS = here.activity
                    pending.append(Pending(at: t + Int64(random.uniform(2_000...5_000)), event: .motion(here.activity)))
                    if here.walking { nextStepsAt = t + 10_000 }
                }
            }

            // OS events that are due, in time order; a region or geofence event relaunches the app.
            pending.sort { $0.at < $1.at }
            while let first = pending.first, first.at <= t {
                pending.removeFirst()
                let event: PresenceEvent
                var relaunches = false
                switch first.event {
                case .regionEntered: event = .beaconRegionEntered; relaunches = appState == .terminated
                case .regionExited: event = .beaconRegionExited; relaunches = appState == .terminated
                case .regionState: event = .beaconRegionState(inside: regionOS)
                case .geofenceEntered:
                    event = .geofenceEntered(siteId: site.id); relaunches = appState == .terminated || appState == .forceQuit
                case .geofenceExited:
                    event = .geofenceExited(siteId: site.id); relaunches = appState == .terminated || appState == .forceQuit
                case .motion(let activity): event = .motionActivity(activity)
                case .gattResult: event = .gattChallengeResult(ok: true, roundTripMs: 200)
                }
                if tracing { print("# \(t) os \(event)") }
                if agent == nil && relaunches { try await launch(at: t) }
                guard agent != nil else { continue }
                telemetry.observe(event, at: deviceTime(t))
                try apply(agent!.handle(event, at: deviceTime(t), storingIn: outbox), at: t)
                if case .regionEntered = first.event { drainWanted = true }
                if case .geofenceEntered = first.event { drainWanted = true }
            }

            if agent != nil {
                try apply(agent!.advance(to: deviceTime(t), storingIn: outbox), at: t)
                if scanning {
                    for entry in ranged {
                        let reading = BeaconReading(beacon: site.beacons[entry.beaconIndex].identity, rssi: entry.rssi)
                        if tracing { print("\(t),rssi,\(reading.beacon.beaconId),\(reading.rssi),\(here.position.x),\(here.position.y)") }
                        try apply(agent!.handle(.beaconReading(reading), at: deviceTime(t), storingIn: outbox), at: t)
                    }
                }
                if walkingOS && t >= nextStepsAt {
                    // The pedometer counts walking and running, not pedalling.
                    if activityOS != .cycling {
                        try apply(agent!.handle(.steps(activityOS == .running ? 28 : 18), at: deviceTime(t), storingIn: outbox), at: t)
                    }
                    nextStepsAt = t + 10_000
                }
                let network = profile.network(at: t)
                if network != lastNetwork {
                    let online: Bool = if case .offline = network { false } else { true }
                    let wasOnline: Bool = if case .offline = lastNetwork { false } else { true }
                    lastNetwork = network
                    if online != wasOnline {
                        try apply(agent!.handle(.connectivityChanged(online: online), at: deviceTime(t), storingIn: outbox), at: t)
                    }
                    if serverClock.offsetMs == nil, case .online = network { try await askServer(at: t) }
                }
                if t >= nextWake {
                    nextWake = t + Self.periodicWakeMs
                    try apply(agent!.handle(.periodicWake, at: deviceTime(t), storingIn: outbox), at: t)
                    // The app asks for its configuration again (a 304 while nothing changed) and puts a
                    // changed one in force without a relaunch.
                    if let newer = await delivery.refreshedDirectory(device: identity, profile: profile, at: t) {
                        currentDirectory = newer
                        try apply(agent!.replace(directory: newer, at: deviceTime(t), storingIn: outbox), at: t)
                    }
                    if !outbox.isEmpty { drainWanted = true }
                    if serverClock.offsetMs == nil, case .online = network { try await askServer(at: t) }
                }
                if drainWanted { try await drain(at: t, budget: Self.backgroundBudgetMs) }
            } else {
                lastNetwork = profile.network(at: t)
            }

            // Next step: every second near a beacon, else the next moment anything can change.
            var next = end
            if audible || (regionOS && t - channel.lastHeardAnyAt < 5_000) {
                next = t + 1_000
            } else {
                if here.walking { next = min(next, t + 5_000) }
                if regionOS { next = min(next, max(t + 1_000, channel.lastHeardAnyAt + Self.regionExitDelayMs)) }
                if let b = person.itinerary.nextBoundary(after: t, hint: hint) { next = min(next, b) }
                if let first = pending.min(by: { $0.at < $1.at }) { next = min(next, max(first.at, t + 1)) }
                if let d = agent?.nextDeadline { next = min(next, max(d.millisecondsSinceEpoch - skew - launchShift, t + 1)) }
                if lifecycleIndex < profile.lifecycle.count { next = min(next, max(profile.lifecycle[lifecycleIndex].at, t + 1)) }
                if jumpIndex < profile.wallClockJumps.count { next = min(next, max(profile.wallClockJumps[jumpIndex].at, t + 1)) }
                if let c = profile.nextNetworkChange(after: t) { next = min(next, c) }
                if agent != nil { next = min(next, nextWake) }
                if appState == .rebooting { next = min(next, rebootUntil) }
            }
            let stepEnd = max(next, t + 1)
            if scanning { scanningMs += stepEnd - t }
            t = stepEnd
        }

        if finalSync {
            // The end of the run: the user opens the app on a working network.
            if agent == nil { try await launch(at: end) }
            var syncAt = max(end, profile.networkWindows.map(\.to).max() ?? end)
            let working = PhoneProfile(latencyMs: min(profile.latencyMs, 250))
            for _ in 0..<5 where !outbox.isEmpty {
                try await prepareDrain(at: syncAt, network: working)
                var log = AttemptLog()
                let records = try await delivery.drain(
                    outbox: outbox, device: identity, profile: working, at: syncAt, budgetMs: nil, random: &random, attempts: &log)
                try take(log, at: syncAt)
                result.deliveries.append(contentsOf: records)
                syncAt += 60_000
            }
            try await uploadTelemetry(at: syncAt, finalSync: true)
        }
        result.undelivered = outbox.count
        result.telemetryPending = telemetry.pending.count
        result.outboxBytes = outbox.fileSize
        return result
    }
}
