// PresenceStateMachine: one model for three vocabularies.
//
// The same walk-in / walk-out problem is described with three vocabularies: a no-loss flow built on
// region monitoring, a beacon-loss state machine and a continuous-scan app. PresenceKit keeps two
// things apart that they mix: the *detection phase* of the device (this machine) and the *delivery
// state* of each attendance event it produces (the outbox). Mapping:
//
// | PresenceKit phase  | no-loss flow (region monitoring)    | beacon-loss state machine         | continuous-scan app state           |
// |--------------------|-------------------------------------|-----------------------------------|-------------------------------------|
// | idle               | Idle                                | (before ENTER) / after EXIT       | OUTSIDE                             |
// | armed              | Armed (geofence / SLC)              | (after EXIT, still in geofence)   | INSIDE_AREA                         |
// | candidate          | Candidate (iBeacon enter, ranging)  | ENTER                             | INSIDE_AREA (scanning, not > -70)   |
// | verifying          | Candidate → [optional GATT]         | ENTER                             | —                                   |
// | present            | Confirmed (+ check-in effect)       | INSIDE                            | PRESENT                             |
// | softExitPending    | — (hysteresis)                      | SOFT_EXIT_PENDING (grace)         | UNCONFIRMED (3-minute debounce)     |
// | confirmingExit     | —                                   | SOFT_EXIT_PENDING (requestState)  | UNCONFIRMED (debounce expired)      |
// | check-out effect → | —                                   | EXIT                              | INSIDE_AREA (+ exit API on geofence |
// |   armed / idle     |                                     |                                   |   exit → OUTSIDE)                   |
//
// | Outbox entry state   | no-loss flow                                         |
// |----------------------|------------------------------------------------------|
// | pending              | Confirmed → WAL write; Outbox (network fail)         |
// | sentAwaitingVerdict  | Posted (request sent, no final verdict yet)          |
// | done (entry removed) | Synced (201/200, or final 409/422/400)               |
//
// The no-loss flow's Candidate → Idle on "timeout/hysteresis fail" is candidate → armed/idle when the
// ranging window times out. The continuous-scan app's periodic fallback is `.periodicWake`, skipped while
// continuous scanning runs. That app posts the exit on geofence exit and only *notifies* when the
// 3-minute debounce ends: that is `CheckOutTrigger.geofenceExit`; the beacon-loss state machine checks
// out after grace + confirmation: that is `CheckOutTrigger.beaconLoss`. The default is `.geofenceExit`
// (chosen on the detection sweep). README.md repeats this table.
//
// Thresholds: a session starts when the nearest beacon's last `minReadings` readings have a median
// above `enterRssi` (-65) and a standard deviation below `maxStdDevDb`, or when a median above
// `dwellEnterRssi` (-85) is followed within `dwellWindowMs` by the device coming to rest (dwell
// confirmation, see `confirmDwell`); with `enterHoldMs` set, strong evidence (under `enterAtOnceRssi`,
// when that is set) must pass at every reading for that long first, and the check-in is stamped with its
// first moment; present turns into a soft exit
// when the smoothed RSSI of every beacon of the site is at or below `leaveRssi` (-75), when the site is
// silent for `signalLossMs` while scanning continuously, or on a region exit; a soft exit resumes as
// soon as the site is heard above `leaveRssi` again (see `tryRecover` for why not `enterRssi`).

/// Detection phase of a device. See the mapping table at the top of this file.
public enum PresencePhase: String, Sendable, Hashable, Codable, CaseIterable {
    case idle, armed, candidate, verifying, present, softExitPending, confirmingExit
}

/// Who the device belongs to. `userId` is the *persisted* user id: without it attendance effects are
/// skipped with a warning.
public struct DeviceIdentity: Sendable, Hashable {
    public var userId: String?
    public var deviceId: String

    public init(userId: String?, deviceId: String) {
        self.userId = userId
        self.deviceId = deviceId
    }
}

/// Up to four site indices the device is inside (overlapping geofences of neighbouring sites), inline.
struct InsideSites: Sendable, Hashable {
    var a: Int32 = -1, b: Int32 = -1, c: Int32 = -1, d: Int32 = -1

    var isEmpty: Bool { a < 0 && b < 0 && c < 0 && d < 0 }

    func contains(_ i: Int32) -> Bool { i >= 0 && (a == i || b == i || c == i || d == i) }

    var all: [Int32] { [a, b, c, d].filter { $0 >= 0 } }

    mutating func insert(_ i: Int32) {
        guard !contains(i) else { return }
        if a < 0 {
            a = i
        } else if b < 0 {
            b = i
        } else if c < 0 {
            c = i
        } else if d < 0 {
            d = i
        } else {
            // More than four overlapping geofences: forget the oldest entry.
            a = b; b = c; c = d; d = i
        }
    }

    mutating func remove(_ i: Int32) {
        if a == i { a = -1 }
        if b == i { b = -1 }
        if c == i { c = -1 }
        if d == i { d = -1 }
    }
}

/// Deadline of every timer the machine has scheduled, so a stale or early `.timerFired` is ignored.
struct TimerDeadlines: Sendable, Hashable {
    static let unset = Int64.min
    var values: (Int64, Int64, Int64, Int64, Int64, Int64) = (unset, unset, unset, unset, unset, unset)

    static func == (l: TimerDeadlines, r: TimerDeadlines) -> Bool { l.values == r.values }
    func hash(into h: inout Hasher) { h.combine(values.0); h.combine(values.1) }

    subscript(id: TimerID) -> Timestamp? {
        get {
            let v: Int64
            switch id {
            case .rangingWindow: v = values.0
            case .softExitGrace: v = values.1
            case .exitConfirmation: v = values.2
            case .signalWatchdog: v = values.3
            case .heartbeat: v = values.4
            case .gattTimeout: v = values.5
            }
            return v == TimerDeadlines.unset ? nil : Timestamp(millisecondsSinceEpoch: v)
        }
        set {
            let v = newValue?.millisecondsSinceEpoch ?? TimerDeadlines.unset
            switch id {
            case .rangingWindow: values.0 = v
            case .softExitGrace: values.1 = v
            case .exitConfirmation: values.2 = v
            case .signalWatchdog: values.3 = v
            case .heartbeat: values.4 = v
            case .gattTimeout: values.5 = v
            }
        }
    }
}

/// The open attendance session (cold data; the per-sample fields live directly in the machine).
struct OpenSession: Sendable, Hashable {
    var siteId: String
    var beacon: BeaconIdentity
    /// Steady time of the start (for durations).
    var tStart: Timestamp
    /// The start as the check-in stamped it: every event of the session carries this one.
    var stampedStart: Timestamp
    /// `stampedStart` is the phone's own clock (corrected at `.serverClockKnown`).
    var startOnPhoneClock: Bool
    var key: String
    var userId: String?
    /// The enrollment the session's events are sent under (the device id when it opened): the phone may be
    /// enrolled anew for the next person before the session's check-out goes.
    var deviceId: String
    var checkInPosted: Bool
}

/// The presence state machine: a value type, one per tracked device, fed events with their time and
/// answering with effects. Deterministic (its random source is a seeded `SplitMix64` inside it),
/// `Sendable`, allocation-free per RSSI sample, under 2 KiB.
///
/// Guarantees (tested, including property-based tests):
/// - at most one open session, so never two open sessions for one site;
/// - a check-out is only posted for a session whose check-in was posted;
/// - every posted event has a fresh idempotency key;
/// - a gap or dip in the signal shorter than 10 s never causes a check-out: leaving needs the smoothed
///   RSSI at or below `leaveRssi` (or silence, or a region exit), then `softExitGraceMs` (>= 10 s,
///   enforced by validation) and the confirmation without the signal coming back — and it is back as
///   soon as two of the last three readings (`minReadings`) are above `leaveRssi` again. Validation
///   keeps grace + confirmation >= 10 s + `minReadings` readings, so the guarantee holds for every
///   valid configuration, not only the 3-minute default.
public struct PresenceStateMachine: Sendable {
    /// The configuration in force: the device's own (`deviceConfig`), or the settings of the site the
    /// device is at (`settingsSiteId`).
    public private(set) var config: PresenceConfig
    public private(set) var directory: SiteDirectory
    public private(set) var identity: DeviceIdentity
    public private(set) var phase: PresencePhase
    public private(set) var beaconRegionInside = false
    /// True while our continuous scan runs (the app's `isContinuousScanActive`).
    public private(set) var continuousScanActive = false
    /// True while a ranging burst runs.
    public private(set) var rangingActive = false
    public private(set) var online = true
    /// How far the clock the device stamps with reads ahead of the steady time `at:` (the phone's, from
    /// `.clockOffsetChanged`, or the server's, from `.serverClockKnown`): what the device sends and
    /// persists is stamped `steady + clockOffsetMs`.
    public private(set) var clockOffsetMs: Int64 = 0
    /// True once `.serverClockKnown` said `clockOffsetMs` is the server's clock; false while it is the
    /// phone's (its stamps are marked `AttendanceEvent.phoneClock`).
    public private(set) var stampsWithServerClock = false
    /// This process's phone-clock epoch (`AttendanceEvent.phoneClockEpoch`): a setting of the phone's
    /// clock moves only what this process stamped with it.
    public let clockEpoch: UInt64
    /// The restored session's key and last presence as the snapshot stamped them, and whether that
    /// stamp is the phone's clock: until presence is seen again they keep those stamps when the offset
    /// moves (see `replaceRestored(offset:)`).
    var restored: (sessionKey: String, lastPresentAt: Timestamp, phoneClock: Bool)?
    /// The phone's wall clock when the snapshot that restored the open session was written: the last
    /// moment an earlier process knew the session was still going (`onLaunched` measures the gap from it,
    /// on the same clock). Nil for a snapshot of an earlier version: the session then resumes.
    var restoredPhoneClockSavedAt: Timestamp?
    /// When this process was launched right after the device itself was off or restarted since the
    /// snapshot (`.appLaunchedAfterDeviceRestart`); nil otherwise.
    var launchedAfterDeviceRestartAt: Timestamp?
    /// How soon after such a launch an exit still counts as the one the OS reports when the phone comes
    /// back (the person left while it was off). Later, the phone was on and inside the geofence until then.
    static let exitAfterRestartWindowMs: Int64 = 600_000
    /// How far the phone's own wall clock reads ahead of the steady time, whatever clock the device stamps
    /// with (`clockOffsetMs` is the server's once it is known). Kept current by `clockEvent`'s events.
    private(set) var phoneClockOffsetMs: Int64 = 0

    var tracker: BeaconTracker
    public private(set) var motion: MotionGate
    var insideSites = InsideSites()
    var session: OpenSession?
    /// Site index of the open session (-1 none or unknown site): kept outside `session` so the
    /// per-sample path reads one integer instead of copying the session's strings.
    var sessionSiteIndex: Int32 = -1
    /// Last moment the device was known present (becomes the check-out `timestamp`).
    var lastPresentAt = Timestamp.distantPast
    /// Last valid reading of any beacon of the session's site.
    var lastSiteHeardAt = Timestamp.distantPast
    /// Last reading of any beacon of the session's site at any strength, in any phase: someone leaving
    /// walks past the gate on the way out, and even a weak reading there dates the departure better than
    /// the last strong one (which may be the arrival, for a desk out of range).
    var lastSiteReadingAt = Timestamp.distantPast
    var timers = TimerDeadlines()
    var pendingCandidate: BeaconCandidate?
    var gattCooldownUntil = Timestamp.distantPast
    var lastGateLogAt = Timestamp.distantPast
    var exitReason = AttendanceReason.beaconLost
    /// When the current soft exit began (see `isRestingSinceLoss`).
    var softExitSince = Timestamp.distantPast
    /// Ranging windows added to the current burst (see `PresenceConfig.rangingExtensions`).
    var rangingExtensionsUsed = 0
    /// Weak evidence waiting for the device to come to rest (`PresenceConfig.dwellEnterRssi`): the
    /// beacon, when it was first and last seen at that level. Not persisted: a relaunch starts over.
    var dwellCandidate: BeaconCandidate?
    var dwellSince = Timestamp.distantPast
    var dwellLastAt = Timestamp.distantPast
    /// Strong evidence held for `PresenceConfig.enterHoldMs`: its site, and when it was first and last
    /// seen. Not persisted.
    var holdSiteIndex: Int32 = -1
    var holdSince = Timestamp.distantPast
    var holdLastAt = Timestamp.distantPast
    /// The device's own configuration while a site's settings are in force (nil while `config` is it).
    /// Boxed: a device away from such a site pays 8 bytes for it, not a second configuration.
    var deviceConfigAtSite: ConfigBox?
    /// The site whose settings are `config` (-1: the device's own configuration).
    var settingsSiteIndex: Int32 = -1
    /// The site the device is at (-1: none known): the one whose geofence it entered last, or whose
    /// beacon last gave evidence for a check-in; forgotten when the device leaves that site's geofence,
    /// or, known from evidence alone (outside its geofence), when the session there ends.
    var atSiteIndex: Int32 = -1
    var rng: SplitMix64

    /// - Parameters:
    ///   - seed: seeds the nonce / session-key generator; nil draws one from the system generator.
    ///     A relaunched process must not reuse the seed of the previous run (its keys would repeat):
    ///     production passes nil.
    ///   - restoring: the last persisted snapshot after a relaunch (deliver `.appLaunched` next).
    ///   - clockOffsetMs: how far the phone's wall clock reads ahead of the steady time this process
    ///     will pass as `at:` (0 for a `SteadyClock` made at launch): the device stamps with it, as the
    ///     phone's clock, until `.serverClockKnown`; the snapshot's stamped times are placed on the
    ///     steady time through it.
    public init(
        config: PresenceConfig = PresenceConfig(),
        directory: SiteDirectory,
        identity: DeviceIdentity,
        seed: UInt64? = nil,
        restoring snapshot: PresenceSnapshot? = nil,
        clockOffsetMs: Int64 = 0
    ) throws(ConfigValidationError) {
        self.config = try config.validated()
        self.directory = directory
        self.identity = identity
        self.clockOffsetMs = clockOffsetMs
        self.phoneClockOffsetMs = clockOffsetMs
        self.rng = seed.map { SplitMix64(seed: $0) } ?? SplitMix64()
        var epochSource = SplitMix64(seed: rng.state ^ 0xC10C_E90C_0000_0001)
        self.clockEpoch = epochSource.next()
        self.tracker = BeaconTracker(window: config.smoothingWindow, mode: config.smoothing, freshnessMs: config.signalLossMs)
        self.motion = MotionGate(config: config.motion)
        self.phase = .idle
        if let snapshot {
            for id in snapshot.insideSiteIds {
                if let i = directory.siteIndex(id: id) { insideSites.insert(i) }
            }
            if let s = snapshot.session {
                session = OpenSession(
                    siteId: s.siteId, beacon: s.beacon, tStart: s.tStart - clockOffsetMs, stampedStart: s.tStart,
                    startOnPhoneClock: s.phoneClockStart == true, key: s.sessionKey, userId: s.userId,
                    deviceId: s.deviceId ?? identity.deviceId, checkInPosted: s.checkInPosted)
                sessionSiteIndex = directory.siteIndex(id: s.siteId) ?? -1
                lastPresentAt = s.lastPresentAt - clockOffsetMs
                restored = (s.sessionKey, s.lastPresentAt, s.phoneClockLastPresent == true)
                restoredPhoneClockSavedAt = snapshot.phoneClockSavedAt
            }
        }
        // A relaunch inside a site with settings of its own starts under them: the site it was at first.
        if let id = snapshot?.atSiteId, let index = directory.siteIndex(id: id) { atSiteIndex = index }
        let site = siteWhoseSettingsApply
        if site >= 0, let settings = directory.settings(ofSite: site) {
            deviceConfigAtSite = ConfigBox(self.config)
            settingsSiteIndex = site
            self.config = settings
            tracker = BeaconTracker(window: settings.smoothingWindow, mode: settings.smoothing, freshnessMs: settings.signalLossMs)
            motion = MotionGate(config: settings.motion)
        }
        phase = restingPhase
        if session != nil {
            // Not known to be present any more: the relaunch must find the beacon again.
            phase = .softExitPending
            exitReason = .notFoundAfterRelaunch
        }
    }

    // MARK: Public read-only views

    /// The open session as it would be persisted, if any.
    public var openSession: SessionCheckpoint? {
        guard let s = session else { return nil }
        let presence = stamped(lastPresentAt)
        return SessionCheckpoint(
            sessionKey: s.key, userId: s.userId, siteId: s.siteId, beacon: s.beacon, tStart: s.stampedStart,
            lastPresentAt: presence.time, checkInPosted: s.checkInPosted,
            phoneClockStart: s.startOnPhoneClock ? true : nil, phoneClockLastPresent: presence.onPhoneClock ? true : nil,
            deviceId: s.deviceId)
    }

    /// Ids of the site geofences the device is inside.
    public var insideSiteIds: [String] { insideSites.all.map { directory[$0].id } }

    /// The device's own configuration (`init`, `apply(config:at:)`): `config` unless a site's settings
    /// are in force.
    public var deviceConfig: PresenceConfig { deviceConfigAtSite?.config ?? config }

    /// The device's own kill switch (read without copying the configuration: it is asked per event).
    var deviceKillSwitch: Bool { deviceConfigAtSite?.config.flags.killSwitch ?? config.flags.killSwitch }

    /// The site whose settings (`Site.settings`) are in force, nil while the device's own
    /// configuration is.
    public var settingsSiteId: String? { settingsSiteIndex >= 0 ? directory[settingsSiteIndex].id : nil }

    /// The durable part of the state (written with `persistSnapshot`).
    public func snapshot(at now: Timestamp) -> PresenceSnapshot {
        PresenceSnapshot(
            session: openSession, insideSiteIds: insideSiteIds, savedAt: stamp(now),
            atSiteId: atSiteIndex >= 0 ? directory[atSiteIndex].id : nil, phoneClockSavedAt: now + phoneClockOffsetMs)
    }

    /// Steady time `t` as the device stamps it now.
    func stamp(_ t: Timestamp) -> Timestamp { t + clockOffsetMs }

    /// Steady time `t` stamped, whether the stamp is the phone's clock, and whether an earlier process
    /// made it: the restored presence keeps the snapshot's stamp and clock until presence is seen again;
    /// anything else is stamped now.
    func stamped(_ t: Timestamp) -> Stamp {
        if let r = restored, t == r.lastPresentAt - clockOffsetMs {
            return Stamp(time: r.lastPresentAt, onPhoneClock: r.phoneClock, restored: true)
        }
        return Stamp(time: stamp(t), onPhoneClock: !stampsWithServerClock, restored: false)
    }

    struct Stamp {
        var time: Timestamp
        var onPhoneClock: Bool
        /// Made by an earlier process (restored from the snapshot).
        var restored: Bool
    }

    /// An event's `phoneClock` marks.
    static func marks(timestamp: Bool, tStart: Bool, decidedAt: Bool) -> [AttendanceEvent.StampedTime]? {
        guard timestamp || tStart || decidedAt else { return nil }
        var marks: [AttendanceEvent.StampedTime] = []
        if timestamp { marks.append(.timestamp) }
        if tStart { marks.append(.tStart) }
        if decidedAt { marks.append(.decidedAt) }
        return marks
    }

    /// A snapshot's times were stamped by the previous process, on the clock it had (the server's, once
    /// it had been answered); this process placed them on its steady time through the offset it was
    /// built with, which may be the phone's own clock until its first answer. When the offset moves, the
    /// restored session's start and its last presence (until presence is seen again) are placed anew so
    /// that they keep their stamps: a check-out dated by them carries the time the snapshot holds.
    mutating func replaceRestored(offset: Int64) {
        guard let r = restored else { return }
        let placedPresence = lastPresentAt == r.lastPresentAt - clockOffsetMs
        if placedPresence { lastPresentAt = r.lastPresentAt - offset }
        let sameSession = session?.key == r.sessionKey
        if sameSession, let s = session { session?.tStart = s.stampedStart - offset }
        if !placedPresence && !sameSession { restored = nil }
    }

    /// The phone's wall clock moved (`.clockOffsetChanged`). While the device stamps with it, what this
    /// process stamped with it so far moves with it (the session's start, the outbox's marked entries of
    /// its epoch through `.phoneClockSet`), so that one correction by the server's clock fits them; a
    /// setting under `minimumPhoneClockSettingMs` (a reading's jitter) moves nothing. Times restored
    /// from an earlier process keep their stamps: the clock they were made with is not this one's.
    mutating func onClockOffsetChanged(_ offset: Int64, at now: Timestamp) -> [PresenceEffect] {
        let setBy = stampsWithServerClock ? 0 : offset - clockOffsetMs
        var fx: [PresenceEffect] = []
        var moved = false
        if abs(setBy) >= Self.minimumPhoneClockSettingMs {
            if let s = session, s.startOnPhoneClock, restored?.sessionKey != s.key {
                session?.stampedStart = s.stampedStart + setBy
                moved = true
            }
            fx.append(.phoneClockSet(byMs: setBy, epoch: Self.epochText(clockEpoch)))
        }
        replaceRestored(offset: offset)
        clockOffsetMs = offset
        phoneClockOffsetMs = offset
        stampsWithServerClock = false
        if moved { fx.append(.persistSnapshot(snapshot(at: now))) }
        return fx
    }

    /// A setting of the phone's clock smaller than this moves no stamp (reading the wall clock against
    /// the steady one jitters by a millisecond or so).
    static let minimumPhoneClockSettingMs: Int64 = 1_000

    /// The clock event the host owes the machine, if any, given what it knows now: the server's clock
    /// (`ServerClock.offsetMs`, nil until an answer told it), how far the phone's wall clock reads ahead
    /// of it (`ServerClock.phoneAheadMs(wallClockOffsetMs:)`), and the wall clock's own offset. Ask after
    /// every answer and when the OS says the wall clock was set.
    ///
    /// `.serverClockKnown` once the server's clock is known: when the machine does not stamp with it
    /// yet, when its estimate moved, and when the phone's wall clock moved against it (set by hand, or
    /// corrected by the network). The last keeps the phone's clock the snapshot records current, so a
    /// relaunch measures its time off (`sessionResumeLimitMs`) on the clock the phone reads then.
    /// Before, `.clockOffsetChanged` when the wall clock moved.
    public func clockEvent(serverOffsetMs: Int64?, phoneAheadMs: Int64?, wallClockOffsetMs: Int64) -> PresenceEvent? {
        if let offset = serverOffsetMs, let ahead = phoneAheadMs {
            let phoneMoved = abs(offset + ahead - phoneClockOffsetMs) >= Self.minimumPhoneClockSettingMs
            guard !stampsWithServerClock || offset != clockOffsetMs || phoneMoved else { return nil }
            return .serverClockKnown(offsetMs: offset, phoneAheadMs: ahead)
        }
        return wallClockOffsetMs != clockOffsetMs ? .clockOffsetChanged(offsetMs: wallClockOffsetMs) : nil
    }

    /// An epoch as events carry it: 16 lowercase hex digits.
    static func epochText(_ epoch: UInt64) -> String { Hex.string(epoch, digits: 16) }

    /// Stamps with the server's clock from now on. The stamps held on the phone's clock (the open
    /// session's start, the restored presence) move back by `phoneAheadMs`, and the outbox is told to
    /// move its own (`.correctPhoneClockStamps`, every time: a correction the host could not finish is
    /// done at the next), so that a check-in decided before any answer and the session's later events
    /// carry the server's time. A restored session's start is then placed on the steady time through
    /// its corrected stamp (`replaceRestored(offset:)`).
    mutating func onServerClockKnown(offsetMs offset: Int64, phoneAheadMs phoneAhead: Int64, at now: Timestamp) -> [PresenceEffect] {
        var corrected = false
        if var r = restored, r.phoneClock {
            let placedPresence = lastPresentAt == r.lastPresentAt - clockOffsetMs
            r.lastPresentAt = r.lastPresentAt - phoneAhead
            r.phoneClock = false
            if placedPresence { lastPresentAt = r.lastPresentAt - clockOffsetMs }
            restored = r
            corrected = true
        }
        if let s = session, s.startOnPhoneClock {
            session?.stampedStart = s.stampedStart - phoneAhead
            session?.startOnPhoneClock = false
            corrected = true
        }
        replaceRestored(offset: offset)
        clockOffsetMs = offset
        phoneClockOffsetMs = offset + phoneAhead
        stampsWithServerClock = true
        var fx: [PresenceEffect] = [.correctPhoneClockStamps(phoneAheadMs: phoneAhead)]
        if corrected { fx.append(.persistSnapshot(snapshot(at: now))) }
        return fx
    }

    /// The beacons currently tracked (for diagnostics and tests).
    public var trackedBeacons: BeaconTracker { tracker }

    /// Deadline of a scheduled timer, if any.
    public func deadline(of id: TimerID) -> Timestamp? { timers[id] }

    /// Heap bytes this state owns beyond its inline size (`MemoryLayout<PresenceStateMachine>.stride`),
    /// for memory accounting: native strings longer than 15 UTF-8 bytes own a heap buffer (32-byte
    /// object header + bytes + NUL, rounded to malloc's 16-byte granule); shorter ones are stored
    /// inline. The site id is shared with the `SiteDirectory` and the session's user id with the
    /// identity, so neither is counted twice. Everything else (rings, buckets, timers) is inline.
    public var ownedHeapBytes: Int {
        func heap(_ s: String?) -> Int {
            guard let n = s?.utf8.count, n > 15 else { return 0 }
            return (32 + n + 1 + 15) / 16 * 16
        }
        var total = heap(identity.userId) + heap(identity.deviceId)
        if let session { total += heap(session.key) }
        if !config.flags.other.isEmpty { total += 64 + config.flags.other.count * 48 }
        if let box = deviceConfigAtSite {
            total += (16 + MemoryLayout<PresenceConfig>.size + 15) / 16 * 16
            if !box.config.flags.other.isEmpty { total += 64 + box.config.flags.other.count * 48 }
        }
        return total
    }

    var restingPhase: PresencePhase {
        insideSites.isEmpty && config.flags.requireGeofence ? .idle : .armed
    }

    // MARK: Events

    /// Feeds one event that happened at `now`; returns what the host should do, in order.
    /// Steady-state RSSI samples return an empty array (no allocation). When the event changed the site
    /// the device is at, that site's settings (or the device's own configuration) are put in force last.
    public mutating func handle(_ event: PresenceEvent, at now: Timestamp) -> [PresenceEffect] {
        var fx = dispatch(event, at: now)
        if directory.hasSiteSettings { followSiteSettings(at: now, &fx) }
        return fx
    }

    mutating func dispatch(_ event: PresenceEvent, at now: Timestamp) -> [PresenceEffect] {
        // Both kept with the kill switch on too: the stamps after them depend on them.
        if case .clockOffsetChanged(let offset) = event {
            return onClockOffsetChanged(offset, at: now)
        }
        if case .serverClockKnown(let offset, let phoneAhead) = event {
            return onServerClockKnown(offsetMs: offset, phoneAheadMs: phoneAhead, at: now)
        }
        if config.flags.killSwitch {
            switch event {
            case .userIdChanged(let user, let deviceId):
                if let deviceId { identity.deviceId = deviceId }
                guard user != identity.userId else { return [] }
                identity.userId = user
                if let s = session, !s.checkInPosted || s.userId != user {
                    // As in `onUserChanged`, the new user inherits no session: one with no check-in is
                    // dropped, the previous user's ends unposted.
                    return endSessionUnderKillSwitch("user changed", at: now)
                }
            case .appLaunched, .appLaunchedAfterDeviceRestart:
                if let s = session, s.userId != identity.userId {
                    return endSessionUnderKillSwitch("user changed between two runs", at: now)
                }
            case .appTerminated:
                return [.persistSnapshot(snapshot(at: now))]
            case .geofenceEntered(let siteId), .geofenceExited(let siteId):
                // Detection is off, but where the device is stays known: the OS reports each crossing
                // once, and a membership missed now would keep a site "inside" after the kill switch
                // (and a site's own kill switch must end when the device leaves the site).
                guard let index = directory.siteIndex(id: siteId) else { return [] }
                var fx: [PresenceEffect] = []
                if case .geofenceEntered = event {
                    crossWithKillSwitch(index, entering: true, &fx)
                } else {
                    crossWithKillSwitch(index, entering: false, &fx)
                }
                if session == nil { phase = restingPhase }
                fx.append(.persistSnapshot(snapshot(at: now)))
                return fx
            case .location(let point):
                var crossed = false
                var fx: [PresenceEffect] = []
                for i in 0..<Int32(directory.sites.count) {
                    let (fence, exitMargin) = self.fence(ofSite: i)
                    let distance = fence.distance(to: point)
                    if insideSites.contains(i) {
                        if distance > fence.radiusMeters + exitMargin {
                            crossWithKillSwitch(i, entering: false, &fx)
                            crossed = true
                        }
                    } else if distance <= fence.radiusMeters {
                        crossWithKillSwitch(i, entering: true, &fx)
                        crossed = true
                    }
                }
                guard crossed else { return [] }
                if session == nil { phase = restingPhase }
                fx.append(.persistSnapshot(snapshot(at: now)))
                return fx
            case .connectivityChanged(let isOnline):
                // What the outbox already holds is still delivered: nothing recorded is lost.
                online = isOnline
                return isOnline ? [.drainOutbox] : []
            case .motionActivity(let activity):
                // Kept, as where the device is: leaving a site whose kill switch is on finds it current.
                motion.record(activity: activity, at: now)
            case .steps(let count):
                motion.record(steps: count, at: now)
            case .beaconRegionEntered:
                beaconRegionInside = true
            case .beaconRegionExited:
                beaconRegionInside = false
            case .beaconRegionState(let inside):
                beaconRegionInside = inside
            default: break
            }
            return []
        }
        switch event {
        case .beaconReading(let reading):
            return onReading(reading, at: now)
        case .timerFired(let id):
            return onTimer(id, at: now)
        case .beaconRegionEntered:
            return onRegionEntered(at: now)
        case .beaconRegionExited:
            return onRegionExited(at: now)
        case .beaconRegionState(let inside):
            return onRegionState(inside: inside, at: now)
        case .geofenceEntered(let siteId):
            var fx: [PresenceEffect] = []
            guard let index = directory.siteIndex(id: siteId) else {
                return [.log(.warning, "geofence enter for unknown site \(siteId) ignored")]
            }
            enterGeofence(index, at: now, &fx)
            return fx
        case .geofenceExited(let siteId):
            var fx: [PresenceEffect] = []
            guard let index = directory.siteIndex(id: siteId) else {
                return [.log(.warning, "geofence exit for unknown site \(siteId) ignored")]
            }
            exitGeofence(index, at: now, &fx)
            return fx
        case .location(let point):
            return onLocation(point, at: now)
        case .motionActivity(let activity):
            motion.record(activity: activity, at: now)
            var fx = motionMayUnlock(at: now)
            if activity == .stationary { confirmDwell(at: now, &fx) }
            return fx
        case .steps(let count):
            motion.record(steps: count, at: now)
            return motionMayUnlock(at: now)
        case .gattChallengeResult(let ok, let roundTrip):
            return onGattResult(ok: ok, roundTripMs: roundTrip, at: now)
        case .connectivityChanged(let isOnline):
            online = isOnline
            return isOnline ? [.drainOutbox] : []
        case .periodicWake:
            return onPeriodicWake(at: now)
        case .scanningStopped(let mode):
            return onScanningStopped(mode, at: now)
        case .appLaunched:
            return onLaunched(at: now)
        case .appLaunchedAfterDeviceRestart:
            launchedAfterDeviceRestartAt = session != nil ? now : nil
            return onLaunched(at: now)
        case .appTerminated(let forceQuit):
            return onTerminated(forceQuit: forceQuit, at: now)
        case .userIdChanged(let user, let deviceId):
            return onUserChanged(user, deviceId: deviceId, at: now)
        case .clockOffsetChanged, .serverClockKnown:
            return [] // taken before the kill switch
        }
    }

    /// Ends the open session without a post (nothing is posted while the kill switch is on; the server
    /// closes it at its idle cutoff), saying why in the log.
    mutating func endSessionUnderKillSwitch(_ why: String, at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = [.log(.info, "\(why) with the kill switch on: its session ends here, without a check-out")]
        endSession(&fx)
        fx.append(.persistSnapshot(snapshot(at: now)))
        return fx
    }

    /// A geofence crossing while the kill switch is on: membership only (nothing is posted).
    mutating func crossWithKillSwitch(_ index: Int32, entering: Bool, _ fx: inout [PresenceEffect]) {
        if entering {
            if !insideSites.contains(index) { atSiteIndex = index }
            insideSites.insert(index)
            return
        }
        insideSites.remove(index)
        if atSiteIndex == index { atSiteIndex = -1 }
        if sessionSiteIndex == index, session != nil {
            // Nothing is posted while the switch is on; the server ends the session at its idle cutoff,
            // and the next arrival is a new check-in.
            fx.append(.log(.info, "left \(directory[index].id) with the kill switch on: its session ends here, without a check-out"))
            endSession(&fx)
        }
    }

    /// Replaces the device's own configuration at runtime (a new remote config). While a site's
    /// settings are in force they stay in force (the new configuration applies when the device leaves
    /// the site), unless it turns the kill switch on: the device's kill switch stops detection at every
    /// site. See `install(_:at:)` for what a change of configuration does.
    public mutating func apply(config newConfig: PresenceConfig, at now: Timestamp) throws(ConfigValidationError) -> [PresenceEffect] {
        let new = try newConfig.validated()
        var fx: [PresenceEffect] = []
        if settingsSiteIndex >= 0 {
            deviceConfigAtSite = ConfigBox(new)
        } else {
            fx = install(new, at: now)
        }
        if directory.hasSiteSettings { followSiteSettings(at: now, &fx) }
        return fx
    }

    /// Puts a new site directory in force while running: the app fetched a changed configuration (a
    /// site's settings, beacons added or retired, a site added to or removed from its user). What the
    /// device knows carries over by site id and beacon identity: the geofences it is inside, its open
    /// session, the beacons it follows and the evidence it holds (a beacon that belongs to no site any
    /// more is dropped, with a GATT challenge waiting on it); then the settings of the site it is at are
    /// put in force as they now are. A GATT challenge in flight is dropped (the next readings decide
    /// again, under the new directory's gates). A present session whose site is no longer in the
    /// directory is treated as one whose beacon was lost: a soft exit, then a check-out after the grace,
    /// whatever the check-out trigger (a geofence exit cannot come: that geofence is no longer watched);
    /// it resumes if the site comes back first. The host registers the
    /// new directory's geofences (and their radii, `fence(ofSite:)`) with the OS as it did at start:
    /// there is no effect for it, and a geofence of a new site the device is already inside counts once
    /// the OS or a location fix reports it.
    public mutating func replace(directory new: SiteDirectory, at now: Timestamp) -> [PresenceEffect] {
        let old = directory
        func moved(_ index: Int32) -> Int32 { index >= 0 ? new.siteIndex(id: old[index].id) ?? -1 : -1 }
        var inside = InsideSites()
        for index in [insideSites.a, insideSites.b, insideSites.c, insideSites.d] where index >= 0 {
            let m = moved(index)
            if m >= 0 { inside.insert(m) }
        }
        let sessionHadItsSite = sessionSiteIndex >= 0
        insideSites = inside
        // By the session's own site id: a site that left an earlier directory and came back is found.
        sessionSiteIndex = session.flatMap { new.siteIndex(id: $0.siteId) } ?? -1
        atSiteIndex = moved(atSiteIndex)
        holdSiteIndex = moved(holdSiteIndex)
        settingsSiteIndex = moved(settingsSiteIndex)
        directory = new
        tracker.resolveSitesAgain { new.siteIndex(for: $0) }
        var fx: [PresenceEffect] = []
        if let dwell = dwellCandidate {
            if let site = new.siteIndex(for: dwell.beacon) { dwellCandidate?.siteIndex = site } else { dwellCandidate = nil }
        }
        if pendingCandidate != nil {
            pendingCandidate = nil
            cancel(.gattTimeout, &fx)
            if session == nil { phase = restingPhase }
        }
        // The settings of the site the device is at, as they now are (the site may be the same one,
        // with a new document).
        followSiteSettings(at: now, sameSiteToo: true, &fx)
        if sessionHadItsSite && sessionSiteIndex < 0 && phase == .present {
            enterSoftExit(reason: .beaconLost, at: now, &fx)
        }
        _ = settleOutsideEveryGeofence(&fx)
        fx.append(.persistSnapshot(snapshot(at: now)))
        return fx
    }

    /// Outside every geofence with no session, under a configuration that requires one: stops what
    /// runs and goes idle, as leaving the last geofence does. True when it did.
    mutating func settleOutsideEveryGeofence(_ fx: inout [PresenceEffect]) -> Bool {
        guard config.flags.requireGeofence && insideSites.isEmpty && session == nil,
            phase != .idle || continuousScanActive || rangingActive
        else { return false }
        stopAllScans(&fx)
        for id in TimerID.allCases { cancel(id, &fx) }
        pendingCandidate = nil
        phase = .idle
        return true
    }

    /// The site whose settings should be in force, or -1 for the device's own configuration: the open
    /// session's site, else the site the device is at (`atSiteIndex`), else the first other site it is
    /// inside that has settings. A site without settings runs under the device's own configuration, as
    /// does every site while the device's own kill switch is on.
    var siteWhoseSettingsApply: Int32 {
        if deviceKillSwitch { return -1 }
        if sessionSiteIndex >= 0 { return directory.hasSettings(sessionSiteIndex) ? sessionSiteIndex : -1 }
        if atSiteIndex >= 0 { return directory.hasSettings(atSiteIndex) ? atSiteIndex : -1 }
        if directory.hasSettings(insideSites.a) { return insideSites.a }
        if directory.hasSettings(insideSites.b) { return insideSites.b }
        if directory.hasSettings(insideSites.c) { return insideSites.c }
        if directory.hasSettings(insideSites.d) { return insideSites.d }
        return -1
    }

    /// Puts in force the settings of the site the device is at, or its own configuration when it is at
    /// no site with settings (`siteWhoseSettingsApply`). Per event only the site is compared;
    /// `sameSiteToo` also compares the settings (a new directory may carry a new document for the
    /// same site).
    mutating func followSiteSettings(at now: Timestamp, sameSiteToo: Bool = false, _ fx: inout [PresenceEffect]) {
        let site = siteWhoseSettingsApply
        guard site != settingsSiteIndex || sameSiteToo else { return }
        let device = deviceConfig
        let wanted = site >= 0 ? directory.settings(ofSite: site) ?? device : device
        guard site != settingsSiteIndex || wanted != config else {
            // No site's settings in force (a replaced directory dropped the site whose settings were,
            // and they equalled the device's own): the device's own configuration is `config` itself.
            if site < 0 { deviceConfigAtSite = nil }
            return
        }
        deviceConfigAtSite = site >= 0 ? deviceConfigAtSite ?? ConfigBox(device) : nil
        settingsSiteIndex = site
        fx.append(
            .log(
                .info,
                site >= 0 ? "detection settings of site \(directory[site].id) in force" : "the device's own detection settings in force"))
        fx.append(contentsOf: install(wanted, at: now))
    }

    /// A site's geofence and exit margin: the site's own radius, else its settings', else the device's
    /// own configuration's (never those of another site whose settings are in force).
    func fence(ofSite index: Int32) -> (fence: Geofence, exitMargin: Double) {
        let own = directory.settings(ofSite: index) ?? deviceConfig
        return (directory.geofence(ofSite: index, defaultRadius: own.geofenceRadiusMeters), own.geofenceExitMarginMeters)
    }

    /// Puts a validated configuration in force. Samples tracked so far are dropped when the smoothing
    /// settings change. A GATT retry cooldown running under the old configuration ends: the new one may
    /// have fixed what made the challenge fail (or the cooldown itself). A configuration with the kill
    /// switch on starts nothing; one that requires a geofence stops what runs outside every geofence.
    mutating func install(_ new: PresenceConfig, at now: Timestamp) -> [PresenceEffect] {
        let old = config
        config = new
        gattCooldownUntil = .distantPast
        var fx: [PresenceEffect] = []
        if old.smoothingWindow != new.smoothingWindow || old.smoothing != new.smoothing || old.signalLossMs != new.signalLossMs {
            tracker = BeaconTracker(window: new.smoothingWindow, mode: new.smoothing, freshnessMs: new.signalLossMs)
        }
        if old.motion != new.motion {
            var gate = MotionGate(config: new.motion)
            gate.record(activity: motion.lastActivity, at: motion.lastActiveAt)
            motion = gate
        }
        if new.flags.killSwitch {
            // From a configuration with the switch off, or from another with it on (a site's, then the
            // device's): nothing may run either way.
            if !old.flags.killSwitch {
                stopAllScans(&fx)
                for id in TimerID.allCases { cancel(id, &fx) }
                pendingCandidate = nil
                if phase != .idle && phase != .armed { phase = restingPhase }
                fx.append(.log(.warning, "kill switch on: detection stopped"))
            }
            return fx
        }
        if !new.flags.killSwitch && old.flags.killSwitch {
            fx.append(.log(.info, "kill switch off: detection resumed"))
            if session != nil {
                phase = .softExitPending
                exitReason = .notFoundAfterRelaunch
                schedule(.softExitGrace, at: now + new.softExitGraceMs, &fx)
            }
        }
        if phase == .idle && !new.flags.requireGeofence { phase = .armed }
        // Outside every geofence, as leaving the last one under this configuration would leave it.
        if settleOutsideEveryGeofence(&fx) { return fx }
        if new.flags.continuousScan && !continuousScanActive && phase != .idle {
            startContinuous(&fx)
        } else if !new.flags.continuousScan && continuousScanActive {
            continuousScanActive = false
            fx.append(.stopScanning(.continuous))
            cancel(.signalWatchdog, &fx)
        }
        return fx
    }

    // MARK: Readings (the hot path)

    @inline(__always)
    mutating func onReading(_ reading: BeaconReading, at now: Timestamp) -> [PresenceEffect] {
        if phase == .idle { return [] } // not armed: nothing to detect
        let directory = self.directory
        guard let slotIndex = tracker.record(reading, at: now, resolveSite: { directory.siteIndex(for: $0) }) else {
            return []
        }
        if session != nil && tracker.slot(slotIndex).siteIndex == sessionSiteIndex { lastSiteReadingAt = now }
        switch phase {
        case .idle, .verifying:
            return []
        case .armed, .candidate:
            return tryConfirm(at: now)
        case .present:
            let slot = tracker.slot(slotIndex)
            guard slot.siteIndex == sessionSiteIndex else { return [] }
            lastSiteHeardAt = now
            let leave = Float(config.leaveRssi)
            if slot.smoothed > leave {
                lastPresentAt = now
                return []
            }
            // This beacon is weak; the device is still present if another beacon of the site is not.
            if let best = tracker.bestSmoothed(site: sessionSiteIndex, at: now), best > leave {
                lastPresentAt = now
                return []
            }
            var fx: [PresenceEffect] = []
            enterSoftExit(reason: .beaconLost, at: now, &fx)
            return fx
        case .softExitPending, .confirmingExit:
            return tryRecover(at: now)
        }
    }

    /// Armed or ranging: does the nearest beacon pass the confidence rule (and the gates)?
    ///
    /// With co-location on, "nearest" means nearest among beacons of sites whose geofence the device is
    /// inside: a strong beacon of a neighbouring site must not hide the beacon of the site the device is
    /// actually at. When only ineligible beacons are confident, that is logged (rate-limited).
    @inline(__always)
    mutating func tryConfirm(at now: Timestamp) -> [PresenceEffect] {
        let rule = config.confidenceRule
        let candidate: BeaconCandidate?
        if config.flags.requireGeofence {
            let inside = insideSites
            candidate = RangingWindow.evaluate(tracker, rule: rule, at: now, eligible: { inside.contains($0) })
        } else {
            candidate = RangingWindow.evaluate(tracker, rule: rule, at: now)
        }
        var fx: [PresenceEffect] = []
        if let candidate {
            guard config.enterHoldMs > 0 else {
                confirm(candidate, at: now, &fx)
                return fx
            }
            // The hold: every reading since `holdSince` passed the rule for this site (a reading that did
            // not, or a silence longer than the hold, starts it again). Evidence at the at-once level ends
            // it early; either way the check-in is stamped with the hold's start.
            if candidate.siteIndex != holdSiteIndex || now - holdLastAt > config.enterHoldMs {
                holdSiteIndex = candidate.siteIndex
                holdSince = now
            }
            holdLastAt = now
            let atOnce = config.enterAtOnceRssi != 0 && candidate.smoothedRssi >= Float(config.enterAtOnceRssi)
            if atOnce || now - holdSince >= config.enterHoldMs { confirm(candidate, at: now, since: holdSince, &fx) }
            return fx
        }
        holdSiteIndex = -1
        if let other = candidateUnderItsOwnSettings(at: now) {
            confirm(other, at: now, &fx) // puts that site's settings in force; the next readings decide
            return fx
        }
        if config.dwellWindowMs > 0 {
            let inside = insideSites
            let requireGeofence = config.flags.requireGeofence
            if let weak = RangingWindow.evaluate(
                tracker, rule: config.dwellRule, at: now, eligible: { !requireGeofence || inside.contains($0) })
            {
                noteDwellEvidence(weak, at: now)
            }
        }
        if config.flags.requireGeofence, let other = RangingWindow.evaluate(tracker, rule: rule, at: now),
            other.siteIndex >= 0
        {
            gatedLog(
                "beacon \(other.beacon) of \(directory[other.siteIndex].id) is near but the device is not inside that site's geofence (co-location)",
                at: now, &fx)
        }
        return fx
    }

    /// With no candidate under the settings in force and no session: the nearest beacon, when its site
    /// is governed by another configuration (its own settings, or the device's own where a neighbour's
    /// are in force) whose rule it passes. A site's evidence is never refused by a neighbour's stricter
    /// rule; only the nearest beacon is considered, so two sites cannot take turns.
    func candidateUnderItsOwnSettings(at now: Timestamp) -> BeaconCandidate? {
        guard directory.hasSiteSettings, session == nil, !deviceKillSwitch,
            let nearest = tracker.nearest(at: now, where: { $0 >= 0 })
        else { return nil }
        let site = tracker.slot(nearest).siteIndex
        let own = directory.settings(ofSite: site) ?? deviceConfig
        guard own != config, !own.flags.killSwitch, !own.flags.requireGeofence || insideSites.contains(site) else { return nil }
        return RangingWindow.evaluate(tracker, rule: own.confidenceRule, at: now, eligible: { $0 == site })
    }

    /// Soft exit: the session's site heard again above the *leave* threshold (smoothed, or the median
    /// of its last `minReadings` readings) resumes the session; a confident beacon of another site takes
    /// over.
    ///
    /// Why the leave threshold and not the enter threshold (the continuous-scan app returns to PRESENT
    /// above -70): the soft exit posts nothing, so resuming it cannot ping-pong check-ins — the hysteresis
    /// band still guards *new* sessions. Requiring -70 would turn a 3-second dip of a user sitting at
    /// -72 dBm into a check-out three minutes later, breaking "noise under 10 s never causes a check-out".
    mutating func tryRecover(at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = []
        if sessionSiteIndex >= 0,
            let best = tracker.bestRecoveryEvidence(site: sessionSiteIndex, recent: config.minReadings, at: now),
            best > Float(config.leaveRssi)
        {
            lastSiteHeardAt = now
            resumePresence(at: now, &fx)
            return fx
        }
        let inside = insideSites
        let requireGeofence = config.flags.requireGeofence
        let current = sessionSiteIndex
        if let candidate = RangingWindow.evaluate(
            tracker, rule: config.confidenceRule, at: now,
            eligible: { $0 != current && (!requireGeofence || inside.contains($0)) })
        {
            confirm(candidate, at: now, &fx)
        }
        return fx
    }

    // MARK: Check-in / check-out

    /// Weak evidence at a gate: remembered (the first moment becomes the check-in's time) until the
    /// device comes to rest or `dwellWindowMs` passes without it. Of a site's evidence, the strongest
    /// beacon is kept: the gate the person came through, not the one nearest where they sat down.
    mutating func noteDwellEvidence(_ weak: BeaconCandidate, at now: Timestamp) {
        if let held = dwellCandidate, held.siteIndex == weak.siteIndex, now - dwellLastAt <= config.dwellWindowMs {
            if weak.smoothedRssi > held.smoothedRssi { dwellCandidate = weak }
        } else {
            dwellSince = now
            dwellCandidate = weak
        }
        dwellLastAt = now
    }

    /// The device came to rest: weak evidence of the last `dwellWindowMs` at a site whose geofence the
    /// device is (still) inside becomes a check-in, stamped with the moment the evidence began.
    mutating func confirmDwell(at now: Timestamp, _ fx: inout [PresenceEffect]) {
        guard let weak = dwellCandidate else { return }
        guard phase == .armed || phase == .candidate, now - dwellLastAt <= config.dwellWindowMs,
            !config.flags.requireGeofence || insideSites.contains(weak.siteIndex)
        else {
            if now - dwellLastAt > config.dwellWindowMs { dwellCandidate = nil }
            return
        }
        dwellCandidate = nil
        fx.append(.log(.info, "weak evidence of \(weak.beacon) confirmed by the device coming to rest (dwell)"))
        confirm(weak, at: now, since: dwellSince, &fx)
    }

    mutating func confirm(_ candidate: BeaconCandidate, at now: Timestamp, since: Timestamp? = nil, _ fx: inout [PresenceEffect]) {
        guard candidate.siteIndex >= 0 else { return }
        if session != nil && sessionSiteIndex == candidate.siteIndex {
            // Same site while a session is open (geofence-exit policy after a signal loss, or a soft
            // exit): the session simply continues. No gates: they guard *new* check-ins.
            lastSiteHeardAt = now
            resumePresence(at: now, &fx)
            return
        }
        let siteId = directory[candidate.siteIndex].id
        // With no session to leave, the candidate's own site's settings go in force before any gate:
        // its gates are that site's, not a neighbour's.
        if session == nil && !takeSettings(ofCandidate: candidate, siteId: siteId, at: now, &fx) { return }
        if config.flags.requireGeofence && !insideSites.contains(candidate.siteIndex) {
            return // tryConfirm only offers eligible candidates; a guard for other callers
        }
        if config.flags.motionGating && !motion.isSatisfied(at: now) {
            gatedLog(
                "beacon \(candidate.beacon) of \(siteId) is near but the motion gate is closed (no walking recently, \(motion.steps(at: now)) steps)",
                at: now, &fx)
            return
        }
        if config.flags.motionGating && motion.isPassingBy {
            gatedLog(
                "beacon \(candidate.beacon) of \(siteId) is near but the device is \(motion.lastActivity.rawValue): passing by, not arriving",
                at: now, &fx)
            return
        }
        // A GATT cooldown refuses the candidate before anything changes: checking out of the open
        // session first would leave the machine in a soft exit with no session.
        if config.flags.gattChallenge && now < gattCooldownUntil { return }
        // Leaving an open session for another site takes the gates of the settings in force (the
        // session's site's); the new site's settings then decide the check-in.
        if session != nil && !takeSettings(ofCandidate: candidate, siteId: siteId, at: now, &fx) { return }
        if session != nil {
            checkOut(reason: .siteChanged, at: now, &fx)
        }
        if config.flags.gattChallenge {
            pendingCandidate = candidate
            phase = .verifying
            fx.append(.performGattChallenge(candidate.beacon))
            schedule(.gattTimeout, at: now + config.gattTimeoutMs, &fx)
            return
        }
        checkIn(candidate, handshake: nil, at: now, since: since, &fx)
    }

    /// A check-in is decided under its site's settings, and never at a site whose kill switch is on.
    /// True when the candidate may go on under the settings in force; false when it is refused (its
    /// site's kill switch) or when they were another site's: then the open session is left, the
    /// candidate's site's settings go in force, and the next readings decide under them.
    mutating func takeSettings(
        ofCandidate candidate: BeaconCandidate, siteId: String, at now: Timestamp, _ fx: inout [PresenceEffect]
    ) -> Bool {
        guard directory.hasSiteSettings else { return true }
        if directory.settings(ofSite: candidate.siteIndex)?.flags.killSwitch == true {
            gatedLog("beacon \(candidate.beacon) of \(siteId) is near but detection is off at that site (its kill switch)", at: now, &fx)
            return false
        }
        let wanted = directory.hasSettings(candidate.siteIndex) ? candidate.siteIndex : -1
        guard wanted != settingsSiteIndex else { return true }
        if session != nil {
            checkOut(reason: .siteChanged, at: now, &fx)
        }
        phase = restingPhase
        atSiteIndex = candidate.siteIndex
        followSiteSettings(at: now, &fx)
        return false
    }

    /// - Parameter since: when the evidence began, if earlier than `now` (dwell confirmation, the enter
    ///   hold): the session's start and the check-in's timestamp; `decidedAt` stays `now`.
    mutating func checkIn(
        _ candidate: BeaconCandidate, handshake: AttendanceEvent.Handshake?, at now: Timestamp, since: Timestamp? = nil,
        _ fx: inout [PresenceEffect]
    ) {
        let siteId = directory[candidate.siteIndex].id
        let key = UUIDBits.random(using: &rng).uuidString
        let user = identity.userId
        let tStart = min(since ?? now, now)
        dwellCandidate = nil
        holdSiteIndex = -1
        let opened = OpenSession(
            siteId: siteId, beacon: candidate.beacon, tStart: tStart, stampedStart: stamp(tStart),
            startOnPhoneClock: !stampsWithServerClock, key: key, userId: user, deviceId: identity.deviceId,
            checkInPosted: user != nil)
        session = opened
        sessionSiteIndex = candidate.siteIndex
        phase = .present
        lastPresentAt = now
        lastSiteHeardAt = now
        lastSiteReadingAt = now
        pendingCandidate = nil
        cancel(.gattTimeout, &fx)
        cancel(.softExitGrace, &fx)
        cancel(.exitConfirmation, &fx)
        stopRanging(&fx)
        if let user {
            let event = makeEvent(
                .checkIn, of: opened, reason: .rangingConfirmed, timestamp: tStart, userId: user, handshake: handshake, at: now)
            fx.append(.postCheckIn(event))
        } else {
            fx.append(.log(.warning, "check-in at \(siteId) skipped: no persisted user id"))
        }
        fx.append(.persistSnapshot(snapshot(at: now)))
        fx.append(.notifyUser(UserNotification(kind: .checkedIn, message: "Checked in at \(siteId)")))
        if continuousScanActive { schedule(.signalWatchdog, at: now + config.signalLossMs, &fx) }
        if config.heartbeatIntervalMs > 0 { schedule(.heartbeat, at: now + config.heartbeatIntervalMs, &fx) }
    }

    /// Closes the open session. The check-out's `timestamp` is the last moment of presence, not the
    /// (later) moment of decision.
    mutating func checkOut(reason: AttendanceReason, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        guard let s = session else { return }
        if s.checkInPosted, let user = s.userId {
            // Leaving the geofence, the last reading of the site (however weak: the walk out past the
            // gate) dates the departure; otherwise the last moment of presence does. A session restored
            // after a relaunch whose site this process has not heard since did not see the walk out:
            // the exit itself dates it (the OS reports it soon after), not the presence persisted before
            // the relaunch (the arrival, for a desk out of the gate's range).
            let lastSeen: Timestamp
            if reason == .geofenceExit, lastSiteReadingAt == .distantPast, let restartedAt = launchedAfterDeviceRestartAt,
                now - restartedAt <= Self.exitAfterRestartWindowMs
            {
                // The device was off since the earlier process last knew the session was going, and the OS
                // reports the exit as it comes back: the person may have left at any time while it was off, so
                // that moment dates the departure, not the report.
                let lastKnown = restoredPhoneClockSavedAt.map { $0 - phoneClockOffsetMs } ?? lastPresentAt
                lastSeen = min(max(lastPresentAt, lastKnown), now)
            } else if reason == .geofenceExit {
                lastSeen = lastSiteReadingAt == .distantPast ? now : min(max(lastPresentAt, lastSiteReadingAt), now)
            } else if reason == .userChanged, phase == .present {
                // Handed over while present (a shared phone at a shift change): as a heartbeat would have said,
                // the previous user was there until now, not only until the last reading above the threshold.
                lastSeen = now
            } else {
                lastSeen = lastPresentAt
            }
            // Never before the session's start: `makeEvent` compares the two stamps when they are on the
            // same clock (in steady time a restored start on the server's clock may lie ahead).
            let event = makeEvent(.checkOut, of: s, reason: reason, timestamp: lastSeen, userId: user, handshake: nil, at: now)
            fx.append(.postCheckOut(event))
        } else {
            fx.append(.log(.warning, "check-out at \(s.siteId) skipped: its check-in was never posted (no persisted user id)"))
        }
        endSession(&fx)
        fx.append(.persistSnapshot(snapshot(at: now)))
        fx.append(.notifyUser(UserNotification(kind: .checkedOut, message: "Checked out of \(s.siteId)")))
    }

    /// Forgets the open session and cancels its timers (nothing is posted).
    mutating func endSession(_ fx: inout [PresenceEffect]) {
        // A site known only from its beacons' evidence (no geofence of it entered) is left with its session.
        if atSiteIndex >= 0 && atSiteIndex == sessionSiteIndex && !insideSites.contains(atSiteIndex) { atSiteIndex = -1 }
        session = nil
        restored = nil
        sessionSiteIndex = -1
        cancel(.heartbeat, &fx)
        cancel(.signalWatchdog, &fx)
        cancel(.softExitGrace, &fx)
        cancel(.exitConfirmation, &fx)
    }

    mutating func makeEvent(
        _ kind: AttendanceEvent.Kind, of s: OpenSession, reason: AttendanceReason, timestamp: Timestamp, userId: String,
        handshake: AttendanceEvent.Handshake?, at now: Timestamp
    ) -> AttendanceEvent {
        let nonce = IdempotencyKey.nonce(using: &rng)
        let eventId = UUIDBits.random(using: &rng).uuidString
        // A check-out never before its session's start, whichever way the clock moved since; but a time
        // on the phone's clock and one on the server's are not compared (a restored session).
        let start = Stamp(time: s.stampedStart, onPhoneClock: s.startOnPhoneClock, restored: restored?.sessionKey == s.key)
        var own = stamped(timestamp)
        if kind == .checkIn || (own.onPhoneClock == start.onPhoneClock && start.time > own.time) { own = start }
        let time = own.time
        // The marks name the phone-clock times of the process that made the event's own time: this one's
        // (they move with a setting of its clock), or an earlier one's (its reading of the clock is not
        // known here: no epoch, so they are corrected but never moved). A phone-clock time of the other
        // process is left unmarked; only `timestamp` reaches the server.
        let earlier = own.onPhoneClock && own.restored
        let marks = Self.marks(
            timestamp: own.onPhoneClock, tStart: s.startOnPhoneClock && start.restored == earlier,
            decidedAt: !stampsWithServerClock && !earlier)
        let key = IdempotencyKey.make(
            userId: userId, deviceId: s.deviceId, beaconId: s.beacon.beaconId, tStart: time, nonce: nonce)
        // The session's beacon may not be tracked (a relaunch, a new smoothing setting, eviction by
        // nearer beacons): then no series at all, never an empty one, which the gateway refuses.
        let samples = tracker.index(of: s.beacon).map { tracker.slot($0).smoother.samples } ?? []
        let series: [Int]? = samples.isEmpty ? nil : samples
        let radius =
            sessionSiteIndex >= 0
            ? (directory[sessionSiteIndex].radiusMeters ?? config.geofenceRadiusMeters) : config.geofenceRadiusMeters
        return AttendanceEvent(
            id: eventId, type: kind, idempotencyKey: key, nonce: nonce, userId: userId,
            deviceId: s.deviceId, siteId: s.siteId, beacon: s.beacon, timestamp: time,
            tStart: s.stampedStart, decidedAt: stamp(now), sessionKey: s.key, rssiSeries: series, reason: reason,
            motion: AttendanceEvent.Motion(state: motion.lastActivity, steps2min: motion.steps(at: now)),
            geofence: AttendanceEvent.GeofenceInfo(
                inside: sessionSiteIndex >= 0 && insideSites.contains(sessionSiteIndex), radius: radius),
            handshake: handshake,
            network: AttendanceEvent.Network(online: online),
            phoneClock: marks, phoneClockEpoch: marks == nil || earlier ? nil : Self.epochText(clockEpoch))
    }

    // MARK: Soft exit

    mutating func enterSoftExit(reason: AttendanceReason, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        phase = .softExitPending
        exitReason = reason
        softExitSince = now
        cancel(.signalWatchdog, &fx)
        schedule(.softExitGrace, at: now + config.softExitGraceMs, &fx)
        fx.append(.log(.info, "soft exit at \(session?.siteId ?? "?"): grace until \(stamp(now + config.softExitGraceMs).iso8601)"))
    }

    mutating func resumePresence(at now: Timestamp, _ fx: inout [PresenceEffect]) {
        let wasPresent = phase == .present
        phase = .present
        lastPresentAt = now
        cancel(.softExitGrace, &fx)
        cancel(.exitConfirmation, &fx)
        stopRanging(&fx)
        if continuousScanActive && timers[.signalWatchdog] == nil {
            schedule(.signalWatchdog, at: now + config.signalLossMs, &fx)
        }
        if config.heartbeatIntervalMs > 0 && timers[.heartbeat] == nil {
            schedule(.heartbeat, at: now + config.heartbeatIntervalMs, &fx)
        }
        if !wasPresent {
            fx.append(.log(.info, "presence at \(session?.siteId ?? "?") confirmed again; session continues"))
        }
    }

    /// The motion coprocessor has reported the device at rest, with no walking or running since the
    /// signal was lost, and the device is inside the session site's geofence (when co-location is on).
    /// Walking that began the loss within `dwellWindowMs` of the check-in is the walk from the gate to
    /// a seat, not a departure.
    var isRestingSinceLoss: Bool {
        guard motion.lastActivity == .stationary,
            !config.flags.requireGeofence || insideSites.contains(sessionSiteIndex)
        else { return false }
        let walkToSeat =
            session.map { softExitSince >= $0.tStart && softExitSince - $0.tStart <= max(config.dwellWindowMs, 120_000) } ?? false
        return motion.lastActiveAt < softExitSince || walkToSeat
    }

    /// The grace and the confirmation ran out without the beacon coming back.
    mutating func finalizeExit(reason: AttendanceReason, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        stopRanging(&fx)
        cancel(.softExitGrace, &fx)
        cancel(.exitConfirmation, &fx)
        switch config.checkOutTrigger {
        case .beaconLoss:
            if isRestingSinceLoss {
                // Weak signal alone never checks out someone at rest inside the geofence: a desk in a
                // radio shadow is still a desk. The loss is looked at again after another grace; walking
                // (or leaving the geofence) ends the session as usual.
                phase = .softExitPending
                softExitSince = now
                schedule(.softExitGrace, at: now + config.softExitGraceMs, &fx)
                fx.append(
                    .log(
                        .info,
                        "signal lost at \(session?.siteId ?? "?") but the device has been at rest inside the geofence since: no check-out"))
                return
            }
            checkOut(reason: reason, at: now, &fx)
        case .geofenceExit:
            cancel(.signalWatchdog, &fx)
            if session != nil && sessionSiteIndex < 0 {
                // The session's site left the directory (the user was moved): its geofence is no longer
                // watched, so no exit will post the check-out; the grace ran out, so it ends here.
                checkOut(reason: reason, at: now, &fx)
            } else {
                // The debounce ending only tells the user; the exit is posted on geofence exit.
                let site = session?.siteId ?? "?"
                fx.append(.notifyUser(UserNotification(kind: .signalLost, message: "Disconnected from the beacon at \(site)")))
            }
        }
        phase = restingPhase
        // No session left and outside every geofence (the removed site's was the last): stop scanning.
        _ = settleOutsideEveryGeofence(&fx)
    }

    // MARK: Timers

    mutating func onTimer(_ id: TimerID, at now: Timestamp) -> [PresenceEffect] {
        guard let deadline = timers[id], now >= deadline else { return [] } // cancelled, replaced or early
        timers[id] = nil
        var fx: [PresenceEffect] = []
        switch id {
        case .rangingWindow:
            if phase == .candidate && rangingActive && rangingExtensionsUsed < config.rangingExtensions
                && beaconRegionInside, let nearest = tracker.nearest(at: now),
                tracker.slot(nearest).smoothed > Float(config.leaveRssi - 15)
            {
                // Someone still approaching the gate: keep ranging one more window.
                rangingExtensionsUsed += 1
                schedule(.rangingWindow, at: now + config.rangingWindowMs, &fx)
                fx.append(
                    .log(
                        .debug,
                        "ranging window extended (\(rangingExtensionsUsed)/\(config.rangingExtensions)): beacon heard, no candidate yet"))
                break
            }
            if rangingActive {
                rangingActive = false
                fx.append(.stopScanning(.ranging))
            }
            if phase == .candidate {
                phase = restingPhase
                fx.append(.log(.info, "ranging window ended without a confident nearest beacon: no candidate"))
            }
        case .softExitGrace:
            guard phase == .softExitPending else { break }
            if config.exitConfirmationMs > 0 {
                phase = .confirmingExit
                fx.append(.requestRegionState)
                if !continuousScanActive { startRanging(at: now, &fx) }
                schedule(.exitConfirmation, at: now + config.exitConfirmationMs, &fx)
            } else {
                finalizeExit(reason: exitReason, at: now, &fx)
            }
        case .exitConfirmation:
            guard phase == .confirmingExit else { break }
            finalizeExit(reason: exitReason, at: now, &fx)
        case .signalWatchdog:
            guard phase == .present, continuousScanActive else { break }
            if now - lastSiteHeardAt >= config.signalLossMs {
                enterSoftExit(reason: .beaconLost, at: now, &fx)
            } else {
                schedule(.signalWatchdog, at: lastSiteHeardAt + config.signalLossMs, &fx)
            }
        case .heartbeat:
            guard let s = session, config.heartbeatIntervalMs > 0 else { break }
            if phase == .present {
                // Without continuous scanning no readings arrive while present; being in `present`
                // means the OS still reports the region, so presence extends to now.
                if !continuousScanActive { lastPresentAt = now }
                if s.checkInPosted, let user = s.userId {
                    let event = makeEvent(
                        .heartbeat, of: s, reason: .stillPresent, timestamp: now, userId: user, handshake: nil, at: now)
                    fx.append(.postHeartbeat(event))
                }
                fx.append(.persistSnapshot(snapshot(at: now)))
            }
            schedule(.heartbeat, at: now + config.heartbeatIntervalMs, &fx)
        case .gattTimeout:
            guard phase == .verifying else { break }
            gattFailed("GATT challenge timed out", at: now, &fx)
        }
        return fx
    }

    mutating func schedule(_ id: TimerID, at time: Timestamp, _ fx: inout [PresenceEffect]) {
        timers[id] = time
        fx.append(.scheduleTimer(id, at: time))
    }

    mutating func cancel(_ id: TimerID, _ fx: inout [PresenceEffect]) {
        guard timers[id] != nil else { return }
        timers[id] = nil
        fx.append(.cancelTimer(id))
    }

    // MARK: Scanning

    mutating func startRanging(at now: Timestamp, _ fx: inout [PresenceEffect]) {
        if !rangingActive {
            rangingActive = true
            fx.append(.startScanning(.ranging))
        }
        schedule(.rangingWindow, at: now + config.rangingWindowMs, &fx)
    }

    /// A ranging window to find a candidate (armed → candidate).
    mutating func startRangingWindow(at now: Timestamp, _ fx: inout [PresenceEffect]) {
        rangingExtensionsUsed = 0
        startRanging(at: now, &fx)
        if phase == .armed { phase = .candidate }
    }

    mutating func stopRanging(_ fx: inout [PresenceEffect]) {
        cancel(.rangingWindow, &fx)
        if rangingActive {
            rangingActive = false
            fx.append(.stopScanning(.ranging))
        }
    }

    mutating func startContinuous(_ fx: inout [PresenceEffect]) {
        continuousScanActive = true
        fx.append(.startScanning(.continuous))
        stopRanging(&fx)
        if phase == .candidate { phase = restingPhase }
    }

    mutating func stopAllScans(_ fx: inout [PresenceEffect]) {
        if continuousScanActive {
            continuousScanActive = false
            fx.append(.stopScanning(.continuous))
        }
        stopRanging(&fx)
    }

    // MARK: Region, geofence, location

    mutating func onRegionEntered(at now: Timestamp) -> [PresenceEffect] {
        beaconRegionInside = true
        var fx: [PresenceEffect] = [.drainOutbox]
        switch phase {
        case .idle:
            fx.append(.log(.info, "beacon region entered outside every geofence: waiting for the geofence (co-location)"))
        case .armed:
            if !continuousScanActive { startRangingWindow(at: now, &fx) }
        case .softExitPending, .confirmingExit:
            if !continuousScanActive { startRanging(at: now, &fx) }
        case .candidate, .verifying, .present:
            break
        }
        return fx
    }

    mutating func onRegionExited(at now: Timestamp) -> [PresenceEffect] {
        beaconRegionInside = false
        guard phase == .present else { return [] }
        var fx: [PresenceEffect] = []
        if continuousScanActive {
            // Our own scan is the better witness: ignore the OS while it still hears the site.
            if now - lastSiteHeardAt < config.signalLossMs,
                let best = tracker.bestSmoothed(site: sessionSiteIndex, at: now), best > Float(config.leaveRssi)
            {
                return []
            }
        } else {
            lastPresentAt = max(lastPresentAt, now)
        }
        enterSoftExit(reason: .beaconLost, at: now, &fx)
        return fx
    }

    mutating func onRegionState(inside: Bool, at now: Timestamp) -> [PresenceEffect] {
        beaconRegionInside = inside
        var fx: [PresenceEffect] = []
        switch phase {
        case .confirmingExit:
            // The namespace region says nothing of a session whose site is no longer in the directory.
            if inside && sessionSiteIndex >= 0 {
                resumePresence(at: now, &fx)
            } else {
                // Inside here is a removed site's session: the region said nothing of it.
                finalizeExit(reason: inside ? .beaconLost : exitReason == .beaconLost ? .regionStateOutside : exitReason, at: now, &fx)
            }
        case .armed:
            if inside && !continuousScanActive { startRangingWindow(at: now, &fx) }
        case .softExitPending:
            if inside && !continuousScanActive && !rangingActive { startRanging(at: now, &fx) }
        case .idle, .candidate, .verifying, .present:
            break
        }
        return fx
    }

    mutating func enterGeofence(_ index: Int32, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        guard !insideSites.contains(index) else { return }
        insideSites.insert(index)
        atSiteIndex = index
        fx.append(.drainOutbox)
        if phase == .idle { phase = .armed }
        if config.flags.continuousScan {
            if !continuousScanActive { startContinuous(&fx) }
        } else if beaconRegionInside && phase == .armed {
            startRangingWindow(at: now, &fx)
        }
        fx.append(.persistSnapshot(snapshot(at: now)))
    }

    mutating func exitGeofence(_ index: Int32, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        guard insideSites.contains(index) else { return }
        insideSites.remove(index)
        if atSiteIndex == index { atSiteIndex = -1 }
        let siteId = directory[index].id
        if sessionSiteIndex == index && session != nil {
            checkOut(reason: .geofenceExit, at: now, &fx)
            phase = restingPhase
        }
        if dwellCandidate?.siteIndex == index { dwellCandidate = nil }
        if let pending = pendingCandidate, pending.siteIndex == index, config.flags.requireGeofence {
            pendingCandidate = nil
            cancel(.gattTimeout, &fx)
            phase = restingPhase
        }
        if insideSites.isEmpty && config.flags.requireGeofence {
            // Geofence exit: stop the continuous scan, clear the debounce timer, OUTSIDE.
            if session != nil { checkOut(reason: .geofenceExit, at: now, &fx) }
            stopAllScans(&fx)
            for id in TimerID.allCases { cancel(id, &fx) }
            pendingCandidate = nil
            phase = .idle
            fx.append(.notifyUser(UserNotification(kind: .leftArea, message: "Left the area of \(siteId)")))
        } else if session == nil && (phase == .present || phase == .softExitPending || phase == .confirmingExit) {
            phase = restingPhase
        }
        fx.append(.persistSnapshot(snapshot(at: now)))
    }

    mutating func onLocation(_ point: GeoPoint, at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = []
        for i in 0..<Int32(directory.sites.count) {
            let (fence, exitMargin) = self.fence(ofSite: i)
            let distance = fence.distance(to: point)
            if insideSites.contains(i) {
                if distance > fence.radiusMeters + exitMargin { exitGeofence(i, at: now, &fx) }
            } else if distance <= fence.radiusMeters {
                enterGeofence(i, at: now, &fx)
            }
        }
        return fx
    }

    // MARK: Motion, GATT

    mutating func motionMayUnlock(at now: Timestamp) -> [PresenceEffect] {
        guard phase == .armed || phase == .candidate, motion.isSatisfied(at: now) else { return [] }
        return tryConfirm(at: now)
    }

    /// "Near but gated" is logged at most once a minute, not once per sample.
    mutating func gatedLog(_ message: String, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        guard now - lastGateLogAt >= 60_000 else { return }
        lastGateLogAt = now
        fx.append(.log(.info, message))
    }

    mutating func onGattResult(ok: Bool, roundTripMs: Int, at now: Timestamp) -> [PresenceEffect] {
        guard phase == .verifying, let candidate = pendingCandidate else { return [] }
        var fx: [PresenceEffect] = []
        cancel(.gattTimeout, &fx)
        if ok {
            checkIn(candidate, handshake: AttendanceEvent.Handshake(ok: true, rt: roundTripMs), at: now, &fx)
        } else {
            gattFailed("GATT challenge failed for \(candidate.beacon)", at: now, &fx)
        }
        return fx
    }

    mutating func gattFailed(_ message: String, at now: Timestamp, _ fx: inout [PresenceEffect]) {
        pendingCandidate = nil
        gattCooldownUntil = now + config.gattRetryCooldownMs
        phase = rangingActive ? .candidate : restingPhase
        fx.append(.log(.warning, message + "; no check-in, retry after \(config.gattRetryCooldownMs) ms"))
    }

    // MARK: Lifecycle

    mutating func onPeriodicWake(at now: Timestamp) -> [PresenceEffect] {
        if continuousScanActive {
            // The periodic task is a fallback; it skips while the continuous scan runs.
            return [.log(.info, "periodic fallback skipped: continuous scan is active")]
        }
        if phase == .idle {
            return [.log(.info, "periodic fallback skipped: outside every geofence")]
        }
        var fx: [PresenceEffect] = [.drainOutbox]
        if config.flags.continuousScan {
            // The continuous scan stopped (e.g. full suspension); restart it.
            startContinuous(&fx)
            fx.append(.log(.info, "periodic fallback restarted the continuous scan"))
            if phase == .present { schedule(.signalWatchdog, at: now + config.signalLossMs, &fx) }
            return fx
        }
        switch phase {
        case .armed: startRangingWindow(at: now, &fx)
        case .softExitPending: startRanging(at: now, &fx)
        default: break
        }
        return fx
    }

    mutating func onScanningStopped(_ mode: ScanMode, at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = []
        switch mode {
        case .continuous:
            guard continuousScanActive else { return [] }
            continuousScanActive = false
            cancel(.signalWatchdog, &fx)
            fx.append(.log(.info, "continuous scan stopped by the system; the periodic fallback will restart it"))
        case .ranging:
            guard rangingActive else { return [] }
            rangingActive = false
            cancel(.rangingWindow, &fx)
            if phase == .candidate { phase = restingPhase }
        }
        return fx
    }

    mutating func onLaunched(at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = [.drainOutbox, .requestRegionState]
        if let s = session, s.userId != identity.userId {
            // The user changed while the app was not running (a login or a logout between two runs):
            // what `onUserChanged` would have done then (the previous user's session checked out, one
            // with no check-in dropped).
            let current = identity.userId
            identity.userId = s.userId
            fx += onUserChanged(current, deviceId: nil, at: now)
        }
        if let s = session, let saved = restoredPhoneClockSavedAt, now + phoneClockOffsetMs - saved > config.sessionResumeLimitMs {
            // Off for longer than a session may resume (a phone that died at its desk in the evening,
            // switched on the next morning): what happened meanwhile is not known. The session ends at
            // its last presence, and detection starts afresh: a check-in of its own if the person is at
            // the site, never heartbeats for a session the server has closed at its idle cutoff, nor a
            // departure dated by an exit reported hours after it.
            fx.append(
                .log(
                    .info,
                    "session at \(s.siteId) restored \((now + phoneClockOffsetMs - saved) / 60_000) min after it was last known: checked out at its last presence"
                ))
            checkOut(reason: .notFoundAfterRelaunch, at: now, &fx)
            phase = restingPhase
        }
        if session != nil {
            phase = .softExitPending
            exitReason = .notFoundAfterRelaunch
            schedule(.softExitGrace, at: now + config.softExitGraceMs, &fx)
            if config.heartbeatIntervalMs > 0 { schedule(.heartbeat, at: now + config.heartbeatIntervalMs, &fx) }
        }
        if config.flags.continuousScan && phase != .idle {
            if !continuousScanActive { startContinuous(&fx) }
        } else if session != nil {
            startRanging(at: now, &fx)
        }
        return fx
    }

    mutating func onTerminated(forceQuit: Bool, at now: Timestamp) -> [PresenceEffect] {
        var fx: [PresenceEffect] = []
        if phase == .present && !continuousScanActive { lastPresentAt = max(lastPresentAt, now) }
        fx.append(.persistSnapshot(snapshot(at: now)))
        stopAllScans(&fx)
        for id in TimerID.allCases { cancel(id, &fx) }
        fx.append(.log(.info, "app terminated (force quit: \(forceQuit)); snapshot persisted"))
        return fx
    }

    /// A session whose check-in was posted is checked out for its user. A session whose check-in was
    /// never posted (opened with no user id) is dropped without a post: resuming it would give the new
    /// user no check-in for the whole stay, so detection starts afresh for them.
    mutating func onUserChanged(_ user: String?, deviceId: String?, at now: Timestamp) -> [PresenceEffect] {
        // The open session's events keep the enrollment it opened under (`OpenSession.deviceId`); the
        // sessions after it take the new one.
        if let deviceId { identity.deviceId = deviceId }
        guard user != identity.userId else { return [] }
        var fx: [PresenceEffect] = []
        if let s = session, s.checkInPosted, s.userId != user {
            checkOut(reason: .userChanged, at: now, &fx)
            stopRanging(&fx)
            pendingCandidate = nil
            phase = restingPhase
        } else if let s = session, !s.checkInPosted {
            fx.append(
                .log(.info, "session at \(s.siteId) dropped: its check-in was never posted; detection starts afresh for the new user"))
            endSession(&fx)
            stopRanging(&fx)
            pendingCandidate = nil
            phase = restingPhase
            fx.append(.persistSnapshot(snapshot(at: now)))
            // Without the continuous scan nothing would look for the beacon until the next region event.
            if !continuousScanActive && beaconRegionInside && phase == .armed { startRangingWindow(at: now, &fx) }
        }
        identity.userId = user
        return fx
    }
}

/// A configuration held by reference (`PresenceStateMachine.deviceConfigAtSite`).
final class ConfigBox: Sendable {
    let config: PresenceConfig

    init(_ config: PresenceConfig) { self.config = config }
}
