import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation

// The registry API's request bodies and the answers that are not Core entities, as
// `Services/beacon-registry/Service/Resources/openapi.yaml` describes them. Optional fields left `nil` are not sent,
// so the registry applies its defaults; the registry validates every field and names the failing
// ones in its problem answer.

package struct NewOrganizationBody: Encodable, Sendable {
    package var id: String?
    package var name: String

    package init(id: String? = nil, name: String) {
        self.id = id
        self.name = name
    }
}

package struct NewSiteBody: Encodable, Sendable {
    package struct Shift: Encodable, Sendable {
        /// `HH:MM`, local to the site.
        package var start: String
        package var end: String
        package var checkInBeforeStartMinutes: Int
        package var checkOutAfterEndMinutes: Int
        package var lateEntryGraceMinutes: Int
        package var earlyExitGraceMinutes: Int

        package init(
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

    package var id: String?
    package var organizationId: String
    package var name: String
    /// IANA name such as `Asia/Ho_Chi_Minh`.
    package var timezone: String
    package var geofence: Geofence
    package var shift: Shift

    package init(id: String? = nil, organizationId: String, name: String, timezone: String, geofence: Geofence, shift: Shift) {
        self.id = id
        self.organizationId = organizationId
        self.name = name
        self.timezone = timezone
        self.geofence = geofence
        self.shift = shift
    }
}

package struct NewGateBody: Encodable, Sendable {
    package var id: String?
    package var siteId: String
    package var name: String

    package init(id: String? = nil, siteId: String, name: String) {
        self.id = id
        self.siteId = siteId
        self.name = name
    }
}

package struct NewUserBody: Encodable, Sendable {
    package var id: String?
    package var name: String
    package var siteIds: [String]?

    package init(id: String? = nil, name: String, siteIds: [String]? = nil) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
    }
}

package struct NewBeaconBody: Encodable, Sendable {
    package var id: String?
    /// 32 hex digits, dashes optional.
    package var uuid: String
    package var major: Int
    package var minor: Int
    package var serial: String?
    package var mac: String?
    package var txPower: Int?
    package var advIntervalMs: Int?
    /// `YYYY-MM-DD`.
    package var batteryReplacedOn: String?
    package var gateId: String

    package init(
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

package struct SightingBody: Encodable, Sendable {
    package var beacon: BeaconIdentity
    package var deviceId: String
    /// `nil`: the registry uses the time it receives the sighting.
    package var seenAt: Date?

    package init(beacon: BeaconIdentity, deviceId: String, seenAt: Date? = nil) {
        self.beacon = beacon
        self.deviceId = deviceId
        self.seenAt = seenAt
    }
}

struct EnrollmentCodeRequestBody: Encodable, Sendable {
    var validityMinutes: Int?
}

package struct EnrollDeviceBody: Encodable, Sendable {
    package var code: String
    package var appVersion: String?
    package var model: String?

    package init(code: String, appVersion: String? = nil, model: String? = nil) {
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
package struct PageQuery: Sendable, Hashable {
    package var limit: Int?
    package var cursor: String?

    package init(limit: Int? = nil, cursor: String? = nil) {
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
package struct ProvisioningPlanQuery: Sendable, Hashable {
    package var deviceName: String?
    package var measuredPower: Int?
    package var advertisingIntervalUnits: Int?
    package var txPowerIndex: Int?

    package init(deviceName: String? = nil, measuredPower: Int? = nil, advertisingIntervalUnits: Int? = nil, txPowerIndex: Int? = nil) {
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
package struct RegistryPage<Item: Decodable & Sendable>: Decodable, Sendable {
    package var items: [Item]
    package var nextCursor: String?
}

package struct IssuedEnrollmentCodeBody: Decodable, Sendable {
    /// Shown once.
    package var code: String
    package var enrollment: EnrollmentCode
}

package struct DeviceCredentialsBody: Decodable, Sendable {
    package var deviceId: String
    package var userId: String
    /// The device's bearer token.
    package var token: String
    package var tokenExpiresAt: Date
    package var device: Device
}

package struct IssuedAPIKeyBody: Decodable, Sendable {
    /// Shown once.
    package var secret: String
    package var key: APIKey
}

package struct ProvisioningPlanBody: Decodable, Sendable {
    package struct Settings: Decodable, Sendable {
        package var deviceName: String?
        package var uuid: String?
        package var major: Int?
        package var minor: Int?
        package var measuredPower: Int?
        package var advertisingIntervalUnits: Int?
        package var txPowerIndex: Int?
    }

    package struct Authentication: Decodable, Sendable {
        package var serviceUUID: String?
        package var characteristic: String?
        package var writeWithResponse: Bool?
        package var passwords: [String]?
    }

    package struct Step: Decodable, Sendable {
        package var index: Int
        package var name: String
        package var command: Int?
        package var characteristic: String?
        package var hex: String
    }

    package var beaconId: String
    package var settings: Settings
    package var authentication: Authentication
    package var steps: [Step]
    /// The frames in write order, `4E 4F CMD LEN DATA XOR` as hex.
    package var frames: [String]
}

package struct VerificationBody: Decodable, Sendable {
    package var beaconId: String
    package var verified: Bool
    package var lastSeen: Date?
    package var deviceCount: Int
    package var windowMinutes: Int
}

/// Where a beacon is: `/v1/admin/lookup/beacon` and `/lookup/mac/{mac}`.
package struct BeaconLookupBody: Decodable, Sendable {
    package var beaconId: String
    package var uuid: String
    package var major: Int
    package var minor: Int
    package var mac: String?
    package var status: String
    package var gateId: String
    package var gateName: String?
    package var siteId: String?
    package var siteName: String?
    package var timezone: String?
    package var organizationId: String?
}

package struct BusinessLookupBody: Decodable, Sendable {
    package var uuid: String
    package var major: Int
    package var organizationId: String
    package var organizationName: String?
}

package struct BeaconsByUUIDBody: Decodable, Sendable {
    package var uuid: String
    package var beacons: [BeaconLookupBody]
}

/// An answer without a body (`202 Accepted`).
package struct Accepted: Sendable {
    package var status: Int
}

package struct HealthBody: Decodable, Sendable {
    package var status: String
    package var service: String?
    package var checks: [String: String]?
}
