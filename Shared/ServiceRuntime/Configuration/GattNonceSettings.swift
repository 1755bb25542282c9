import AttendanceProtocol
import Foundation

extension GattNonceCodec {
    /// The GATT challenge's nonce codec, read one way by the gateway (which signs nonces) and the policy
    /// service (which checks them): `GATT_NONCE_KEY`, base64 of at least 16 bytes, or several separated
    /// by commas, the first signing and the others (rotated out) still checking (nil when unset; the
    /// value is never echoed), and `GATT_NONCE_TTL_SECONDS` (5-600, default 60), how long a nonce is
    /// good for. Both services must have the same values: the policy dates a nonce's issue from its
    /// expiry and this lifetime.
    public static func fromEnvironment(_ env: EnvironmentReader) throws(ConfigurationError) -> GattNonceCodec? {
        // Checked with or without a key: a bad lifetime is a mistake to name now, not when the key is set.
        let ttl = try env.int("GATT_NONCE_TTL_SECONDS", default: 60, in: 5...600)
        guard let text = env.optionalString("GATT_NONCE_KEY"), !text.isEmpty else { return nil }
        var keys: [[UInt8]] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = part.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let key = Data(base64Encoded: trimmed), key.count >= 16 else {
                throw ConfigurationError(
                    key: "GATT_NONCE_KEY", value: "<redacted>",
                    expected: "base64 of at least 16 random bytes (or several, comma-separated: the first signs)")
            }
            keys.append(Array(key))
        }
        return GattNonceCodec(key: keys[0], previousKeys: Array(keys.dropFirst()), lifetime: TimeInterval(ttl))
    }
}
