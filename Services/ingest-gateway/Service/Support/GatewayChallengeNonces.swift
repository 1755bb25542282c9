import AttendanceProtocol
import Foundation
import ServiceRuntime

extension GatewayConfiguration {
    /// The GATT nonce signer, when `GATT_NONCE_KEY` is set (base64, at least 16 bytes, the policy
    /// service's value); `GATT_NONCE_TTL_SECONDS` (default 60) is how long a nonce is good for.
    static func challengeNonces(from env: EnvironmentReader) throws(ConfigurationError) -> GattNonceCodec? {
        guard let text = env.optionalString("GATT_NONCE_KEY"), !text.isEmpty else { return nil }
        guard let key = Data(base64Encoded: text), key.count >= 16 else {
            throw ConfigurationError(key: "GATT_NONCE_KEY", value: "<redacted>", expected: "base64 of at least 16 random bytes")
        }
        let ttl = try env.int("GATT_NONCE_TTL_SECONDS", default: 60, in: 5...600)
        return GattNonceCodec(key: Array(key), lifetime: TimeInterval(ttl))
    }
}
