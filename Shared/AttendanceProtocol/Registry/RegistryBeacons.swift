import Foundation

/// An organization's slice of the iBeacon space: a shard UUID and a major. Every beacon of the
/// organization broadcasts these two; the minor tells its gates apart.
public struct BusinessNamespace: Codable, Hashable, Sendable {
    public var organizationId: String
    public var uuid: UUID
    public var major: Int
    public var allocatedAt: Date

    public init(organizationId: String, uuid: UUID, major: Int, allocatedAt: Date) {
        self.organizationId = organizationId
        self.uuid = uuid
        self.major = major
        self.allocatedAt = allocatedAt
    }

    /// `UUID:major`: the entity id on the change feed.
    public var key: String { "\(uuid.uuidString):\(major)" }
}

/// A minor handed to a gate inside its organization's namespace.
public struct MinorAllocation: Codable, Hashable, Sendable {
    public static let range: ClosedRange<Int> = 1...65_535

    public var uuid: UUID
    public var major: Int
    public var minor: Int
    public var gateId: String
    public var allocatedAt: Date

    public init(uuid: UUID, major: Int, minor: Int, gateId: String, allocatedAt: Date) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.gateId = gateId
        self.allocatedAt = allocatedAt
    }

    public var identity: BeaconIdentity { BeaconIdentity(uuid: uuid, major: major, minor: minor) }
}

public enum BeaconStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case active
    /// Taken out of service on purpose.
    case retired
    /// Missing: its sightings are suspicious until it is found.
    case lost
}

/// A physical beacon mounted at a gate.
public struct Beacon: Codable, Hashable, Sendable {
    public var id: String
    public var uuid: UUID
    public var major: Int
    public var minor: Int
    public var serial: String?
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var mac: String?
    /// Calibrated power at 1 m, dBm.
    public var txPower: Int?
    public var advIntervalMs: Int?
    public var batteryReplacedOn: CalendarDate?
    public var status: BeaconStatus
    public var gateId: String
    public var createdAt: Date
    public var updatedAt: Date

    public init(
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

    public var identity: BeaconIdentity { BeaconIdentity(uuid: uuid, major: major, minor: minor) }
}

/// Whether a beacon is on the air: devices heard it within the window.
public struct BroadcastVerification: Codable, Hashable, Sendable {
    public var verified: Bool
    /// The latest sighting ever recorded (also when it is older than the window).
    public var lastSeen: Date?
    /// Distinct devices that heard it within the window.
    public var deviceCount: Int
    public var windowMinutes: Int

    public init(verified: Bool, lastSeen: Date?, deviceCount: Int, windowMinutes: Int) {
        self.verified = verified
        self.lastSeen = lastSeen
        self.deviceCount = deviceCount
        self.windowMinutes = windowMinutes
    }
}

/// What a key rotation did (never the key itself: the installer reads it from the provisioning plan).
public struct BeaconKeyRotation: Codable, Hashable, Sendable {
    public var beaconId: String
    /// The new key's version: the policy verifies with it once it reads the change.
    public var version: Int
    public var rotatedAt: Date
    /// Until when proofs signed with the replaced key still verify (the beacon keeps answering with
    /// it until an installer writes the new one); absent when it stopped at once (`graceHours=0`).
    public var previousKeyValidUntil: Date?

    /// How long a rotation lets the replaced key verify unless told otherwise: a week, time for an
    /// installer's visit.
    public static let defaultGraceHours = 168
    /// The `graceHours` a rotation accepts: 0 (the replaced key stops at once) to 30 days.
    public static let graceHoursRange = 0...720

    public init(beaconId: String, version: Int, rotatedAt: Date, previousKeyValidUntil: Date? = nil) {
        self.beaconId = beaconId
        self.version = version
        self.rotatedAt = rotatedAt
        self.previousKeyValidUntil = previousKeyValidUntil
    }
}
