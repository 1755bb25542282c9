import Foundation

/// Admin API roles, each including the ones below it.
public enum APIRole: String, Codable, Hashable, Sendable, CaseIterable, Comparable {
    /// Reads everything.
    case viewer
    /// Also provisions: allocates namespaces and minors, registers beacons, creates enrollment codes.
    case installer
    /// Also manages organizations, sites, users, devices and API keys.
    case admin

    private var rank: Int {
        switch self {
        case .viewer: return 0
        case .installer: return 1
        case .admin: return 2
        }
    }

    public static func < (a: APIRole, b: APIRole) -> Bool { a.rank < b.rank }

    /// True when this role may do what `required` may.
    public func permits(_ required: APIRole) -> Bool { self >= required }
}

/// An admin API key as stored (its secret only as a hash).
public struct APIKey: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var role: APIRole
    public var createdAt: Date
    public var revokedAt: Date?

    public init(id: String, name: String, role: APIRole, createdAt: Date, revokedAt: Date?) {
        self.id = id
        self.name = name
        self.role = role
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// Admin API key text: `brk_<id>.<secret>`.
///
/// The id (16 hex digits) finds the row; the secret (32 random bytes, base64url) is checked against
/// its stored SHA-256 in constant time. A 256-bit random secret needs no slow hash: there is nothing
/// to guess.
public enum APIKeyFormat {
    public static let prefix = "brk_"

    public static func generate() -> (id: String, secret: String, presented: String) {
        let id = Secrets.hex(Secrets.randomBytes(8))
        let secret = Base64URL.encode(Secrets.randomBytes(32))
        return (id, secret, "\(prefix)\(id).\(secret)")
    }

    /// The id and secret of a presented key, or `nil` when it is not shaped like one.
    public static func parse(_ presented: String) -> (id: String, secret: String)? {
        guard presented.utf8.count == prefix.utf8.count + 16 + 1 + 43, presented.hasPrefix(prefix) else { return nil }
        let body = presented.dropFirst(prefix.count)
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.allSatisfy(Self.isLowerHex), Base64URL.decode(parts[1]) != nil else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    public static func hash(secret: String) -> String { Secrets.sha256Hex(secret) }

    private static func isLowerHex(_ c: UInt8) -> Bool { (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) }
}
