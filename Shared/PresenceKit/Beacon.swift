/// An iBeacon identity: proximity UUID, major, minor (UUID per company, major = site, minor = gate; in
/// the registry's model, UUID + major is a business namespace, minor a service point).
///
/// The UUID is kept as two integers rather than a Foundation `UUID` so that comparing identities on the
/// hot path is two integer compares and the struct is 24 bytes.
public struct BeaconIdentity: Hashable, Sendable, Codable, CustomStringConvertible {
    public var uuid: UUIDBits
    public var major: UInt16
    public var minor: UInt16

    public init(uuid: UUIDBits, major: UInt16, minor: UInt16) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    /// `uuid` must be a canonical UUID string; traps otherwise (use for literals and tests).
    public init(_ uuid: String, major: UInt16, minor: UInt16) {
        guard let bits = UUIDBits(uuidString: uuid) else { preconditionFailure("malformed UUID \(uuid)") }
        self.init(uuid: bits, major: major, minor: minor)
    }

    /// The `beaconId` used inside the idempotency key: `<lowercase uuid>:<major>:<minor>`,
    /// e.g. `f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:3`.
    public var beaconId: String { "\(uuid.uuidString):\(major):\(minor)" }

    public var description: String { beaconId }

    private enum CodingKeys: String, CodingKey { case uuid, major, minor }

    /// Encodes as the device payload writes it: `{"uuid": "...", "major": 10, "minor": 3}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(uuid.uuidString, forKey: .uuid)
        try c.encode(major, forKey: .major)
        try c.encode(minor, forKey: .minor)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let text = try c.decode(String.self, forKey: .uuid)
        guard let bits = UUIDBits(uuidString: text) else {
            throw DecodingError.dataCorruptedError(forKey: .uuid, in: c, debugDescription: "malformed UUID \(text)")
        }
        uuid = bits
        major = try c.decode(UInt16.self, forKey: .major)
        minor = try c.decode(UInt16.self, forKey: .minor)
    }
}

/// One RSSI reading of one beacon (one iOS ranging callback entry, or one scan result).
public struct BeaconReading: Hashable, Sendable {
    public var beacon: BeaconIdentity
    /// dBm. 0 (iOS: "not heard this second") and 127 (Android: unknown) mean *missing data*, never a
    /// strong signal; see `Rssi.isValid`.
    public var rssi: Int

    public init(beacon: BeaconIdentity, rssi: Int) {
        self.beacon = beacon
        self.rssi = rssi
    }
}

public enum Rssi {
    /// A usable reading is -127...-1 dBm. 0 is what iOS reports for a beacon it did not hear during the
    /// last second and 127 is the platform "unknown" value: both would otherwise look like the strongest
    /// signal possible and create false check-ins, so they are dropped as missing data. Positive values
    /// are physically implausible for BLE and dropped too.
    public static func isValid(_ rssi: Int) -> Bool {
        rssi <= -1 && rssi >= -127
    }
}
