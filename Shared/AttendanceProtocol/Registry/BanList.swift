import Foundation

/// A UUID refused because its prefix is a vendor's factory default.
public struct BannedUUID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The eight upper-case hex digits that matched, e.g. `E2C56DB5`.
    public var prefix: String
    /// Who ships it, in words: "Apple AirLocate sample", "Estimote", ...
    public var vendor: String

    public var description: String { "UUID prefix \(prefix) is the \(vendor) factory default" }
}

/// Factory-default iBeacon UUID prefixes.
///
/// A beacon still broadcasting one of these was never configured: every unconfigured beacon of the
/// same vendor (thousands of strangers' beacons) shares it, so attendance keyed on it could be
/// triggered by any of them. The registry refuses to register such a UUID, and the shard pool never
/// contains one. The same list is mirrored in SQL (`registry.is_banned_uuid`) so the registry's
/// database refuses it too; the policy's `beacon_validity` rule refuses events naming one.
public enum BanList {
    public static let entries: [BannedUUID] = [
        BannedUUID(prefix: "E2C56DB5", vendor: "Apple AirLocate sample"),
        BannedUUID(prefix: "B9407F30", vendor: "Estimote"),
        BannedUUID(prefix: "FDA50693", vendor: "generic Chinese bulk"),
        BannedUUID(prefix: "F7826DA6", vendor: "Kontakt.io"),
        BannedUUID(prefix: "74278BDA", vendor: "generic bulk"),
        BannedUUID(prefix: "00000000", vendor: "unconfigured hardware (all zeros)"),
        BannedUUID(prefix: "FFFFFFFF", vendor: "unconfigured hardware (all ones)"),
    ]

    private static let byPrefix: [String: BannedUUID] = Dictionary(uniqueKeysWithValues: entries.map { ($0.prefix, $0) })

    /// The ban entry matching `uuid`, or `nil` when it is allowed. Case-insensitive; dashes are
    /// ignored, so `e2c56db5-dffb-...` and `E2C56DB5DFFB...` are both found.
    public static func check(_ uuid: String) -> BannedUUID? {
        let hex = uuid.unicodeScalars.lazy.filter { $0 != "-" }.prefix(8)
        guard hex.count == 8 else { return nil }
        return byPrefix[String(String.UnicodeScalarView(hex)).uppercased()]
    }

    public static func check(_ uuid: UUID) -> BannedUUID? {
        check(uuid.uuidString)
    }
}
