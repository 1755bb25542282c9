import Foundation

/// The device's attendance event: the body of `POST /v1/attendance/events`, exactly the data model of the
/// device payload (docs/SPECIFICATION.md, "3. Device API"), plus optional fields later features need.
///
/// Required: `id`, `idempotencyKey`, `userId`, `deviceId`, `timestamp`, `type`, `siteId`, `beacon`.
/// Everything else is optional because a real device may not have it (no motion co-processor, no
/// handshake, offline). Fields are encoded in the specified order, specified fields first, so
/// the specified example (`Golden/seed-000-8.1-verbatim.json` in the tests) round-trips byte for byte.
///
/// Decoding checks shape only (types, required fields, enum values); ranges, formats and the
/// time window are checked by `validate(now:limits:)`, which reports every problem at once.
public struct AttendanceEvent: SchemaVersioned, Codable, Hashable, Sendable {
    /// REST payloads take their version from the URL (`/v1`); a body may state it in `schemaVersion`.
    public static let schemaVersion = 1

    // MARK: The specified device payload

    /// The device's local event id (a UUID in practice).
    public var id: String
    /// hex sha256(userId|deviceId|beaconId|tStart|nonce): 64 lowercase hex digits.
    public var idempotencyKey: String
    public var userId: String
    public var deviceId: String
    /// When the trigger happened on the device (event time, not receipt time).
    public var timestamp: Date
    public var type: AttendanceEventType
    public var siteId: String
    public var beacon: BeaconIdentity
    /// Ranged RSSI readings in dBm, about one per second; 0 is iOS's "not heard this second".
    public var rssiSeries: [Int]?
    /// The beacon's calibrated power at 1 m, dBm.
    public var txPower: Int?
    public var motion: Motion?
    public var geofence: Geofence?
    public var handshake: Handshake?
    public var network: Network?
    public var app: App?
    public var device: Device?

    // MARK: Extensions (all optional; the specified payload stays valid)

    /// The device's session key (the session contracts), when the event belongs to a known session.
    public var sessionKey: String?
    /// End of the ranging / presence window that produced the event.
    public var tEnd: Date?
    /// The event was recorded while offline and sent later from the outbox.
    public var queuedOffline: Bool?
    /// When the device first tried to send it (the outbox's first attempt).
    public var firstAttemptAt: Date?
    public var location: Location?
    public var attestation: Attestation?
    public var gatt: Gatt?

    public init(
        id: String, idempotencyKey: String, userId: String, deviceId: String, timestamp: Date,
        type: AttendanceEventType, siteId: String, beacon: BeaconIdentity,
        rssiSeries: [Int]? = nil, txPower: Int? = nil, motion: Motion? = nil, geofence: Geofence? = nil,
        handshake: Handshake? = nil, network: Network? = nil, app: App? = nil, device: Device? = nil,
        sessionKey: String? = nil, tEnd: Date? = nil, queuedOffline: Bool? = nil, firstAttemptAt: Date? = nil,
        location: Location? = nil, attestation: Attestation? = nil, gatt: Gatt? = nil
    ) {
        self.id = id
        self.idempotencyKey = idempotencyKey
        self.userId = userId
        self.deviceId = deviceId
        self.timestamp = timestamp
        self.type = type
        self.siteId = siteId
        self.beacon = beacon
        self.rssiSeries = rssiSeries
        self.txPower = txPower
        self.motion = motion
        self.geofence = geofence
        self.handshake = handshake
        self.network = network
        self.app = app
        self.device = device
        self.sessionKey = sessionKey
        self.tEnd = tEnd
        self.queuedOffline = queuedOffline
        self.firstAttemptAt = firstAttemptAt
        self.location = location
        self.attestation = attestation
        self.gatt = gatt
    }

    /// The specified field names, in the specified order, then the extensions.
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case id, idempotencyKey, userId, deviceId, timestamp, type, siteId, beacon, rssiSeries, txPower
        case motion, geofence, handshake, network, app, device
        case sessionKey, tEnd, queuedOffline, firstAttemptAt, location, attestation, gatt
        case schemaVersion

        /// The 16 field names of the specified example, in its order.
        public static let seedFields: [CodingKeys] = [
            .id, .idempotencyKey, .userId, .deviceId, .timestamp, .type, .siteId, .beacon, .rssiSeries,
            .txPower, .motion, .geofence, .handshake, .network, .app, .device,
        ]
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        id = try c.decode(String.self, forKey: .id)
        idempotencyKey = try c.decode(String.self, forKey: .idempotencyKey)
        userId = try c.decode(String.self, forKey: .userId)
        deviceId = try c.decode(String.self, forKey: .deviceId)
        timestamp = try c.decodeTimestamp(forKey: .timestamp)
        type = try c.decode(AttendanceEventType.self, forKey: .type)
        siteId = try c.decode(String.self, forKey: .siteId)
        beacon = try c.decode(BeaconIdentity.self, forKey: .beacon)
        rssiSeries = try c.decodeIfPresent([Int].self, forKey: .rssiSeries)
        txPower = try c.decodeIfPresent(Int.self, forKey: .txPower)
        motion = try c.decodeIfPresent(Motion.self, forKey: .motion)
        geofence = try c.decodeIfPresent(Geofence.self, forKey: .geofence)
        handshake = try c.decodeIfPresent(Handshake.self, forKey: .handshake)
        network = try c.decodeIfPresent(Network.self, forKey: .network)
        app = try c.decodeIfPresent(App.self, forKey: .app)
        device = try c.decodeIfPresent(Device.self, forKey: .device)
        sessionKey = try c.decodeIfPresent(String.self, forKey: .sessionKey)
        tEnd = try c.decodeTimestampIfPresent(forKey: .tEnd)
        queuedOffline = try c.decodeIfPresent(Bool.self, forKey: .queuedOffline)
        firstAttemptAt = try c.decodeTimestampIfPresent(forKey: .firstAttemptAt)
        location = try c.decodeIfPresent(Location.self, forKey: .location)
        attestation = try c.decodeIfPresent(Attestation.self, forKey: .attestation)
        gatt = try c.decodeIfPresent(Gatt.self, forKey: .gatt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(idempotencyKey, forKey: .idempotencyKey)
        try c.encode(userId, forKey: .userId)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encodeTimestamp(timestamp, forKey: .timestamp)
        try c.encode(type, forKey: .type)
        try c.encode(siteId, forKey: .siteId)
        try c.encode(beacon, forKey: .beacon)
        try c.encodeIfPresent(rssiSeries, forKey: .rssiSeries)
        try c.encodeIfPresent(txPower, forKey: .txPower)
        try c.encodeIfPresent(motion, forKey: .motion)
        try c.encodeIfPresent(geofence, forKey: .geofence)
        try c.encodeIfPresent(handshake, forKey: .handshake)
        try c.encodeIfPresent(network, forKey: .network)
        try c.encodeIfPresent(app, forKey: .app)
        try c.encodeIfPresent(device, forKey: .device)
        try c.encodeIfPresent(sessionKey, forKey: .sessionKey)
        try c.encodeTimestampIfPresent(tEnd, forKey: .tEnd)
        try c.encodeIfPresent(queuedOffline, forKey: .queuedOffline)
        try c.encodeTimestampIfPresent(firstAttemptAt, forKey: .firstAttemptAt)
        try c.encodeIfPresent(location, forKey: .location)
        try c.encodeIfPresent(attestation, forKey: .attestation)
        try c.encodeIfPresent(gatt, forKey: .gatt)
    }
}

/// What the event records. A closed set: a value the server does not know is refused.
public enum AttendanceEventType: String, ClosedWireEnum {
    case checkin
    case checkout
    case heartbeat
}

/// An iBeacon identity: company UUID, major (site / business namespace), minor (gate).
public struct BeaconIdentity: Codable, Hashable, Sendable {
    /// The proximity UUID as text; `validate` checks its format so the error names the field.
    public var uuid: String
    public var major: Int
    public var minor: Int

    public init(uuid: String, major: Int, minor: Int) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    public init(uuid: UUID, major: Int, minor: Int) {
        self.init(uuid: uuid.uuidString, major: major, minor: minor)
    }

    /// The UUID when `uuid` is well formed.
    public var parsedUUID: UUID? { UUID(uuidString: uuid) }

    /// `UUID:major:minor` with the UUID upper-cased: one spelling for lookups and key material.
    public var canonicalId: String { "\(uuid.uppercased()):\(major):\(minor)" }
}

extension AttendanceEvent {
    /// `motion`: the device's activity over the last minutes (Core Motion).
    public struct Motion: Codable, Hashable, Sendable {
        public var state: MotionState
        /// Steps counted over the last two minutes.
        public var steps2min: Int?

        public init(state: MotionState, steps2min: Int? = nil) {
            self.state = state
            self.steps2min = steps2min
        }
    }

    /// `geofence`: whether the device is inside the site's geofence, and its radius in metres.
    public struct Geofence: Codable, Hashable, Sendable {
        public var inside: Bool
        public var radius: Double?

        public init(inside: Bool, radius: Double? = nil) {
            self.inside = inside
            self.radius = radius
        }
    }

    /// `handshake`: the optional GATT challenge-response; `rt` is its round trip in milliseconds.
    public struct Handshake: Codable, Hashable, Sendable {
        public var ok: Bool
        public var rt: Int?

        public init(ok: Bool, rt: Int? = nil) {
            self.ok = ok
            self.rt = rt
        }
    }

    /// `network`: connectivity when the event was sent.
    public struct Network: Codable, Hashable, Sendable {
        public var online: Bool
        public var latencyMs: Int?

        public init(online: Bool, latencyMs: Int? = nil) {
            self.online = online
            self.latencyMs = latencyMs
        }
    }

    /// `app`: the app's marketing version and build number.
    public struct App: Codable, Hashable, Sendable {
        public var version: String
        public var build: Int?

        public init(version: String, build: Int? = nil) {
            self.version = version
            self.build = build
        }
    }

    /// `device`: hardware model identifier and OS name with version.
    public struct Device: Codable, Hashable, Sendable {
        public var model: String
        public var os: String?

        public init(model: String, os: String? = nil) {
            self.model = model
            self.os = os
        }
    }

    /// `location` (extension): a position fix, for the co-location rule against the site's geofence.
    public struct Location: Codable, Hashable, Sendable {
        public var lat: Double
        public var lon: Double
        public var accuracyM: Double?

        public init(lat: Double, lon: Double, accuracyM: Double? = nil) {
            self.lat = lat
            self.lon = lon
            self.accuracyM = accuracyM
        }
    }

    /// `attestation` (extension): what the app knows about its own integrity. Absent means unknown.
    public struct Attestation: Codable, Hashable, Sendable {
        public var jailbroken: Bool?
        /// iOS `CLLocationSourceInformation.isSimulatedBySoftware`.
        public var simulatedLocation: Bool?
        /// Android mock location provider enabled.
        public var mockProvider: Bool?

        public init(jailbroken: Bool? = nil, simulatedLocation: Bool? = nil, mockProvider: Bool? = nil) {
            self.jailbroken = jailbroken
            self.simulatedLocation = simulatedLocation
            self.mockProvider = mockProvider
        }
    }

    /// `gatt` (extension): proof of the GATT challenge: the server's nonce and HMAC(nonce, beacon key), hex.
    public struct Gatt: Codable, Hashable, Sendable {
        public var nonce: String
        public var hmac: String

        public init(nonce: String, hmac: String) {
            self.nonce = nonce
            self.hmac = hmac
        }
    }
}

/// Core Motion's activity classes. Open: an unknown state is kept, not refused.
public enum MotionState: OpenWireEnum {
    case stationary, walking, running, cycling, automotive, unknown
    case unrecognized(String)

    public static let knownValues: [MotionState] = [.stationary, .walking, .running, .cycling, .automotive, .unknown]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .stationary: return "stationary"
        case .walking: return "walking"
        case .running: return "running"
        case .cycling: return "cycling"
        case .automotive: return "automotive"
        case .unknown: return "unknown"
        case .unrecognized(let raw): return raw
        }
    }

    /// Walking or running: what the motion-gating rule looks for.
    public var isMoving: Bool { self == .walking || self == .running }
}
