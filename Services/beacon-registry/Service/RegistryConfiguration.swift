import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import ServiceRuntime

/// The registry's own settings, besides the shared `ServiceConfiguration` and the device token keys
/// (`DEVICE_TOKEN_KEYS`, `DEVICE_TOKEN_ACTIVE_KEY`, see `DeviceTokenSigner.load`):
/// - `REGISTRY_BOOTSTRAP=1`: create an admin API key when none exists and write its secret once to
///   `REGISTRY_BOOTSTRAP_KEY_PATH` (required with it; mode 0600; the log names only the key's id);
/// - `BEACON_KEY_SEAL_KEY`: base64 of 32 random bytes, shared with the policy service only. With it
///   the registry creates each beacon's GATT key, stores and publishes it sealed, backfills beacons
///   that have none at start-up, and serves rotation; without it beacons have no GATT key.
/// - `REGISTRY_SCHEMA` (`RegistrySchema`): the schema of its tables; its queries name no schema, and
///   its pool's search path starts with this one.
package struct RegistryConfiguration: SchemaSettings {
    package var schema = RegistrySchema.defaultName
    package var bootstrapKeyFile: BootstrapKeyFile?
    package var beaconKeySealer: BeaconKeySealer?

    package static func load(from env: EnvironmentReader) throws(ConfigurationError) -> RegistryConfiguration {
        let bootstrapKeyFile =
            try env.bool("REGISTRY_BOOTSTRAP", default: false)
            ? BootstrapKeyFile(
                path: try env.requiredString(
                    "REGISTRY_BOOTSTRAP_KEY_PATH",
                    expected: "with REGISTRY_BOOTSTRAP=1, the file the first admin API key is written to (never the log)"))
            : nil
        var configuration = RegistryConfiguration(bootstrapKeyFile: bootstrapKeyFile, beaconKeySealer: try loadBeaconKeySealer(from: env))
        configuration.schema = try RegistrySchema.load(from: env)
        return configuration
    }

    /// `BEACON_KEY_SEAL_KEY`: base64 of exactly 32 bytes, or unset. The value is never echoed.
    static func loadBeaconKeySealer(from env: EnvironmentReader) throws(ConfigurationError) -> BeaconKeySealer? {
        guard let text = env.optionalString("BEACON_KEY_SEAL_KEY"), !text.isEmpty else { return nil }
        guard let bytes = Data(base64Encoded: text), let sealer = BeaconKeySealer(sealingKey: Array(bytes)) else {
            throw ConfigurationError(key: "BEACON_KEY_SEAL_KEY", value: "<redacted>", expected: "base64 of 32 random bytes")
        }
        return sealer
    }
}
