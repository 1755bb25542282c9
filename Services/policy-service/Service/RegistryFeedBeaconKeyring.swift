import AttendanceProtocol
import Crypto
import Foundation
import PolicyServiceCore
import RegistryFeed
import Synchronization

/// The beacons' GATT keys as the registry publishes them: each beacon's record on
/// `registry.changes` carries its key sealed with `BEACON_KEY_SEAL_KEY` (`SealedBeaconKey`), which
/// only the registry and this service hold. Every lookup reads the live feed cache, so a rotated
/// key is used from the moment its record is read (well under a second after the registry
/// commits: publisher poll plus feed consumer), and a beacon deleted or moved stops verifying.
///
/// Opening a box costs a ChaCha20-Poly1305 open, so opened keys are kept per identity and reused
/// while the beacon's record still carries the same box; a new version (or another beacon at the
/// identity) is opened afresh.
public final class RegistryFeedBeaconKeyring: BeaconKeyring {
    struct OpenedKey: Sendable {
        var beaconId: String
        var sealed: SealedBeaconKey
        var key: [UInt8]
    }

    private let cache: RegistryCache
    private let sealer: BeaconKeySealer
    private let opened = Mutex<[RegistryBeaconKey: OpenedKey]>([:])

    public init(cache: RegistryCache, sealer: BeaconKeySealer) {
        self.cache = cache
        self.sealer = sealer
    }

    public func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        guard let resolved = cache.resolve(beacon), let sealed = resolved.beacon.gattKey else { return nil }
        let beaconId = resolved.beacon.id
        if let hit = opened.withLock({ $0[beacon] }), hit.beaconId == beaconId, hit.sealed == sealed {
            return SymmetricKey(data: hit.key)
        }
        // A box that does not open (sealed under another key, or tampered) is no key: the rule
        // then refuses the proof as "beacon has no GATT key", never accepts it.
        guard let key = sealer.open(sealed, beaconId: beaconId) else { return nil }
        opened.withLock { table in
            // Only registered beacons reach this point, but keep the table bounded all the same.
            if table.count >= 65_536 { table.removeAll(keepingCapacity: true) }
            table[beacon] = OpenedKey(beaconId: beaconId, sealed: sealed, key: key)
        }
        return SymmetricKey(data: key)
    }
}
