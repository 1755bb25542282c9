import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation

// The registry API's request bodies and the answers that are not Core entities, as
// `Services/beacon-registry/Service/Resources/openapi.yaml` describes them. Optional fields left `nil` are not sent,
// so the registry applies its defaults; the registry validates every field and names the failing
// ones in its problem answer.

public struct NewOrganizationBody: Encodable, Sendable {
    public var id: String?
    public var name: String

    public init(id: String? = nil, name: String) {
        self.id = id
        self.name = name
    }
}

public struct NewSiteBody: Encodable, Sendable {
    public struct Shift: Encodable, Sendable {
        /// `HH:MM`, local to the site.
        public var start: String
        public var end: String
        public var checkInBeforeStartMinutes: Int
        public var checkOutAfterEndMinutes: Int
        public var lateEntryGraceMinutes: Int
        public var earlyExitGraceMinutes: Int

        public init(
            start: String, end: String, checkInBeforeStartMinutes: Int, checkOutAfterEndMinutes: Int, lateEntryGraceMinutes: Int,
            earlyExitGraceMinutes: Int
        ) {
            self.start = start
            self.end = end
            self.checkInBeforeStartMinutes = checkInBeforeStartMinutes
            self.checkOutAfterEndMinutes = checkOutAfterEndMinutes
            self.lateEntryGraceMinutes = lateEntryGraceMinutes
            self.earlyExitGraceMinutes = earlyExitGraceMinutes
        }
    }

    public var id: String?
    public var organizationId: String
    public var name: String
    /// IANA name such as `Asia/Ho_Chi_Minh`.
    public var timezone: String
    public var geofence: Geofence
    public var shift: Shift

    public init(id: String? = nil, organizationId: String, name: String, timezone: String, geofence: Geofence, shift: Shift) {
        self.id = id
        self.organizationId = organizationId
        self.name = name
        self.timezone = timezone
        self.geofence = geofence
        self.shift = shift
    }
}

public struct NewGateBody: Encodable, Sendable {
    public var id: String?
    public var siteId: String
    public var name: String

    public init(id: String? = nil, siteId: String, name: String) {
        self.id = id
        self.siteId = siteId
        self.name = name
    }
}

public struct NewUserBody: Encodable, Sendable {
    public var id: String?
    public var name: String
    public var siteIds: [String]?

    public init(id: String? = nil, name: String, siteIds: [String]? = nil) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
    }
}

public struct NewBeaconBody: Encodable, Sendable {
    public var id: String?
    /// 32 hex digits, dashes optional.
    public var uuid: String
    public var major: Int
    public var minor: Int
    public var serial: String?
    public var mac: String?
    public var txPower: Int?
    public var advIntervalMs: Int?
    /// `YYYY-MM-DD`.
    public var batteryReplacedOn: String?
    public var gateId: String

    public init(
        id: String? = nil, uuid: String, major: Int, minor: Int, serial: String? = nil, mac: String? = nil, txPower: Int? = nil,
        advIntervalMs: Int? = nil, batteryReplacedOn: String? = nil, gateId: String
    ) {
        self.id = id
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.serial = serial
        self.mac = mac
        self.txPower = txPower
        self.advIntervalMs = advIntervalMs
        self.batteryReplacedOn = batteryReplacedOn
        self.gateId = gateId
    }
}

struct BeaconStatusBody: Encodable, Sendable {
    var status: BeaconStatus
}

public struct SightingBody: Encodable, Sendable {
    public var beacon: BeaconIdentity
    public var deviceId: String
    /// `nil`: the registry uses the time it receives the sighting.
    public var seenAt: Date?

    public init(beacon: BeaconIdentity, deviceId: String, seenAt: Date? = nil) {
        self.beacon = beacon
        self.deviceId = deviceId
        self.seenAt = seenAt
    }
}

struct EnrollmentCodeRequestBody: Encodable, Sendable {
    var validityMinutes: Int?
}

public struct EnrollDeviceBody: Encodable, Sendable {
    public var code: String
    public var appVersion: String?
    public var model: String?

    public init(code: String, appVersion: String? = nil, model: String? = nil) {
        self.code = code
        self.appVersion = appVersion
        self.model = model
    }
}

struct NewAPIKeyBody: Encodable, Sendable {
    var name: String
    var role: APIRole
}

/// `?limit=` (1...200) and `?cursor=` (a previous page's `nextCursor`).
public struct PageQuery: Sendable, Hashable {
    public var limit: Int?
    public var cursor: String?

    public init(limit: Int? = nil, cursor: String? = nil) {
        self.limit = limit
        self.cursor = cursor
    }

    var query: [String: String] {
        var query: [String: String] = [:]
        if let limit { query["limit"] = String(limit) }
        if let cursor { query["cursor"] = cursor }
        return query
    }
}

/// The provisioning plan's settings; `nil` leaves the registry's default.
public struct ProvisioningPlanQuery: Sendable, Hashable {
    public var deviceName: String?
    public var measuredPower: Int?
    public var advertisingIntervalUnits: Int?
    public var txPowerIndex: Int?

    public init(deviceName: String? = nil, measuredPower: Int? = nil, advertisingIntervalUnits: Int? = nil, txPowerIndex: Int? = nil) {
        self.deviceName = deviceName
        self.measuredPower = measuredPower
        self.advertisingIntervalUnits = advertisingIntervalUnits
        self.txPowerIndex = txPowerIndex
    }

    var query: [String: String] {
        var query: [String: String] = [:]
        if let deviceName { query["deviceName"] = deviceName }
        if let measuredPower { query["measuredPower"] = String(measuredPower) }
        if let advertisingIntervalUnits { query["advertisingIntervalUnits"] = String(advertisingIntervalUnits) }
        if let txPowerIndex { query["txPowerIndex"] = String(txPowerIndex) }
        return query
    }
}

/// A page of a list: `nextCursor` is absent on the last page.
public struct RegistryPage<Item: Decodable & Sendable>: Decodable, Sendable {
    public var items: [Item]
    public var nextCursor: String?
}

public struct IssuedEnrollmentCodeBody: Decodable, Sendable {
    /// Shown once.
    public var code: String
    public var enrollment: EnrollmentCode
}

public struct DeviceCredentialsBody: Decodable, Sendable {
    public var deviceId: String
    public var userId: String
    /// The device's bearer token.
    public var token: String
    public var tokenExpiresAt: Date
    public var device: Device
}

public struct IssuedAPIKeyBody: Decodable, Sendable {
    /// Shown once.
    public var secret: String
    public var key: APIKey
}

public struct ProvisioningPlanBody: Decodable, Sendable {
    public struct Settings: Decodable, Sendable {
        public var deviceName: String?
        public var uuid: String?
        public var major: Int?
        public var minor: Int?
        public var measuredPower: Int?
        public var advertisingIntervalUnits: Int?
        public var txPowerIndex: Int?
    }

    public struct Authentication: Decodable, Sendable {
        public var serviceUUID: String?
        public var characteristic: String?
        public var writeWithResponse: Bool?
        public var passwords: [String]?
    }

    public struct Step: Decodable, Sendable {
        public var index: Int
        public var name: String
        public var command: Int?
        public var characteristic: String?
        public var hex: String
    }

    public var beaconId: String
    public var settings: Settings
    public var authentication: Authentication
    public var steps: [Step]
    /// The frames in write order, `4E 4F CMD LEN DATA XOR` as hex.
    public var frames: [String]
}

public struct VerificationBody: Decodable, Sendable {
    public var beaconId: String
    public var verified: Bool
    public var lastSeen: Date?
    public var deviceCount: Int
    public var windowMinutes: Int
}

/// Where a beacon is: `/v1/admin/lookup/beacon` and `/lookup/mac/{mac}`.
public struct BeaconLookupBody: Decodable, Sendable {
    public var beaconId: String
    public var uuid: String
    public var major: Int
    public var minor: Int
    public var mac: String?
    public var status: String
    public var gateId: String
    public var gateName: String?
    public var siteId: String?
    public var siteName: String?
    public var timezone: String?
    public var organizationId: String?
}

public struct BusinessLookupBody: Decodable, Sendable {
    public var uuid: String
    public var major: Int
    public var organizationId: String
    public var organizationName: String?
}

public struct BeaconsByUUIDBody: Decodable, Sendable {
    public var uuid: String
    public var beacons: [BeaconLookupBody]
}

/// An answer without a body (`202 Accepted`).
public struct Accepted: Sendable {
    public var status: Int
}

public struct HealthBody: Decodable, Sendable {
    public var status: String
    public var service: String?
    public var checks: [String: String]?
}
