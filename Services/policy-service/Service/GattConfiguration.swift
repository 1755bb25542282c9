import Foundation
import PolicyServiceCore
import ServiceRuntime

/// The GATT challenge's secrets from the environment. Both or neither: without them the service
/// does not host `gatt_challenge`, and a policy that switches it on is refused with a clear error.
///
/// - `GATT_NONCE_KEY`: base64 of at least 16 bytes, the same value as the gateway's (it signs the
///   nonces, the policy checks them);
/// - `BEACON_KEY_SECRET`: base64 of at least 16 bytes, the registry's master secret from which
///   each beacon's key is derived (`DerivedBeaconKeyring`).
public enum GattConfiguration {
    public static func load(from env: EnvironmentReader) throws(ConfigurationError) -> GattChallengeRule? {
        let nonce = try secret("GATT_NONCE_KEY", env)
        let master = try secret("BEACON_KEY_SECRET", env)
        switch (nonce, master) {
        case (nil, nil):
            return nil
        case (let nonce?, let master?):
            return GattChallengeRule(nonces: GattNonceCodec(key: nonce), keyring: DerivedBeaconKeyring(master: master))
        case (nil, _):
            throw ConfigurationError(key: "GATT_NONCE_KEY", value: nil, expected: "set together with BEACON_KEY_SECRET (base64, at least 16 bytes)")
        case (_, nil):
            throw ConfigurationError(key: "BEACON_KEY_SECRET", value: nil, expected: "set together with GATT_NONCE_KEY (base64, at least 16 bytes)")
        }
    }

    /// Base64 of at least 16 bytes; the value is never echoed.
    public static func secret(_ key: String, _ env: EnvironmentReader) throws(ConfigurationError) -> [UInt8]? {
        guard let text = env.optionalString(key), !text.isEmpty else { return nil }
        guard let bytes = Data(base64Encoded: text), bytes.count >= 16 else {
            throw ConfigurationError(key: key, value: "<redacted>", expected: "base64 of at least 16 random bytes")
        }
        return Array(bytes)
    }
}
