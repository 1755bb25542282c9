import Crypto
import Foundation

// The GATT challenge-response (docs/SPECIFICATION.md, "6. Anti-fraud rules"): the gateway hands a device
// a short-lived nonce for one beacon (`GET /v1/attendance/challenge?beacon=`), the device has the beacon
// sign it during the GATT handshake, and the event carries `gatt: {nonce, hmac}` with hmac =
// HMAC-SHA256(key: the beacon's key, message: the nonce's UTF-8 bytes), lowercase hex. A replayed iBeacon
// identity cannot produce that HMAC: the key never leaves the beacon and the registry.
//
// Nonces are stateless: the gateway signs (beacon, device, expiry, random) with a key it shares with
// the policy service, so the policy can check any instance's nonce without a shared store. Both use
// the codec below from this protocol module; neither service imports the other.

/// Mints and checks challenge nonces: `<expiresAt unix seconds>.<16 random bytes hex>.<tag hex>`,
/// the tag being the first 16 bytes of HMAC-SHA256(key, "gatt-nonce|v1|" + the beacon's 16 UUID bytes
/// and big-endian major and minor + "|<device>|<exp>|<random>").
///
/// Nonces are issued with `key` and checked against it and `previousKeys`: a rotated key keeps
/// checking the nonces of check-ins phones still hold offline (up to the gateway's event age) until
/// it is dropped.
public struct GattNonceCodec: Sendable {
    // Raw bytes: this swift-crypto's `SymmetricKey` is not `Sendable`.
    private let key: [UInt8]
    private let previousKeys: [[UInt8]]
    /// How long a nonce is valid after it is issued.
    public let lifetime: TimeInterval

    public init(key: [UInt8], previousKeys: [[UInt8]] = [], lifetime: TimeInterval = 60) {
        precondition(([key] + previousKeys).allSatisfy { $0.count >= 16 }, "a nonce key needs at least 128 bits")
        precondition(lifetime > 0, "the nonce lifetime must be positive")
        self.key = key
        self.previousKeys = previousKeys
        self.lifetime = lifetime
    }

    /// A fresh nonce for `beacon` and `deviceId`, valid until `now + lifetime` (whole seconds).
    public func issue(beacon: RegistryBeaconKey, deviceId: String, now: Date) -> (nonce: String, expiresAt: Date) {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let expiry = Int64((now.timeIntervalSince1970 + lifetime).rounded(.up))
        return (
            nonce(beacon: beacon, deviceId: deviceId, expiry: expiry, random: Hex.encode(random)),
            Date(timeIntervalSince1970: TimeInterval(expiry))
        )
    }

    /// Builds a nonce from its parts (tests build expired ones this way).
    public func nonce(beacon: RegistryBeaconKey, deviceId: String, expiry: Int64, random: String) -> String {
        "\(expiry).\(random).\(tag(beacon: beacon, deviceId: deviceId, expiry: expiry, random: random))"
    }

    public enum Check: Hashable, Sendable {
        case valid(expiresAt: Date)
        /// Not a nonce this key issued for this beacon and device (forged, altered, or another's).
        case forged
        case expired(expiresAt: Date)
    }

    /// Whether `nonce` was issued by this key for `beacon` and `deviceId`, and is unexpired at `time`.
    public func check(_ nonce: String, beacon: RegistryBeaconKey, deviceId: String, at time: Date) -> Check {
        let parts = nonce.split(separator: ".", omittingEmptySubsequences: false)
        // Only the spelling this key issues (no sign or leading zero in the expiry, a lower-case tag): the
        // spent-nonce ledger keys on the text, so another spelling of the same nonce must not pass as new.
        guard parts.count == 3, let expiry = Int64(parts[0]), String(expiry) == parts[0], parts[1].utf8.count == 32,
            let presented = Hex.decode(parts[2]), presented.count == 16, Hex.encode(presented) == parts[2]
        else { return .forged }
        let random = String(parts[1])
        func issued(by key: [UInt8]) -> Bool {
            Self.constantTimeEqual(
                Array(mac(beacon: beacon, deviceId: deviceId, expiry: expiry, random: random, key: key).prefix(16)), presented)
        }
        guard issued(by: key) || previousKeys.contains(where: issued(by:)) else { return .forged }
        let expiresAt = Date(timeIntervalSince1970: TimeInterval(expiry))
        return time > expiresAt ? .expired(expiresAt: expiresAt) : .valid(expiresAt: expiresAt)
    }

    private func tag(beacon: RegistryBeaconKey, deviceId: String, expiry: Int64, random: String) -> String {
        Hex.encode(Array(mac(beacon: beacon, deviceId: deviceId, expiry: expiry, random: random, key: key).prefix(16)))
    }

    private func mac(beacon: RegistryBeaconKey, deviceId: String, expiry: Int64, random: String, key: [UInt8]) -> [UInt8] {
        // Bytes, not `beacon.description`: formatting the UUID as text cost more than the HMAC.
        var message = [UInt8]()
        message.reserveCapacity(64 + deviceId.utf8.count + random.utf8.count)
        message.append(contentsOf: "gatt-nonce|v1|".utf8)
        BeaconBytes.append(beacon, to: &message)
        message.append(UInt8(ascii: "|"))
        message.append(contentsOf: deviceId.utf8)
        message.append(UInt8(ascii: "|"))
        message.append(contentsOf: String(expiry).utf8)
        message.append(UInt8(ascii: "|"))
        message.append(contentsOf: random.utf8)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// A beacon identity as key material: the 16 UUID bytes, then major and minor big-endian.
public enum BeaconBytes {
    public static func append(_ beacon: RegistryBeaconKey, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: beacon.uuid.uuid) { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(beacon.major >> 8))
        bytes.append(UInt8(beacon.major & 0xFF))
        bytes.append(UInt8(beacon.minor >> 8))
        bytes.append(UInt8(beacon.minor & 0xFF))
    }
}

/// What a beacon answers in the handshake: HMAC-SHA256(key: beacon key, message: nonce), hex.
public enum GattProof {
    public static func hmac(nonce: String, beaconKey: SymmetricKey) -> String {
        Hex.encode(Array(HMAC<SHA256>.authenticationCode(for: Data(nonce.utf8), using: beaconKey)))
    }

    /// The same from the key's bytes (what the provisioning plan hands the installer).
    public static func hmac(nonce: String, rawKey: [UInt8]) -> String {
        hmac(nonce: nonce, beaconKey: SymmetricKey(data: rawKey))
    }

    public static func isValid(hmac presented: String, nonce: String, beaconKey: SymmetricKey) -> Bool {
        guard let bytes = Hex.decode(Substring(presented)), bytes.count == SHA256.byteCount else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(bytes, authenticating: Data(nonce.utf8), using: beaconKey)
    }
}

/// Lowercase hex without allocation surprises.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `nil` unless an even number of hex digits (either case).
    public static func decode(_ text: Substring) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let high = value(utf8[i]), let low = value(utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    /// The value of one hex digit (either case), `nil` for any other byte.
    @inlinable
    public static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
