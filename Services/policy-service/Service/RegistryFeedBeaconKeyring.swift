import AttendanceProtocol
import Crypto
import Foundation
import PolicyServiceCore
import RegistryFeed

/// The beacons' GATT keys from `registry.changes`: every check reads the beacon's current sealed
/// key (and the one it replaced, during a rotation's grace) from the live feed cache
/// (`SealedBeaconKeyring` opens and caches them), so a rotated key is used from the moment its
/// record is read (well under a second after the registry commits: publisher poll plus feed
/// consumer), and a beacon deleted or moved stops verifying.
package final class RegistryFeedBeaconKeyring: BeaconKeyring {
    private let keyring: SealedBeaconKeyring

    package init(cache: RegistryCache, sealer: BeaconKeySealer) {
        keyring = SealedBeaconKeyring(sealer: sealer) { identity in
            guard let beacon = cache.resolve(identity)?.beacon, let sealed = beacon.gattKey else { return nil }
            return (beacon.id, sealed, beacon.previousGattKey)
        }
    }

    package func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        keyring.key(for: beacon)
    }

    package func previousKey(for beacon: RegistryBeaconKey, at instant: Date) -> PreviousBeaconKey? {
        keyring.previousKey(for: beacon, at: instant)
    }
}
