import Crypto
import Foundation

// A beacon's GATT key (the secret the beacon signs challenge nonces with) is created and kept by
// the registry and needed by the policy service. It never exists in plain text outside those two
// processes: the registry stores it sealed, publishes the same sealed box on `registry.changes`,
// and the policy opens it. The sealing key (`BEACON_KEY_SEAL_KEY`) is held by the registry and the
// policy only, so the gateway, the fleet simulator, Kafka, PostgreSQL and their backups see
// ciphertext. The policy needs the plain key anyway, so sharing the at-rest key with it widens
// nobody's access.

/// A beacon's GATT key sealed with ChaCha20-Poly1305 (`BeaconKeySealer`), as stored by the registry
/// and carried in the beacon's payload on `registry.changes` (member `gattKey`, and after a rotation
/// `previousGattKey` with `validUntil`).
public struct SealedBeaconKey: Codable, Hashable, Sendable {
    /// Starts at 1; each rotation adds one. Bound into the seal, so an old box cannot pass for a new one.
    public var version: Int
    /// Base64 of the combined box: 12-byte nonce, ciphertext, 16-byte tag.
    public var sealed: String
    /// A beacon's previous key only: proofs it signs still verify until this moment, while an
    /// installer writes the new key into the physical beacon. `nil` on a current key.
    public var validUntil: Date?

    public init(version: Int, sealed: String, validUntil: Date? = nil) {
        self.version = version
        self.sealed = sealed
        self.validUntil = validUntil
    }
}

/// Seals and opens beacon GATT keys with the key the registry and the policy service share.
///
/// The associated data is `beacon-gatt-key|v1|<beaconId>|<version>`: a box copied onto another
/// beacon, or replayed as another version, does not open.
public struct BeaconKeySealer: Sendable {
    /// Bytes of a beacon GATT key (HMAC-SHA256 key).
    public static let beaconKeyByteCount = 32

    // Raw bytes: this swift-crypto's `SymmetricKey` is not `Sendable`.
    private let sealingKey: [UInt8]

    /// `nil` unless `sealingKey` is exactly 32 bytes (ChaCha20-Poly1305's key size).
    public init?(sealingKey: [UInt8]) {
        guard sealingKey.count == 32 else { return nil }
        self.sealingKey = sealingKey
    }

    /// A fresh random beacon key.
    public static func generateBeaconKey() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<beaconKeyByteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    public func seal(_ beaconKey: [UInt8], beaconId: String, version: Int) throws -> SealedBeaconKey {
        let box = try ChaChaPoly.seal(
            beaconKey, using: SymmetricKey(data: sealingKey), authenticating: Self.associatedData(beaconId: beaconId, version: version)
        )
        return SealedBeaconKey(version: version, sealed: box.combined.base64EncodedString())
    }

    /// The beacon key, or `nil` when the box is not one this key sealed for this beacon and version.
    public func open(_ sealed: SealedBeaconKey, beaconId: String) -> [UInt8]? {
        guard let combined = Data(base64Encoded: sealed.sealed),
            let box = try? ChaChaPoly.SealedBox(combined: combined),
            let key = try? ChaChaPoly.open(
                box, using: SymmetricKey(data: sealingKey), authenticating: Self.associatedData(beaconId: beaconId, version: sealed.version)
            ),
            key.count == Self.beaconKeyByteCount
        else { return nil }
        return Array(key)
    }

    static func associatedData(beaconId: String, version: Int) -> Data {
        Data("beacon-gatt-key|v1|\(beaconId)|\(version)".utf8)
    }
}
