import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation

// Request and response bodies of the admin API (the entities themselves are the Core models).
// Every field is checked again by the repository, which reports every failing field at once.

struct CreateOrganizationBody: Codable {
    var id: String?
    var name: String
}

struct CreateSiteBody: Codable {
    var id: String?
    var organizationId: String
    var name: String
    var timezone: String
    var geofence: Geofence
    var shift: ShiftSettings
}

struct CreateGateBody: Codable {
    var id: String?
    var siteId: String
    var name: String
}

struct CreateUserBody: Codable {
    var id: String?
    var name: String
    var siteIds: [String]?
}

struct RegisterBeaconBody: Codable {
    var id: String?
    var uuid: String
    var major: Int
    var minor: Int
    var serial: String?
    var mac: String?
    var txPower: Int?
    var advIntervalMs: Int?
    var batteryReplacedOn: CalendarDate?
    var gateId: String
}

struct UpdateBeaconBody: Codable {
    var status: BeaconStatus
}

struct SightingBody: Codable {
    var beacon: BeaconIdentity
    var deviceId: String
    /// Defaults to now.
    var seenAt: Date?
}

struct CreateEnrollmentCodeBody: Codable {
    static let validityMinutes: ClosedRange<Int> = 1...43_200
    /// 1...43200 (30 days); default 1440 (one day).
    var validityMinutes: Int?
}

struct EnrollDeviceBody: Codable {
    var code: String
    var appVersion: String?
    var model: String?
}

struct CreateAPIKeyBody: Codable {
    var name: String
    var role: APIRole
}

struct EmptyBody: Codable {}

struct IssuedEnrollmentCodeResponse: Encodable {
    var code: String
    var enrollment: EnrollmentCode
}

struct DeviceCredentialsResponse: Encodable {
    var deviceId: String
    var userId: String
    var token: String
    var tokenExpiresAt: Date
    var device: Device
}

struct IssuedAPIKeyResponse: Encodable {
    /// Shown once; only its hash is stored.
    var secret: String
    var key: APIKey
}

struct ProvisioningPlanResponse: Encodable {
    struct Settings: Encodable {
        var deviceName: String
        var uuid: String
        var major: Int
        var minor: Int
        var measuredPower: Int
        var advertisingIntervalUnits: Int
        var txPowerIndex: Int
    }

    var beaconId: String
    var settings: Settings
    var authentication: CP28Authentication
    var steps: [CP28Step]
    /// The 24 frames in order, as hex.
    var frames: [String]

    /// The beacon's GATT challenge key to write into it: installer role and above only, and only
    /// when the registry holds keys (`BEACON_KEY_SEAL_KEY`).
    struct GattKey: Encodable {
        var version: Int
        /// 32 bytes, lowercase hex.
        var hex: String
    }

    var gattKey: GattKey?
}

struct VerificationResponse: Encodable {
    var beaconId: String
    var verified: Bool
    var lastSeen: Date?
    var deviceCount: Int
    var windowMinutes: Int
}
