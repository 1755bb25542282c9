/// Inputs of the `PresenceStateMachine`: everything the platform (or the fleet simulator) observes.
/// The time of each event is passed alongside it (`handle(_:at:)`), on the device's steady clock.
public enum PresenceEvent: Sendable, Hashable {
    /// One RSSI sample of one beacon (a ranging callback entry or a continuous-scan result).
    /// RSSI 0 / 127 is missing data.
    case beaconReading(BeaconReading)
    /// The OS reports entering / leaving the company's beacon region (iBeacon region monitoring); it may
    /// relaunch a terminated app to deliver this.
    case beaconRegionEntered
    case beaconRegionExited
    /// Answer to `PresenceEffect.requestRegionState` (iOS `requestState(for:)`).
    case beaconRegionState(inside: Bool)
    /// The OS reports crossing a site's geofence (arming; the geofence task of continuous
    /// scanning).
    case geofenceEntered(siteId: String)
    case geofenceExited(siteId: String)
    /// A location fix (significant change, visit, or GPS): evaluated against every site's geofence by
    /// the haversine distance, with an exit margin against jitter.
    case location(GeoPoint)
    /// Motion coprocessor activity, and steps taken since the previous `steps` event.
    case motionActivity(MotionActivity)
    case steps(Int)
    /// Result of `PresenceEffect.performGattChallenge`.
    case gattChallengeResult(ok: Bool, roundTripMs: Int)
    /// Network reachability changed; coming online triggers an outbox drain.
    case connectivityChanged(online: Bool)
    /// The periodic background task fired (every 15 min; it is a fallback and skips while the
    /// continuous scan runs).
    case periodicWake
    /// The OS stopped one of our scans (for example the app was fully suspended).
    case scanningStopped(ScanMode)
    /// The process started (first launch, relaunch by a region event, after a crash or force-quit).
    /// Build the machine with `restoring:` first when a snapshot was persisted.
    case appLaunched
    /// As `appLaunched`, for a launch right after the device itself was off or restarted since the
    /// snapshot the machine was built from (the host compares the device's boot time with when it last
    /// saved one, and the launch comes within minutes of the boot). The phone cannot say when its person
    /// left while it was off: a restored session's check-out at a geofence exit reported within 10 minutes
    /// of this launch, before anything is heard, is dated at the last moment the earlier process knew the
    /// session was going, not at the report (a phone whose battery died at the desk and that was switched
    /// on at home hours later). A later exit is dated as usual: the phone was on, inside, until then.
    case appLaunchedAfterDeviceRestart
    /// The process is about to end (force-quit, OS termination). The machine persists its snapshot.
    case appTerminated(forceQuit: Bool)
    /// A timer the machine scheduled with `scheduleTimer` is due.
    case timerFired(TimerID)
    /// The persisted user id changed (login, logout: nil). The previous user's open session is checked
    /// out first, under their identity. A phone enrolled anew for the new user (a shared phone handed over
    /// at a shift change: the registry makes each enrollment a device of its own) passes the new
    /// enrollment's `deviceId`, which the new user's events then carry; nil keeps the device id. The host
    /// sends each outbox entry with the token of the enrollment it names (`AttendanceEvent.deviceId`):
    /// keep the earlier enrollment's token until the outbox holds none of its entries.
    case userIdChanged(String?, deviceId: String? = nil)
    /// The phone's wall clock reads `offsetMs` ahead of the steady time the host passes as `at:` (behind,
    /// when negative; `SteadyClock.wallClockOffsetMs()`): until the server's clock is known the device
    /// stamps what it sends and persists with it, and marks those stamps as the phone's
    /// (`AttendanceEvent.phoneClock`). Deliver it whenever it moves while the server's clock is unknown
    /// (the OS says the clock was set): the stamps marked so far move with it
    /// (`PresenceEffect.phoneClockSet`), so that one correction fits them all. Timers and durations keep
    /// to the steady time.
    case clockOffsetChanged(offsetMs: Int64)
    /// The server's clock is known (`ServerClock`): it reads `offsetMs` ahead of the steady time, and the
    /// phone's wall clock reads `phoneAheadMs` ahead of it (`ServerClock.phoneAheadMs(wallClockOffsetMs:)`).
    /// From now on the device stamps with the server's clock, and the times stamped so far with the
    /// phone's clock are moved back by `phoneAheadMs`: the open session's start and a restored presence
    /// here, the outbox entries through `PresenceEffect.correctPhoneClockStamps`. Deliver it when the
    /// server's clock becomes known, whenever its estimate moves or the phone's wall clock is set
    /// (`PresenceStateMachine.clockEvent` says when), and before a drain that finds a marked entry at the
    /// head of the outbox (the drainer never sends one: `OutboxDrainer.Stop.awaitingServerClock`).
    case serverClockKnown(offsetMs: Int64, phoneAheadMs: Int64)
}

/// Outputs of the `PresenceStateMachine`: what the host should do. Data, never I/O.
public enum PresenceEffect: Sendable, Hashable {
    /// Write to the outbox (together with the `persistSnapshot` that follows in the same batch), then
    /// send: `POST /v1/attendance/events` or the session contracts (check-in, check-out, heartbeat).
    case postCheckIn(AttendanceEvent)
    case postCheckOut(AttendanceEvent)
    case postHeartbeat(AttendanceEvent)
    /// Durable state to survive a crash or force-quit; store it as the outbox checkpoint (atomically
    /// with a post in the same batch, see `Outbox.store(_:)`).
    case persistSnapshot(PresenceSnapshot)
    /// Show a local notification (connect / disconnect / left-area notifications).
    case notifyUser(UserNotification)
    case startScanning(ScanMode)
    case stopScanning(ScanMode)
    /// Deliver `.timerFired(id)` at `at` (replaces any earlier schedule of `id`).
    case scheduleTimer(TimerID, at: Timestamp)
    case cancelTimer(TimerID)
    /// Ask the OS whether the device is inside the beacon region (exit confirmation).
    case requestRegionState
    /// Run the GATT challenge-response with this beacon and report `.gattChallengeResult`.
    case performGattChallenge(BeaconIdentity)
    /// Move the times of the outbox entries stamped with the phone's own clock back by `phoneAheadMs`,
    /// onto the server's clock, and unmark them (`Outbox.store(_:)` does it:
    /// `Outbox.correctPhoneClockStamps`). Comes with every `.serverClockKnown`.
    case correctPhoneClockStamps(phoneAheadMs: Int64)
    /// The phone's clock was set by `byMs` before the server's was known: move the marked times of the
    /// outbox entries this process stamped with it (`AttendanceEvent.phoneClockEpoch` == `epoch`) by as
    /// much; they stay marked (`Outbox.store(_:)` does it: `Outbox.movePhoneClockStamps`).
    case phoneClockSet(byMs: Int64, epoch: String)
    /// Drain the outbox now if the network allows (on launch and on every trigger).
    case drainOutbox
    case log(LogLevel, String)
}

public enum ScanMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// Continuous RSSI scanning inside the geofence.
    case continuous
    /// A short ranging burst of at most `rangingWindowMs`, started by a region or geofence event.
    case ranging
}

public enum TimerID: String, Sendable, Hashable, Codable, CaseIterable {
    /// End of a ranging burst.
    case rangingWindow
    /// End of the soft-exit grace (the 3-minute debounce).
    case softExitGrace
    /// End of the wait for exit confirmation.
    case exitConfirmation
    /// Checks for silence while continuously scanning (rescheduled lazily: one timer per silence
    /// period, not one per sample).
    case signalWatchdog
    case heartbeat
    case gattTimeout
}

public enum LogLevel: String, Sendable, Hashable, Codable {
    case debug, info, warning, error
}

public struct UserNotification: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case checkedIn, checkedOut, signalLost, leftArea
    }

    public var kind: Kind
    public var message: String
}

/// Why an attendance event was produced (sent as `reason`).
public enum AttendanceReason: String, Sendable, Hashable, Codable, CaseIterable {
    /// Check-in: the nearest beacon passed the ranging confidence rule (and motion, and GATT if on).
    case rangingConfirmed = "ranging_confirmed"
    /// Check-out: soft-exit grace ran out and the loss was confirmed (or confirmation timed out).
    case beaconLost = "beacon_lost"
    /// Check-out: the OS answered the confirmation with "outside the beacon region".
    case regionStateOutside = "region_state_outside"
    /// Check-out: the device left the session's site geofence.
    case geofenceExit = "geofence_exit"
    /// Check-out: a beacon of another site took over.
    case siteChanged = "site_changed"
    /// Check-out: the persisted user changed (logout / another login).
    case userChanged = "user_changed"
    /// Check-out: the machine was relaunched with an open session and did not find the beacon again.
    case notFoundAfterRelaunch = "not_found_after_relaunch"
    /// Heartbeat while present.
    case stillPresent = "still_present"
}

/// One attendance event as the device stores and sends it. Field names follow the device payload of
/// `POST /v1/attendance/events` where it has them, plus the session contracts' `sessionKey` / `reason`.
/// Times are epoch milliseconds (the host maps them to ISO-8601 with `Timestamp.iso8601Milliseconds` for
/// the REST payload: whole seconds would move a session's start back by up to 999 ms, and make two
/// heartbeats of one second the same request).
public struct AttendanceEvent: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case checkIn = "checkin"
        case checkOut = "checkout"
        case heartbeat
    }

    public struct Motion: Sendable, Hashable, Codable {
        public var state: MotionActivity
        public var steps2min: Int
    }

    public struct GeofenceInfo: Sendable, Hashable, Codable {
        public var inside: Bool
        public var radius: Double
    }

    public struct Handshake: Sendable, Hashable, Codable {
        public var ok: Bool
        /// Round trip, milliseconds.
        public var rt: Int
    }

    public struct Network: Sendable, Hashable, Codable {
        public var online: Bool
    }

    /// Local event id, a random UUID v4.
    public var id: String
    public var type: Kind
    public var idempotencyKey: IdempotencyKey
    /// The nonce inside the idempotency key (kept so the key can be re-derived and audited).
    public var nonce: String
    public var userId: String
    public var deviceId: String
    public var siteId: String
    public var beacon: BeaconIdentity
    /// When the event happened: session start for a check-in, last moment of presence for a
    /// check-out, emission time for a heartbeat.
    public var timestamp: Timestamp
    /// Start of the session this event belongs to.
    public var tStart: Timestamp
    /// When the device decided (a check-out is decided after the grace; `timestamp` is earlier).
    public var decidedAt: Timestamp
    /// Groups the check-in, heartbeats and check-out of one session (the session contracts).
    public var sessionKey: String
    /// The session beacon's readings in the smoothing window, oldest first; nil (absent from the JSON)
    /// when the machine holds none, e.g. after a relaunch: the gateway refuses an empty series.
    public var rssiSeries: [Int]?
    public var reason: AttendanceReason
    public var motion: Motion
    public var geofence: GeofenceInfo
    public var handshake: Handshake?
    public var network: Network
    /// Which of the times are the phone's own clock: stamped before any answer had told the device the
    /// server's clock (a session restored from a process that knew it may mix the two). Such times may
    /// be far off (a phone kept fast, a clock reset to an old date), and the gateway refuses an event
    /// time more than 5 minutes ahead or 7 days behind its own, so the outbox moves them onto the
    /// server's clock once it is known (`Outbox.correctPhoneClockStamps`) and the drainer never sends
    /// the event before. Nil (absent from the JSON) when all are the server's. Never sent.
    public var phoneClock: [StampedTime]?
    /// With `phoneClock`: the process that stamped the times (`PresenceStateMachine.clockEpoch`, 16 hex
    /// digits), so that a setting of the phone's clock moves only the times made with that process's
    /// reading of it. Never sent.
    public var phoneClockEpoch: String?

    /// A time of the event, as named in `phoneClock`.
    public enum StampedTime: String, Sendable, Hashable, Codable, CaseIterable {
        case timestamp, tStart, decidedAt
    }
}

/// An open attendance session as persisted for crash / force-quit recovery. Its times are stamped like
/// the events (`tStart` as the check-in posted it), so a relaunched process whose steady clock starts
/// elsewhere places them through its own offset.
public struct SessionCheckpoint: Sendable, Hashable, Codable {
    public var sessionKey: String
    /// User the check-in was posted for (nil when it was skipped for lack of a user id).
    public var userId: String?
    public var siteId: String
    public var beacon: BeaconIdentity
    public var tStart: Timestamp
    public var lastPresentAt: Timestamp
    public var checkInPosted: Bool
    /// True when `tStart` is the phone's own clock (see `AttendanceEvent.phoneClock`); nil otherwise.
    public var phoneClockStart: Bool?
    /// True when `lastPresentAt` is the phone's own clock; nil otherwise.
    public var phoneClockLastPresent: Bool?
    /// The enrollment (device id) the session's events are sent under. Absent from snapshots of earlier
    /// versions: the identity the app starts with.
    public var deviceId: String? = nil
}

/// Everything the machine needs after a relaunch: the open session (if any), the geofences it was
/// inside and the site it was at. Small; written as the outbox checkpoint.
public struct PresenceSnapshot: Sendable, Hashable, Codable {
    public var session: SessionCheckpoint?
    public var insideSiteIds: [String]
    public var savedAt: Timestamp
    /// The site the device was at (the geofence it entered last, or the site whose beacon last gave
    /// evidence): its settings win after a relaunch. Absent from snapshots of earlier versions.
    public var atSiteId: String? = nil
    /// The phone's own wall clock when it was written (whatever clock `savedAt` is on): a relaunch
    /// measures how long the app was gone on the same clock. Absent from snapshots of earlier versions.
    public var phoneClockSavedAt: Timestamp? = nil
}
