import AttendanceProtocol
import Crypto
import Foundation
import PolicyServiceCore
import RegistryFeed

/// The beacons' GATT keys from `registry.changes`: every check reads the beacon's current sealed
/// key from the live feed cache (`SealedBeaconKeyring` opens and caches it), so a rotated key is
/// used from the moment its record is read (well under a second after the registry commits:
/// publisher poll plus feed consumer), and a beacon deleted or moved stops verifying.
package final class RegistryFeedBeaconKeyring: BeaconKeyring {
    private let keyring: SealedBeaconKeyring

    package init(cache: RegistryCache, sealer: BeaconKeySealer) {
        keyring = SealedBeaconKeyring(sealer: sealer) { identity in
            guard let beacon = cache.resolve(identity)?.beacon, let sealed = beacon.gattKey else { return nil }
            return (beacon.id, sealed)
        }
    }

    package func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        keyring.key(for: beacon)
    }
}
