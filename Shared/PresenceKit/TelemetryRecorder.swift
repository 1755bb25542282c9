/// One device telemetry record, as the app uploads it to `POST /v1/telemetry` (the host maps it to
/// the protocol's `TelemetryEvent`). `name` is the wire name (`region_enter`, `ranging_stop`, ...).
public struct TelemetryRecord: Sendable, Hashable, Codable {
    /// Unique per install and launch (`<install>-<launch>-<sequence>`, hexadecimal install and launch):
    /// the aggregator counts a re-uploaded record once, and a record of a later launch is never
    /// mistaken for one of an earlier launch.
    public var eventId: String
    public var name: String
    public var at: Timestamp
    /// The measurement, when the record has one: scan time in ms, outbox backlog, battery level 0...1.
    public var value: Double?
    public var attributes: [String: String]?

    public init(eventId: String, name: String, at: Timestamp, value: Double? = nil, attributes: [String: String]? = nil) {
        self.eventId = eventId
        self.name = name
        self.at = at
        self.value = value
        self.attributes = attributes
    }
}

/// The app's telemetry: what the detection and the outbox did, recorded from what the host already
/// handles (the events it feeds the state machine, the effects it gets back, the outcome of every
/// send attempt) and kept until an upload is acknowledged. Pure data, no I/O: the host uploads
/// `pending` when it is online and calls `acknowledge(_:)` after the server's 202.
///
/// What is recorded (the names the telemetry aggregator knows):
/// - `region_enter` / `region_exit`: the OS beacon-region events.
/// - `ranging_start` / `ranging_stop`: the phone searching for a beacon. A search starts when a scan
///   starts (either mode) while no session is open, and ends when the scan stops or a check-in is
///   decided; `ranging_stop`'s value is the search time in ms (attribute `mode`: `ranging` or
///   `continuous`). Scanning on while a session is open is presence monitoring, not ranging.
/// - `motion_query`: a motion-activity reading (attribute `activity`).
/// - `gatt_ok` / `gatt_fail`: the GATT challenge's outcome (value: round trip in ms).
/// - `api_201`, `api_200`, `api_409`, `api_202`, `api_400`, `api_422`, `api_429`, `api_5xx`,
///   `api_timeout`: every attendance send attempt's outcome (no attempt is made while offline).
/// - `offline_enqueue`: an attendance event stored while offline (value: the outbox backlog).
/// - `outbox_sent`: a drain that delivered entries (value: the backlog left).
/// - `bg_timeout`: a background drain stopped by the OS budget with entries left.
/// - `battery`: a battery level reading 0...1 (the host reads the OS and calls `recordBattery`).
///
/// Bounded: past `capacity` records the oldest are dropped and counted in `dropped`. Acknowledge an
/// upload with `acknowledge(eventIds:)`: records dropped meanwhile make a count point past the upload.
public struct TelemetryRecorder: Sendable {
    public private(set) var pending: [TelemetryRecord] = []
    public private(set) var dropped = 0
    public let capacity: Int
    private let idPrefix: String
    private var sequence: UInt64 = 0
    private var scanning: Set<ScanMode> = []
    private var searchStartedAt: Timestamp?
    private var searchMode: ScanMode?
    private var sessionOpen = false
    /// Records are stamped `at + clockOffsetMs`, like the attendance events (`.clockOffsetChanged`,
    /// `.serverClockKnown`); durations are measured on `at`, the steady time. Records stamped with the
    /// phone's clock are corrected as the outbox's are: they move with a setting of the phone's clock,
    /// and onto the server's once it is known (a phone whose clock was a month off would otherwise have
    /// every upload refused for its oldest records).
    public private(set) var clockOffsetMs: Int64 = 0
    private var stampsWithServerClock = false
    /// The pending records stamped with the phone's clock: by this launch (they move with a setting of
    /// the clock), and by an earlier one of a recorder kept across launches (`relaunched`: corrected
    /// onto the server's clock, never moved by a setting measured against another launch's reading).
    private var onPhoneClock: Set<String> = []
    private var onEarlierPhoneClock: Set<String> = []

    /// `installId` makes record ids unique across reinstalls of the app on one device (a random
    /// value drawn once per install); `launchId` makes them unique across launches of one install, as
    /// the sequence starts again at 1 in every process. nil (production) draws it from the system
    /// generator; tests pass a fixed one.
    ///
    /// `sessionOpen`: the machine restored an open session at launch (`PresenceStateMachine.openSession`
    /// is not nil), so the scan it starts is presence monitoring, not a search.
    public init(installId: UInt64, launchId: UInt64? = nil, capacity: Int = 2_000, sessionOpen: Bool = false) {
        self.capacity = max(1, capacity)
        self.sessionOpen = sessionOpen
        var system = SystemRandomNumberGenerator()
        let launch = launchId ?? system.next()
        idPrefix = String(installId, radix: 16) + "-" + String(launch, radix: 16)
    }

    /// Records what an input to the state machine says (call with every event the host delivers).
    public mutating func observe(_ event: PresenceEvent, at now: Timestamp) {
        switch event {
        case .beaconRegionEntered: append("region_enter", at: now)
        case .beaconRegionExited: append("region_exit", at: now)
        case .motionActivity(let activity): append("motion_query", at: now, attributes: ["activity": activity.rawValue])
        case .gattChallengeResult(let ok, let roundTripMs): append(ok ? "gatt_ok" : "gatt_fail", at: now, value: Double(roundTripMs))
        case .clockOffsetChanged(let offset):
            if !stampsWithServerClock { movePhoneClockRecords(by: offset - clockOffsetMs) }
            clockOffsetMs = offset
            stampsWithServerClock = false
        case .serverClockKnown(let offset, let phoneAhead):
            onPhoneClock.formUnion(onEarlierPhoneClock)
            onEarlierPhoneClock = []
            movePhoneClockRecords(by: -phoneAhead)
            onPhoneClock = []
            clockOffsetMs = offset
            stampsWithServerClock = true
        default: break
        }
    }

    /// Records what the state machine decided (call with every batch of effects, in order).
    public mutating func observe(_ effects: [PresenceEffect], at now: Timestamp) {
        for effect in effects {
            switch effect {
            case .startScanning(let mode):
                scanning.insert(mode)
                if !sessionOpen { startSearch(mode, at: now) }
            case .stopScanning(let mode):
                scanning.remove(mode)
                if scanning.isEmpty { endSearch(at: now) }
            case .postCheckIn:
                endSearch(at: now)
                sessionOpen = true
            case .postCheckOut:
                sessionOpen = false
                if let mode = scanning.first { startSearch(mode, at: now) }
            default:
                break
            }
        }
    }

    /// For a host that keeps one recorder across launches of the app: the app started again, its steady
    /// clock read `clockOffsetMs` behind the wall clock. Nothing recorded moves (the phone's clock was not
    /// set); the records stamped with it so far are still corrected once the server's clock is known.
    public mutating func relaunched(clockOffsetMs offset: Int64) {
        onEarlierPhoneClock.formUnion(onPhoneClock)
        onPhoneClock = []
        clockOffsetMs = offset
        stampsWithServerClock = false
    }

    /// Records one send attempt's outcome.
    public mutating func recordAttempt(_ result: DeliveryResult, at now: Timestamp) {
        switch result {
        case .response(let status, _, _):
            append(status >= 500 ? "api_5xx" : "api_\(status)", at: now)
        case .timeout:
            append("api_timeout", at: now)
        case .transportError:
            break
        }
    }

    public mutating func recordOfflineEnqueue(backlog: Int, at now: Timestamp) {
        append("offline_enqueue", at: now, value: Double(backlog))
    }

    public mutating func recordOutboxSent(backlog: Int, at now: Timestamp) {
        append("outbox_sent", at: now, value: Double(backlog))
    }

    public mutating func recordBackgroundTimeout(at now: Timestamp) {
        append("bg_timeout", at: now)
    }

    /// A battery level reading, 0...1 (out-of-range readings are clamped).
    public mutating func recordBattery(level: Double, at now: Timestamp) {
        append("battery", at: now, value: min(max(level, 0), 1))
    }

    /// The upload went through: forget the first `count` pending records. Only right when no record
    /// was dropped for capacity since the host read `pending`; `acknowledge(eventIds:)` always is.
    public mutating func acknowledge(_ count: Int) {
        let taken = min(max(count, 0), pending.count)
        for record in pending.prefix(taken) { forgetStamp(of: record.eventId) }
        pending.removeFirst(taken)
    }

    /// The upload of these records went through: forget them (ids no longer pending are ignored).
    public mutating func acknowledge(eventIds: some Sequence<String>) {
        let uploaded = Set(eventIds)
        guard !uploaded.isEmpty else { return }
        pending.removeAll { uploaded.contains($0.eventId) }
        onPhoneClock.subtract(uploaded)
        onEarlierPhoneClock.subtract(uploaded)
    }

    /// A record that left `pending`: no clock to correct any more.
    private mutating func forgetStamp(of eventId: String) {
        onPhoneClock.remove(eventId)
        onEarlierPhoneClock.remove(eventId)
    }

    /// Moves the records stamped with the phone's clock by `shift` ms.
    private mutating func movePhoneClockRecords(by shift: Int64) {
        guard shift != 0, !onPhoneClock.isEmpty else { return }
        for i in pending.indices where onPhoneClock.contains(pending[i].eventId) { pending[i].at = pending[i].at + shift }
    }

    private mutating func startSearch(_ mode: ScanMode, at now: Timestamp) {
        guard searchStartedAt == nil else { return }
        searchStartedAt = now
        searchMode = mode
        append("ranging_start", at: now, attributes: ["mode": mode.rawValue])
    }

    private mutating func endSearch(at now: Timestamp) {
        guard let started = searchStartedAt else { return }
        searchStartedAt = nil
        append("ranging_stop", at: now, value: Double(max(0, now - started)), attributes: ["mode": (searchMode ?? .ranging).rawValue])
    }

    private mutating func append(_ name: String, at now: Timestamp, value: Double? = nil, attributes: [String: String]? = nil) {
        sequence += 1
        if pending.count >= capacity {
            forgetStamp(of: pending.removeFirst().eventId)
            dropped += 1
        }
        let eventId = "\(idPrefix)-\(sequence)"
        if !stampsWithServerClock { onPhoneClock.insert(eventId) }
        pending.append(TelemetryRecord(eventId: eventId, name: name, at: now + clockOffsetMs, value: value, attributes: attributes))
    }
}
