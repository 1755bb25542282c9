import AttendanceProtocol
import Foundation

/// An organization's slice of the iBeacon space: a shard UUID and a major. Every beacon of the
/// organization broadcasts these two; the minor tells its gates apart.
package struct BusinessNamespace: Codable, Hashable, Sendable {
    package var organizationId: String
    package var uuid: UUID
    package var major: Int
    package var allocatedAt: Date

    package init(organizationId: String, uuid: UUID, major: Int, allocatedAt: Date) {
        self.organizationId = organizationId
        self.uuid = uuid
        self.major = major
        self.allocatedAt = allocatedAt
    }

    /// `UUID:major`: the entity id on the change feed.
    package var key: String { "\(uuid.uuidString):\(major)" }
}

/// A minor handed to a gate inside its organization's namespace.
package struct MinorAllocation: Codable, Hashable, Sendable {
    package static let range: ClosedRange<Int> = 1...65_535

    package var uuid: UUID
    package var major: Int
    package var minor: Int
    package var gateId: String
    package var allocatedAt: Date

    package init(uuid: UUID, major: Int, minor: Int, gateId: String, allocatedAt: Date) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.gateId = gateId
        self.allocatedAt = allocatedAt
    }

    package var identity: BeaconIdentity { BeaconIdentity(uuid: uuid, major: major, minor: minor) }
}

package enum BeaconStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case active
    /// Taken out of service on purpose.
    case retired
    /// Missing: its sightings are suspicious until it is found.
    case lost
}

/// A physical beacon mounted at a gate.
package struct Beacon: Codable, Hashable, Sendable {
    package var id: String
    package var uuid: UUID
    package var major: Int
    package var minor: Int
    package var serial: String?
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    package var mac: String?
    /// Calibrated power at 1 m, dBm.
    package var txPower: Int?
    package var advIntervalMs: Int?
    package var batteryReplacedOn: CalendarDate?
    package var status: BeaconStatus
    package var gateId: String
    package var createdAt: Date
    package var updatedAt: Date

    package init(
        id: String, uuid: UUID, major: Int, minor: Int, serial: String?, mac: String?, txPower: Int?,
        advIntervalMs: Int?, batteryReplacedOn: CalendarDate?, status: BeaconStatus, gateId: String,
        createdAt: Date, updatedAt: Date
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
        self.status = status
        self.gateId = gateId
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    package var identity: BeaconIdentity { BeaconIdentity(uuid: uuid, major: major, minor: minor) }
}

/// A date without a time or zone (`YYYY-MM-DD`), such as the day a battery was replaced.
package struct CalendarDate: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    package var year: Int
    package var month: Int
    package var day: Int

    /// `nil` unless it is a real Gregorian date in years 2000-2999.
    package init?(year: Int, month: Int, day: Int) {
        guard (2000...2999).contains(year), (1...12).contains(month), day >= 1 else { return nil }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard day <= days else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD`.
    package init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2])
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    package var description: String {
        func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(pad(month))-\(pad(day))"
    }

    package static func < (a: CalendarDate, b: CalendarDate) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = CalendarDate(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not a date like 2025-09-18"))
        }
        self = value
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// A device reported hearing a beacon at `seenAt`.
package struct BeaconSighting: Hashable, Sendable {
    package var beacon: BeaconIdentity
    package var deviceId: String
    package var seenAt: Date

    package init(beacon: BeaconIdentity, deviceId: String, seenAt: Date) {
        self.beacon = beacon
        self.deviceId = deviceId
        self.seenAt = seenAt
    }
}

/// Whether a beacon is on the air: devices heard it within the window.
package struct BroadcastVerification: Codable, Hashable, Sendable {
    package var verified: Bool
    /// The latest sighting ever recorded (also when it is older than the window).
    package var lastSeen: Date?
    /// Distinct devices that heard it within the window.
    package var deviceCount: Int
    package var windowMinutes: Int

    package init(verified: Bool, lastSeen: Date?, deviceCount: Int, windowMinutes: Int) {
        self.verified = verified
        self.lastSeen = lastSeen
        self.deviceCount = deviceCount
        self.windowMinutes = windowMinutes
    }
}

/// A beacon's GATT challenge key in plain text: what the installer writes into the beacon. Only
/// the provisioning plan (installer role) ever shows it.
package struct BeaconGattKey: Hashable, Sendable {
    package var version: Int
    package var key: [UInt8]

    package init(version: Int, key: [UInt8]) {
        self.version = version
        self.key = key
    }
}

/// What a key rotation did (never the key itself: the installer reads it from the provisioning plan).
package struct BeaconKeyRotation: Codable, Hashable, Sendable {
    package var beaconId: String
    /// The new key's version; the previous one stops verifying once the policy reads the change.
    package var version: Int
    package var rotatedAt: Date

    package init(beaconId: String, version: Int, rotatedAt: Date) {
        self.beaconId = beaconId
        self.version = version
        self.rotatedAt = rotatedAt
    }
}
