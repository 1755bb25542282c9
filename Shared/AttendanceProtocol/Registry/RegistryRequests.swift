import Foundation

// The bodies callers send to the beacon registry's admin and device API. The registry checks every
// field and names each failing one in its problem answer; optional fields left `nil` are not sent,
// so the registry applies its defaults.

public struct NewOrganization: Codable, Hashable, Sendable {
    /// Chosen by the caller, or generated (`org_…`) when `nil`.
    public var id: String?
    public var name: String

    public init(id: String? = nil, name: String) {
        self.id = id
        self.name = name
    }
}

public struct NewSite: Codable, Hashable, Sendable {
    public var id: String?
    public var organizationId: String
    public var name: String
    /// IANA name such as `Asia/Ho_Chi_Minh`.
    public var timezone: String
    public var geofence: Geofence
    public var shift: ShiftSettings

    public init(id: String? = nil, organizationId: String, name: String, timezone: String, geofence: Geofence, shift: ShiftSettings) {
        self.id = id
        self.organizationId = organizationId
        self.name = name
        self.timezone = timezone
        self.geofence = geofence
        self.shift = shift
    }
}

public struct NewGate: Codable, Hashable, Sendable {
    public var id: String?
    public var siteId: String
    public var name: String

    public init(id: String? = nil, siteId: String, name: String) {
        self.id = id
        self.siteId = siteId
        self.name = name
    }
}

public struct NewUser: Codable, Hashable, Sendable {
    /// Often the HR system's employee id.
    public var id: String?
    public var name: String
    /// Absent in a request: none.
    public var siteIds: [String]

    public init(id: String? = nil, name: String, siteIds: [String] = []) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
    }

    private enum CodingKeys: String, CodingKey { case id, name, siteIds }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decodeIfPresent(String.self, forKey: .id), name: try c.decode(String.self, forKey: .name),
            siteIds: try c.decodeIfPresent([String].self, forKey: .siteIds) ?? [])
    }
}

/// `PUT /v1/admin/sites/{id}/shift`: the site's shift for its local days from `from` on (absent: from
/// the site's today); earlier days keep the shift they had.
public struct SiteShiftChange: Codable, Hashable, Sendable {
    public var shift: ShiftSettings
    public var from: CalendarDate?

    public init(shift: ShiftSettings, from: CalendarDate? = nil) {
        self.shift = shift
        self.from = from
    }
}

/// `PUT /v1/admin/users/{id}/name`: the user's name from now on (a correction, a change of legal name).
public struct UserName: Codable, Hashable, Sendable {
    public var name: String

    public init(name: String) { self.name = name }
}

/// `PUT /v1/admin/users/{id}/sites`: the sites the user is assigned to from now on (an empty list: none).
public struct UserSites: Codable, Hashable, Sendable {
    public var siteIds: [String]

    public init(siteIds: [String]) { self.siteIds = siteIds }
}

public struct NewBeacon: Codable, Hashable, Sendable {
    public var id: String?
    /// As read from the beacon or typed: dashes optional, any case.
    public var uuid: String
    public var major: Int
    public var minor: Int
    public var serial: String?
    /// `AA:BB:CC:DD:EE:FF`, `aa-bb-…` or twelve hex digits.
    public var mac: String?
    /// Calibrated power at 1 m, dBm.
    public var txPower: Int?
    public var advIntervalMs: Int?
    public var batteryReplacedOn: CalendarDate?
    public var gateId: String

    public init(
        id: String? = nil, uuid: String, major: Int, minor: Int, serial: String? = nil, mac: String? = nil,
        txPower: Int? = nil, advIntervalMs: Int? = nil, batteryReplacedOn: CalendarDate? = nil, gateId: String
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

    public init(id: String? = nil, identity: BeaconIdentity, gateId: String) {
        self.init(id: id, uuid: identity.uuid, major: identity.major, minor: identity.minor, gateId: gateId)
    }
}

/// `PATCH /v1/admin/beacons/{id}`.
public struct BeaconStatusChange: Codable, Hashable, Sendable {
    public var status: BeaconStatus

    public init(status: BeaconStatus) { self.status = status }
}

/// A device heard a beacon (`POST /v1/admin/beacons/sightings`).
public struct BeaconSightingReport: Codable, Hashable, Sendable {
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

/// `POST /v1/admin/users/{id}/enrollment-codes`; an empty body takes the default validity.
public struct EnrollmentCodeRequest: Codable, Hashable, Sendable {
    public static let validityMinutesRange: ClosedRange<Int> = 1...43_200
    /// One day.
    public static let defaultValidityMinutes = 1_440

    /// Within `validityMinutesRange` (up to 30 days).
    public var validityMinutes: Int?

    public init(validityMinutes: Int? = nil) { self.validityMinutes = validityMinutes }
}

/// What a phone sends to enroll with its code (`POST /v1/devices/enroll`).
public struct DeviceEnrollment: Codable, Hashable, Sendable {
    public var code: String
    public var appVersion: String?
    public var model: String?
    /// A random id the app made for this installation (16-128 characters) and kept before asking: the
    /// same code sent again with it within a day answers the device it enrolled (a lost answer).
    public var installationId: String?

    public init(code: String, appVersion: String? = nil, model: String? = nil, installationId: String? = nil) {
        self.code = code
        self.appVersion = appVersion
        self.model = model
        self.installationId = installationId
    }
}

/// `POST /v1/admin/api-keys`.
public struct NewAPIKey: Codable, Hashable, Sendable {
    public var name: String
    public var role: APIRole

    public init(name: String, role: APIRole) {
        self.name = name
        self.role = role
    }
}
