import PresenceKit

/// What the network does to a request at some moment.
package enum NetworkCondition: Sendable, Hashable, Codable {
    /// Reachable, each request taking `latencyMs` (2G: 600-2,500 ms).
    case online(latencyMs: Int)
    /// No route at all.
    case offline
    /// A captive portal answers every request itself (200 or 302 with an HTML login page).
    case captivePortal
}

/// A period of a network condition other than the phone's normal one.
package struct NetworkWindow: Sendable, Hashable, Codable {
    package var from: Int64
    package var to: Int64
    package var condition: NetworkCondition
}

/// Things that happen to the app process.
package enum LifecycleEvent: String, Sendable, Hashable, Codable {
    /// The OS ends the app in the background; any region or geofence event relaunches it.
    case terminated
    /// The user swipes the app away: iOS no longer relaunches it for beacon regions, only for
    /// geofence / significant-change events, or when the user opens it.
    case forceQuit = "force_quit"
    /// The phone restarts (about a minute); the first region or geofence event after it relaunches the app.
    case reboot
    /// The user opens the app.
    case userOpens = "user_opens"
}

package struct ScheduledLifecycle: Sendable, Hashable, Codable {
    package var at: Int64
    package var event: LifecycleEvent
}

/// The phone's wall clock is set to another time at `at` (a network time correction, the user setting it
/// by hand): from then on it reads `byMs` later (earlier, when negative) than before. Time itself, and
/// the phone's steady clock, go on as they were.
package struct WallClockJump: Sendable, Hashable, Codable {
    package var at: Int64
    package var byMs: Int64
}

/// One phone's circumstances for the whole run.
package struct PhoneProfile: Sendable, Hashable, Codable {
    /// Normal request latency, ms.
    package var latencyMs: Int
    package var networkWindows: [NetworkWindow]
    package var lifecycle: [ScheduledLifecycle]
    /// The phone's clock minus true time, ms (its events carry its clock).
    package var clockSkewMs: Int64
    /// Moments its wall clock is set to another time, in time order.
    package var wallClockJumps: [WallClockJump] = []
    /// Extra radio loss of this phone (bag, pocket, case), dB.
    package var phoneLossDb: Double
    package var model: String
    /// Moments the radio hears nothing at all (a crowd in between, the phone in a metal locker).
    package var signalGaps: [NetworkWindow] = []
    /// The battery: level at the start (0...1), drain per hour while idle and extra drain per hour
    /// while scanning (percentage points).
    package var batteryStartLevel = 0.8
    package var idleDrainPercentPerHour = 1.0
    package var scanDrainPercentPerHour = 3.0

    package init(
        latencyMs: Int = 80, networkWindows: [NetworkWindow] = [], lifecycle: [ScheduledLifecycle] = [], clockSkewMs: Int64 = 0,
        phoneLossDb: Double = 0, model: String = "iPhone14,5"
    ) {
        self.latencyMs = latencyMs
        self.networkWindows = networkWindows
        self.lifecycle = lifecycle
        self.clockSkewMs = clockSkewMs
        self.phoneLossDb = phoneLossDb
        self.model = model
    }

    package func inSignalGap(at t: Int64) -> Bool {
        signalGaps.contains { t >= $0.from && t < $0.to }
    }

    package func network(at t: Int64) -> NetworkCondition {
        for w in networkWindows where t >= w.from && t < w.to { return w.condition }
        return .online(latencyMs: latencyMs)
    }

    /// The next moment after `t` when the network condition may change.
    package func nextNetworkChange(after t: Int64) -> Int64? {
        var best: Int64?
        for w in networkWindows {
            for edge in [w.from, w.to] where edge > t { best = min(best ?? edge, edge) }
        }
        return best
    }
}

/// How often the QA matrix's phone troubles occur in a fleet run.
package struct PhoneMix: Sendable, Hashable, Codable {
    /// Share of phones on 2G (600-2,500 ms per request).
    package var slowNetwork = 0.05
    /// Share of phones with an offline period, and how long it lasts (seconds).
    package var offline = 0.05
    package var offlineSeconds: ClosedRange<Double> = 3_600...(72 * 3_600)
    /// Share of phones behind a captive portal, and for how long (seconds).
    package var captivePortal = 0.03
    package var captivePortalSeconds: ClosedRange<Double> = 600...3_600
    /// Shares of phones whose app is terminated by the OS / force-quit / rebooted once in the run.
    package var terminated = 0.05
    package var forceQuit = 0.02
    package var reboot = 0.02
    /// Clock skew range, seconds (most phones are within a second; a few drift).
    package var maxClockSkewSeconds = 30.0
    /// Each phone's extra radio loss, dB (a case, a bag, a pocket; negative: a phone that reads hot).
    package var phoneLossDb: ClosedRange<Double> = 0...4

    package init() {}

    /// The troubles of a morning rush (`ScheduleKind.morningRush`), scaled to a run of minutes: a few
    /// phones offline for 10-40 s (a lift, a basement car park), captive portals for 10-30 s, slow
    /// networks and clock skew as over days. No app termination, force-quit or reboot: their shares are
    /// per day, and one falling in the minute of a phone's approach would be a miss by construction (a
    /// terminated app is relaunched only by the next region or geofence event); the working-days world
    /// keeps them at their daily rate.
    package static let rush: PhoneMix = {
        var m = PhoneMix()
        m.offline = 0.03
        m.offlineSeconds = 10...40
        m.captivePortalSeconds = 10...30
        m.terminated = 0
        m.forceQuit = 0
        m.reboot = 0
        return m
    }()

    package static let quiet: PhoneMix = {
        var m = PhoneMix()
        m.slowNetwork = 0; m.offline = 0; m.captivePortal = 0; m.terminated = 0; m.forceQuit = 0; m.reboot = 0; m.maxClockSkewSeconds = 0
        return m
    }()

    package func profile(start: Int64, durationMs: Int64, random: inout SimulationRandom) -> PhoneProfile {
        var p = PhoneProfile()
        p.latencyMs = random.chance(slowNetwork) ? random.int(600...2_500) : random.int(30...250)
        let end = start + durationMs
        // Troubles end before the run does, leaving the phone time to catch up.
        let lastEnd = end - min(60_000, durationMs / 10)
        if random.chance(offline) {
            let length = Int64(random.uniform(offlineSeconds) * 1000)
            let from = start + Int64(random.uniform(0...max(0, Double(durationMs - length) * 0.8)))
            if lastEnd > from { p.networkWindows.append(NetworkWindow(from: from, to: min(from + length, lastEnd), condition: .offline)) }
        }
        if random.chance(captivePortal) {
            let from = start + Int64(random.uniform(0...Double(durationMs) * 0.8))
            let to = min(from + Int64(random.uniform(captivePortalSeconds) * 1000), lastEnd)
            if to > from { p.networkWindows.append(NetworkWindow(from: from, to: to, condition: .captivePortal)) }
        }
        for (share, event) in [(terminated, LifecycleEvent.terminated), (forceQuit, .forceQuit), (reboot, .reboot)]
        where random.chance(share) {
            p.lifecycle.append(ScheduledLifecycle(at: start + Int64(random.uniform(0...Double(durationMs) * 0.9)), event: event))
        }
        p.lifecycle.sort { $0.at < $1.at }
        let skew = random.chance(0.9) ? random.uniform(-1...1) : random.uniform(-maxClockSkewSeconds...maxClockSkewSeconds)
        p.clockSkewMs = Int64(skew * 1000)
        p.phoneLossDb = random.uniform(phoneLossDb)
        p.model = random.chance(0.5) ? "iPhone14,5" : "iPhone15,2"
        p.batteryStartLevel = random.uniform(0.3...1)
        p.idleDrainPercentPerHour = random.uniform(0.5...1.5)
        p.scanDrainPercentPerHour = random.uniform(2...4)
        return p
    }
}
