import AccessControl
import BeaconRegistryCore

/// The first admin API key of a fresh registry. Every admin route needs a key, and only an admin
/// can create keys, so the first one comes from here: the executable calls `ensure` at start when
/// `REGISTRY_BOOTSTRAP=1` and prints the secret once to stdout. When an unrevoked admin key exists
/// already it creates nothing (run it on every start safely).
public enum BootstrapAdminKey {
    public static func ensure(repository: any AdminRegistryRepository, name: String = "bootstrap admin") async throws(RegistryError) -> IssuedAPIKey? {
        guard try await repository.activeAPIKeyCount(role: .admin) == 0 else { return nil }
        return try await repository.createAPIKey(name: name, role: .admin)
    }
}
