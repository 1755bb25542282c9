import Foundation

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
