import AttendanceProtocol
import Foundation
import PolicyServiceCore
import RegistryFeed
import ServiceRuntime

/// The GATT challenge's secrets from the environment. Both or neither: without them the service
/// does not host `gatt_challenge`, and a policy that switches it on is refused with a clear error.
///
/// - `GATT_NONCE_KEY` and `GATT_NONCE_TTL_SECONDS`, the same values as the gateway's (it signs the
///   nonces, the policy checks them; `GattNonceCodec.fromEnvironment`);
/// - `BEACON_KEY_SEAL_KEY`: base64 of exactly 32 bytes, the same value as the registry's: it opens
///   the per-beacon keys the registry creates and publishes sealed on `registry.changes`
///   (`RegistryFeedBeaconKeyring`).
///
/// The former `BEACON_KEY_SECRET` (keys derived from one master secret) is no longer read: every
/// beacon's key is random and owned by the registry.
package enum GattConfiguration {
    package static func load(from env: EnvironmentReader, registry cache: RegistryCache) throws(ConfigurationError) -> GattChallengeRule? {
        let nonces = try GattNonceCodec.fromEnvironment(env)
        let sealer = try beaconKeySealer(env)
        switch (nonces, sealer) {
        case (nil, nil):
            return nil
        case (let nonces?, let sealer?):
            return GattChallengeRule(nonces: nonces, keyring: RegistryFeedBeaconKeyring(cache: cache, sealer: sealer))
        case (nil, _):
            throw ConfigurationError(
                key: "GATT_NONCE_KEY", value: nil, expected: "set together with BEACON_KEY_SEAL_KEY (base64, at least 16 bytes)")
        case (_, nil):
            throw ConfigurationError(
                key: "BEACON_KEY_SEAL_KEY", value: nil,
                expected: "set together with GATT_NONCE_KEY (base64 of 32 bytes, the registry's value)")
        }
    }

    /// `BEACON_KEY_SEAL_KEY`: base64 of exactly 32 bytes, or unset. The value is never echoed.
    package static func beaconKeySealer(_ env: EnvironmentReader) throws(ConfigurationError) -> BeaconKeySealer? {
        guard let text = env.optionalString("BEACON_KEY_SEAL_KEY"), !text.isEmpty else { return nil }
        guard let bytes = Data(base64Encoded: text), let sealer = BeaconKeySealer(sealingKey: Array(bytes)) else {
            throw ConfigurationError(key: "BEACON_KEY_SEAL_KEY", value: "<redacted>", expected: "base64 of 32 random bytes")
        }
        return sealer
    }
}
