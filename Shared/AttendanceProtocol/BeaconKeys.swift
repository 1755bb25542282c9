import Foundation

// The parsed forms of beacon identities, used as dictionary keys wherever beacons are looked up
// (the registry feed's cache, the policy's registry view): case and spelling of the UUID text
// do not matter once parsed.

/// An iBeacon identity in its compact form: the key of the resolve lookup.
public struct RegistryBeaconKey: Hashable, Sendable, CustomStringConvertible {
    public var uuid: UUID
    public var major: UInt16
    public var minor: UInt16

    public init(uuid: UUID, major: UInt16, minor: UInt16) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    /// `nil` when major or minor is outside 0...65535.
    public init?(uuid: UUID, major: Int, minor: Int) {
        guard let major = UInt16(exactly: major), let minor = UInt16(exactly: minor) else { return nil }
        self.init(uuid: uuid, major: major, minor: minor)
    }

    /// `nil` when the UUID text does not parse or major/minor are out of range.
    public init?(_ identity: BeaconIdentity) {
        guard let uuid = identity.parsedUUID else { return nil }
        self.init(uuid: uuid, major: identity.major, minor: identity.minor)
    }

    public var namespace: RegistryNamespaceKey { RegistryNamespaceKey(uuid: uuid, major: major) }

    public var description: String { "\(uuid.uuidString):\(major):\(minor)" }
}

/// A business namespace: a shard UUID and an organization's major.
public struct RegistryNamespaceKey: Hashable, Sendable, CustomStringConvertible {
    public var uuid: UUID
    public var major: UInt16

    public init(uuid: UUID, major: UInt16) {
        self.uuid = uuid
        self.major = major
    }

    public init?(uuid: UUID, major: Int) {
        guard let major = UInt16(exactly: major) else { return nil }
        self.init(uuid: uuid, major: major)
    }

    public var description: String { "\(uuid.uuidString):\(major)" }
}
