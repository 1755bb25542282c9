import AttendanceProtocol
import Crypto
import Foundation
import Synchronization

/// Beacon GATT keys as the registry publishes them: each beacon's record carries its key sealed
/// with the key only the registry and the policy hold (`SealedBeaconKey`, `BeaconKeySealer`).
/// `lookup` answers which beacon broadcasts an identity and its current box; the service reads
/// it from the live registry feed (`RegistryFeedBeaconKeyring`), the benchmark from a table.
///
/// Opening a box costs a ChaCha20-Poly1305 open, so opened keys are kept per identity and reused
/// while the beacon still publishes the same box; a new version (a rotation) or another beacon at
/// the identity is opened afresh, so a rotated key applies on the first check after its record
/// is read. A box that does not open (sealed under another key, or another beacon's box) is no
/// key: the rule then refuses the proof, never accepts it.
package final class SealedBeaconKeyring: BeaconKeyring {
    package typealias Lookup = @Sendable (RegistryBeaconKey) -> (beaconId: String, sealed: SealedBeaconKey)?

    struct OpenedKey: Sendable {
        var beaconId: String
        var sealed: SealedBeaconKey
        var key: [UInt8]
    }

    private let sealer: BeaconKeySealer
    private let lookup: Lookup
    private let opened = Mutex<[RegistryBeaconKey: OpenedKey]>([:])

    package init(sealer: BeaconKeySealer, lookup: @escaping Lookup) {
        self.sealer = sealer
        self.lookup = lookup
    }

    package func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        guard let (beaconId, sealed) = lookup(beacon) else { return nil }
        if let hit = opened.withLock({ $0[beacon] }), hit.beaconId == beaconId, hit.sealed == sealed {
            return SymmetricKey(data: hit.key)
        }
        guard let key = sealer.open(sealed, beaconId: beaconId) else { return nil }
        opened.withLock { table in
            // Only registered beacons reach this point, but keep the table bounded all the same.
            if table.count >= 65_536 { table.removeAll(keepingCapacity: true) }
            table[beacon] = OpenedKey(beaconId: beaconId, sealed: sealed, key: key)
        }
        return SymmetricKey(data: key)
    }
}
