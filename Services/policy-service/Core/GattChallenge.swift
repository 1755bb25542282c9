import AttendanceProtocol
import Crypto
import Foundation
import Synchronization

// The policy's side of the GATT challenge (the codec and the proof are in the protocol module):
// spent nonces are remembered durably and shared by every policy instance (the service's
// `GattNonceLedger` claims each batch's nonces in PostgreSQL and loads the holders into
// `PolicyHistory`, which `GattChallengeRule` reads), so neither a restart nor a second instance
// accepts a replayed nonce.

/// The beacons' GATT keys as the policy knows them.
package protocol BeaconKeyring: Sendable {
    /// The beacon's shared key, or `nil` when it has none.
    func key(for beacon: RegistryBeaconKey) -> SymmetricKey?
    /// The key the current one replaced, when its grace still lasts at `instant`: the physical
    /// beacon signs with it until an installer writes the new one. None by default.
    func previousKey(for beacon: RegistryBeaconKey, at instant: Date) -> PreviousBeaconKey?
}

extension BeaconKeyring {
    package func previousKey(for beacon: RegistryBeaconKey, at instant: Date) -> PreviousBeaconKey? { nil }
}

/// A replaced beacon key that still verifies until `validUntil`.
package struct PreviousBeaconKey {
    package var key: SymmetricKey
    package var version: Int
    package var validUntil: Date
}

/// Deterministic per-beacon keys derived from one secret:
/// key = HMAC-SHA256(master, "beacon-gatt-key|v1|" + 16 UUID bytes + big-endian major, minor).
///
/// For tests, the benchmark and simulated beacons only: no service configuration builds it. The
/// policy service verifies with the random per-beacon keys the registry creates and publishes
/// sealed on `registry.changes` (`RegistryFeedBeaconKeyring` in the service target); the former
/// `BEACON_KEY_SECRET` master secret is not read any more.
package final class DerivedBeaconKeyring: BeaconKeyring {
    private let master: [UInt8]
    /// Derived keys by beacon: a site has a bounded set of beacons, and deriving costs an HMAC.
    private let derived = Mutex<[RegistryBeaconKey: [UInt8]]>([:])

    package init(master: [UInt8]) {
        precondition(master.count >= 16, "a beacon master key needs at least 128 bits")
        self.master = master
    }

    package func key(for beacon: RegistryBeaconKey) -> SymmetricKey? {
        SymmetricKey(data: rawKey(for: beacon))
    }

    /// What the beacon answers to `nonce` in the handshake (simulated beacons, tests).
    package func proof(nonce: String, beacon: RegistryBeaconKey) -> String {
        GattProof.hmac(nonce: nonce, beaconKey: SymmetricKey(data: rawKey(for: beacon)))
    }

    /// The key bytes, for provisioning a beacon (and for simulated beacons in tests).
    package func rawKey(for beacon: RegistryBeaconKey) -> [UInt8] {
        if let hit = derived.withLock({ $0[beacon] }) { return hit }
        var label = Array("beacon-gatt-key|v1|".utf8)
        BeaconBytes.append(beacon, to: &label)
        let key = Array(HMAC<SHA256>.authenticationCode(for: label, using: SymmetricKey(data: master)))
        derived.withLock { table in
            // Identities that are not beacons (a spoofer's) must not grow the table without bound.
            if table.count >= 65_536 { table.removeAll(keepingCapacity: true) }
            table[beacon] = key
        }
        return key
    }
}
