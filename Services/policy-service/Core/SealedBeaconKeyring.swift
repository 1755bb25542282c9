import AttendanceProtocol
import Crypto
import Foundation
import Synchronization

/// Beacon GATT keys as the registry publishes them: each beacon's record carries its key sealed
/// with the key only the registry and the policy hold (`SealedBeaconKey`, `BeaconKeySealer`), and
/// during a rotation's grace the key it replaced. `lookup` answers which beacon broadcasts an
/// identity and its current boxes; the service reads it from the live registry feed
/// (`RegistryFeedBeaconKeyring`), the benchmark from a table.
///
/// Opening a box costs a ChaCha20-Poly1305 open, so opened keys are kept per identity and reused
/// while the beacon still publishes the same boxes; a new version (a rotation) or another beacon at
/// the identity is opened afresh, so a rotated key applies on the first check after its record
/// is read. A box that does not open (sealed under another key, or another beacon's box) is no
/// key: the rule then refuses the proof, never accepts it.
package final class SealedBeaconKeyring: BeaconKeyring {
    package typealias Lookup = @Sendable (RegistryBeaconKey) -> (beaconId: String, sealed: SealedBeaconKey, previous: SealedBeaconKey?)?

    struct OpenedKeys: Sendable {
        var beaconId: String
        var sealed: SealedBeaconKey
        var key: [UInt8]
        var previousSealed: SealedBeaconKey?
        /// `nil` when there is no previous box or it does not open.
        var previousKey: [UInt8]?
    }

    private let sealer: BeaconKeySealer
    private let lookup: Lookup
    private let opened = Mutex<[RegistryBeaconKey: OpenedKeys]>([:])

    package init(sealer: BeaconKeySealer, lookup: @escaping Lookup) {
        self.sealer = sealer
        self.lookup = lookup
    }

    package func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        openedKeys(for: beacon).map { SymmetricKey(data: $0.key) }
    }

    package func previousKey(for beacon: RegistryBeaconKey, at instant: Date) -> PreviousBeaconKey? {
        guard let keys = openedKeys(for: beacon), let sealed = keys.previousSealed, let key = keys.previousKey,
            let validUntil = sealed.validUntil, instant < validUntil
        else { return nil }
        return PreviousBeaconKey(key: SymmetricKey(data: key), version: sealed.version, validUntil: validUntil)
    }

    private func openedKeys(for beacon: RegistryBeaconKey) -> OpenedKeys? {
        guard let (beaconId, sealed, previous) = lookup(beacon) else { return nil }
        if let hit = opened.withLock({ $0[beacon] }), hit.beaconId == beaconId, hit.sealed == sealed, hit.previousSealed == previous {
            return hit
        }
        guard let key = sealer.open(sealed, beaconId: beaconId) else { return nil }
        let keys = OpenedKeys(
            beaconId: beaconId, sealed: sealed, key: key, previousSealed: previous,
            previousKey: previous.flatMap { sealer.open($0, beaconId: beaconId) })
        opened.withLock { table in
            // Only registered beacons reach this point, but keep the table bounded all the same.
            if table.count >= 65_536 { table.removeAll(keepingCapacity: true) }
            table[beacon] = keys
        }
        return keys
    }
}
