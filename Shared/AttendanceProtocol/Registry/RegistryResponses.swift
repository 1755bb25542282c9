import Foundation

// What the beacon registry answers beyond its entities, as its OpenAPI document describes them.
// The registry encodes these and its clients (the admin CLI, the fleet simulator) decode them.

/// A page of a list: pass `nextCursor` as `?cursor=` for the next page; it is absent on the last.
public struct RegistryPage<Item: Codable & Sendable>: Codable, Sendable {
    public var items: [Item]
    public var nextCursor: String?

    public init(items: [Item], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// A new enrollment code: `code` is shown once, only its hash is stored; this answer is the only
/// moment its plaintext exists outside the user's hands.
public struct IssuedEnrollmentCode: Codable, Hashable, Sendable {
    /// `XXXXX-XXXXX` in Crockford base32 (no I, L, O, U), for typing or a QR code.
    public var code: String
    public var enrollment: EnrollmentCode

    public init(code: String, enrollment: EnrollmentCode) {
        self.code = code
        self.enrollment = enrollment
    }
}

/// What an enrolled device receives: its bearer token and its record.
public struct DeviceCredentialsResponse: Codable, Sendable {
    public var deviceId: String
    public var userId: String
    public var token: String
    public var tokenExpiresAt: Date
    public var device: Device

    public init(deviceId: String, userId: String, token: String, tokenExpiresAt: Date, device: Device) {
        self.deviceId = deviceId
        self.userId = userId
        self.token = token
        self.tokenExpiresAt = tokenExpiresAt
        self.device = device
    }
}

/// A new API key: `secret` is shown once, only its hash is stored.
public struct IssuedAPIKey: Codable, Hashable, Sendable {
    /// `brk_<16 hex id>.<43 base64url chars>`: the bearer token.
    public var secret: String
    public var key: APIKey

    public init(secret: String, key: APIKey) {
        self.secret = secret
        self.key = key
    }
}

/// The DX-Smart CP28 write sequence for one beacon, for the installer's app.
public struct ProvisioningPlanResponse: Codable, Sendable {
    /// What is written into the beacon.
    public struct Settings: Codable, Hashable, Sendable {
        /// 1-20 printable ASCII characters; shown when scanning.
        public var deviceName: String
        /// Dashes optional, any case.
        public var uuid: String
        public var major: Int
        public var minor: Int
        /// The calibrated RSSI at 1 m, dBm (-127...0), sent as a signed byte.
        public var measuredPower: Int
        /// Advertising interval in units of 100 ms (1...100: 100 ms to 10 s).
        public var advertisingIntervalUnits: Int
        /// Radio power level index 0...7 (0 the weakest).
        public var txPowerIndex: Int

        public init(
            deviceName: String, uuid: String, major: Int, minor: Int, measuredPower: Int, advertisingIntervalUnits: Int,
            txPowerIndex: Int
        ) {
            self.deviceName = deviceName
            self.uuid = uuid
            self.major = major
            self.minor = minor
            self.measuredPower = measuredPower
            self.advertisingIntervalUnits = advertisingIntervalUnits
            self.txPowerIndex = txPowerIndex
        }
    }

    /// How the app unlocks the beacon before writing.
    public struct Authentication: Codable, Sendable {
        public var serviceUUID: String
        /// The 16-bit characteristic id, such as `FFE3`.
        public var characteristic: String
        public var writeWithResponse: Bool
        /// Tried in order.
        public var passwords: [String]

        public init(serviceUUID: String, characteristic: String, writeWithResponse: Bool, passwords: [String]) {
            self.serviceUUID = serviceUUID
            self.characteristic = characteristic
            self.writeWithResponse = writeWithResponse
            self.passwords = passwords
        }
    }

    public struct Step: Codable, Sendable {
        /// 1-based position in the sequence.
        public var index: Int
        public var name: String
        public var command: Int
        public var characteristic: String
        public var bytes: [Int]
        /// `4E 4F 11 00 11`.
        public var hex: String

        public init(index: Int, name: String, command: Int, characteristic: String, bytes: [Int], hex: String) {
            self.index = index
            self.name = name
            self.command = command
            self.characteristic = characteristic
            self.bytes = bytes
            self.hex = hex
        }
    }

    /// The beacon's GATT challenge key, written after the frames: installer role and above only,
    /// and only when the registry holds beacon keys.
    public struct GattKey: Codable, Sendable {
        public var version: Int
        /// 32 bytes, lowercase hex.
        public var hex: String

        public init(version: Int, hex: String) {
            self.version = version
            self.hex = hex
        }
    }

    public var beaconId: String
    public var settings: Settings
    public var authentication: Authentication
    public var steps: [Step]
    /// The frames in write order, `4E 4F CMD LEN DATA XOR` as hex.
    public var frames: [String]
    public var gattKey: GattKey?

    public init(
        beaconId: String, settings: Settings, authentication: Authentication, steps: [Step], frames: [String], gattKey: GattKey?
    ) {
        self.beaconId = beaconId
        self.settings = settings
        self.authentication = authentication
        self.steps = steps
        self.frames = frames
        self.gattKey = gattKey
    }
}

/// Whether a beacon is on the air: devices heard it within the window.
public struct BeaconVerificationResponse: Codable, Sendable {
    public var beaconId: String
    public var verification: BroadcastVerification

    public init(beaconId: String, verification: BroadcastVerification) {
        self.beaconId = beaconId
        self.verification = verification
    }

    private enum CodingKeys: String, CodingKey { case beaconId }

    // On the wire the verification's fields sit beside `beaconId`.
    public init(from decoder: any Decoder) throws {
        beaconId = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .beaconId)
        verification = try BroadcastVerification(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(beaconId, forKey: .beaconId)
        try verification.encode(to: encoder)
    }
}

/// Where a beacon is (`/v1/admin/lookup/beacon`, `/lookup/mac/{mac}`); the gate's, site's and
/// organization's fields are absent while the registry's cache has not read them.
public struct BeaconLookupResponse: Codable, Sendable {
    public var beaconId: String
    public var uuid: String
    public var major: Int
    public var minor: Int
    public var mac: String?
    /// `active`, `retired`, `lost`, or a newer registry's status.
    public var status: String
    public var gateId: String
    public var gateName: String?
    public var siteId: String?
    public var siteName: String?
    public var timezone: String?
    public var organizationId: String?

    public init(
        beaconId: String, uuid: String, major: Int, minor: Int, mac: String?, status: String, gateId: String, gateName: String?,
        siteId: String?, siteName: String?, timezone: String?, organizationId: String?
    ) {
        self.beaconId = beaconId
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.mac = mac
        self.status = status
        self.gateId = gateId
        self.gateName = gateName
        self.siteId = siteId
        self.siteName = siteName
        self.timezone = timezone
        self.organizationId = organizationId
    }
}

/// Whose business a namespace is (`/v1/admin/lookup/business`).
public struct BusinessLookupResponse: Codable, Sendable {
    public var uuid: String
    public var major: Int
    public var organizationId: String
    public var organizationName: String?

    public init(uuid: String, major: Int, organizationId: String, organizationName: String?) {
        self.uuid = uuid
        self.major = major
        self.organizationId = organizationId
        self.organizationName = organizationName
    }
}

/// Every beacon of a shard UUID (`/v1/admin/lookup/uuid/{uuid}`).
public struct BeaconsByUUIDResponse: Codable, Sendable {
    public var uuid: String
    public var beacons: [BeaconLookupResponse]

    public init(uuid: String, beacons: [BeaconLookupResponse]) {
        self.uuid = uuid
        self.beacons = beacons
    }
}
