import AttendanceProtocol
import Crypto
import Foundation
import ServiceRuntime

/// What a device token asserts: this device, bound to this user, until `expiresAt`.
public struct DeviceClaims: Hashable, Sendable, Codable {
    public var deviceId: String
    public var userId: String
    /// Whole seconds (the token carries Unix seconds).
    public var issuedAt: Date
    public var expiresAt: Date
    /// The signing key, so keys can rotate while older tokens stay valid.
    public var keyId: String
}

/// Why a token was refused.
public enum DeviceTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not `v1.<payload>.<signature>`, not base64url, or the payload is not the expected JSON.
    case malformed(reason: String)
    /// The signature does not match the payload under the named key: forged or altered.
    case badSignature
    /// Valid, but past its expiry.
    case expired(at: Date)
    /// Signed with a key this verifier does not hold (retired, or from another deployment).
    case unknownKeyId(String)
    /// A signer configured with an invalid key set.
    case invalidKey(reason: String)

    public var description: String {
        switch self {
        case .malformed(let reason): return "device token is malformed: \(reason)"
        case .badSignature: return "device token signature does not match"
        case .expired(let at): return "device token expired at \(WireTimestamp.string(from: at))"
        case .unknownKeyId(let id): return "device token was signed with unknown key id \"\(id)\""
        case .invalidKey(let reason): return "device token key is invalid: \(reason)"
        }
    }
}

/// One HMAC-SHA256 key with its id.
public struct DeviceSigningKey: Sendable {
    public let id: String
    /// Kept as bytes (SymmetricKey is not Sendable); a key is made per use, which costs a copy.
    private let secret: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: secret) }

    /// - Parameters:
    ///   - id: 1-64 characters of `[A-Za-z0-9._-]` (it travels inside tokens and is stored per device).
    ///   - secret: at least 32 bytes (the HMAC-SHA256 block security level).
    public init(id: String, secret: [UInt8]) throws(DeviceTokenError) {
        guard DeviceTokenSigner.isValidKeyId(id) else {
            throw .invalidKey(reason: "key id \"\(id)\" must be 1-64 characters of A-Z a-z 0-9 . _ -")
        }
        guard secret.count >= 32 else {
            throw .invalidKey(reason: "key \"\(id)\" has \(secret.count) bytes; at least 32 are required")
        }
        self.id = id
        self.secret = secret
    }

    /// A fresh random key (tests, first start of a development stack).
    public static func random(id: String) throws(DeviceTokenError) -> DeviceSigningKey {
        try DeviceSigningKey(id: id, secret: Secrets.randomBytes(32))
    }
}

/// Issues and checks device credentials that a gateway verifies without a database round trip.
///
/// Token: `v1.<base64url payload>.<base64url HMAC-SHA256>`, the MAC taken over the ASCII of
/// `v1.<base64url payload>`; the payload is compact JSON
/// `{"did":…,"uid":…,"iat":<unix s>,"exp":<unix s>,"kid":…}`.
///
/// Rotation: sign with the active key; verify with any key still held. Retire a key by dropping it
/// from the set once every token it signed has expired. Revocation before expiry is not visible in
/// the token; gateways learn it from the device's status on `registry.changes`.
public struct DeviceTokenSigner: Sendable {
    public static let version = "v1"
    /// Bounds the work a hostile header can cause before it is refused.
    public static let maxTokenLength = 2_048

    public let activeKeyId: String
    private let keys: [String: DeviceSigningKey]

    /// - Parameters:
    ///   - activeKey: signs new tokens.
    ///   - previousKeys: still accepted when verifying (older tokens).
    public init(activeKey: DeviceSigningKey, previousKeys: [DeviceSigningKey] = []) throws(DeviceTokenError) {
        var keys: [String: DeviceSigningKey] = [activeKey.id: activeKey]
        for key in previousKeys {
            guard keys[key.id] == nil else { throw .invalidKey(reason: "key id \"\(key.id)\" appears twice") }
            keys[key.id] = key
        }
        self.activeKeyId = activeKey.id
        self.keys = keys
    }

    /// Ids of every key this signer accepts.
    public var keyIds: Set<String> { Set(keys.keys) }

    /// Keyed digests of `text` for storing a short secret (an enrollment code) so that a copy of the
    /// database cannot be searched for it: HMAC-SHA256 under a key derived from each key this signer
    /// holds for `purpose` alone, lowercase hex, the active key's first (store that one; look up by
    /// any, so a rotation keeps the codes made before it).
    public func keyedDigests(of text: String, purpose: String) -> [String] {
        let ordered = [keys[activeKeyId]!] + keys.values.filter { $0.id != activeKeyId }.sorted { $0.id < $1.id }
        return ordered.map { signing in
            let derived = HMAC<SHA256>.authenticationCode(for: Array("\(purpose)|v1".utf8), using: signing.key)
            let digest = HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: Array(derived)))
            return Secrets.hex(Array(digest))
        }
    }

    /// A token for the device, valid from `issuedAt` (rounded down to the second) for `lifetime`.
    public func sign(deviceId: String, userId: String, issuedAt: Date, lifetime: Duration) -> (token: String, claims: DeviceClaims) {
        let issued = Date(timeIntervalSince1970: issuedAt.timeIntervalSince1970.rounded(.down))
        let seconds = max(1, lifetime.components.seconds)
        let claims = DeviceClaims(
            deviceId: deviceId, userId: userId, issuedAt: issued,
            expiresAt: issued.addingTimeInterval(TimeInterval(seconds)), keyId: activeKeyId
        )
        return (sign(claims), claims)
    }

    /// The token for exactly these claims, signed with the key `claims.keyId` names (the active key
    /// when that one is not held).
    public func sign(_ claims: DeviceClaims) -> String {
        let key = keys[claims.keyId] ?? keys[activeKeyId]!
        var claims = claims
        claims.keyId = key.id
        let payload = TokenPayload(claims)
        // JSONEncoder escapes nothing in ids we accept; sorted keys keep the bytes reproducible.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(payload)) ?? Data()
        let signedPart = "\(Self.version).\(Base64URL.encode(json))"
        let mac = HMAC<SHA256>.authenticationCode(for: Array(signedPart.utf8), using: key.key)
        return "\(signedPart).\(Base64URL.encode(Array(mac)))"
    }

    /// The claims of a genuine token, unexpired (or expired less than `expiredWithin` ago: only the
    /// token refresh accepts one).
    ///
    /// Checks, in order: shape, payload, key id, signature (constant time), expiry; the first
    /// failure is the error.
    public func verify(_ token: String, now: Date, expiredWithin grace: TimeInterval = 0) throws(DeviceTokenError) -> DeviceClaims {
        guard token.utf8.count <= Self.maxTokenLength else { throw .malformed(reason: "longer than \(Self.maxTokenLength) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed(reason: "expected v1.<payload>.<signature>") }
        guard parts[0] == Self.version else { throw .malformed(reason: "unsupported version \"\(parts[0].prefix(8))\"") }
        guard let json = Base64URL.decode(parts[1]) else { throw .malformed(reason: "payload is not base64url") }
        guard let mac = Base64URL.decode(parts[2]) else { throw .malformed(reason: "signature is not base64url") }
        let payload: TokenPayload
        do {
            payload = try JSONDecoder().decode(TokenPayload.self, from: Data(json))
        } catch {
            throw .malformed(reason: "payload is not the expected JSON")
        }
        guard let key = keys[payload.kid] else { throw .unknownKeyId(payload.kid) }
        let signedPart = Array("\(parts[0]).\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signedPart, using: key.key) else {
            throw .badSignature
        }
        let claims = payload.claims
        guard claims.expiresAt > claims.issuedAt else { throw .malformed(reason: "expiry is not after issue time") }
        guard now < claims.expiresAt.addingTimeInterval(grace) else { throw .expired(at: claims.expiresAt) }
        return claims
    }

    static func isValidKeyId(_ id: String) -> Bool {
        (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy { c in
                (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x5F || c == 0x2D
            }
    }
}

/// The JSON inside a token: short member names keep headers small.
private struct TokenPayload: Codable {
    var did: String
    var uid: String
    var iat: Int64
    var exp: Int64
    var kid: String

    init(_ claims: DeviceClaims) {
        did = claims.deviceId
        uid = claims.userId
        iat = Int64(claims.issuedAt.timeIntervalSince1970.rounded(.down))
        exp = Int64(claims.expiresAt.timeIntervalSince1970.rounded(.down))
        kid = claims.keyId
    }

    var claims: DeviceClaims {
        DeviceClaims(
            deviceId: did, userId: uid, issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            expiresAt: Date(timeIntervalSince1970: TimeInterval(exp)), keyId: kid
        )
    }
}

extension DeviceTokenSigner {
    /// Reads the signing keys from the environment:
    /// - `DEVICE_TOKEN_KEYS`: comma-separated `keyId:base64secret` (each secret ≥ 32 bytes);
    /// - `DEVICE_TOKEN_ACTIVE_KEY`: the id that signs new tokens (default: the first listed).
    public static func load(from env: EnvironmentReader) throws(ConfigurationError) -> DeviceTokenSigner {
        let expected = "comma-separated keyId:base64secret entries, each secret at least 32 bytes"
        let list = try env.requiredString("DEVICE_TOKEN_KEYS", expected: expected)
        var keys: [DeviceSigningKey] = []
        for entry in list.split(separator: ",") {
            let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let secret = Data(base64Encoded: String(parts[1])),
                let key = try? DeviceSigningKey(id: String(parts[0]), secret: Array(secret))
            else {
                throw ConfigurationError(key: "DEVICE_TOKEN_KEYS", value: "<redacted>", expected: expected)
            }
            // Checked here, before the active key is set apart: a second entry of the active id would
            // otherwise vanish, and services listing the two in another order would sign and verify with
            // different secrets.
            guard !keys.contains(where: { $0.id == key.id }) else {
                throw ConfigurationError(
                    key: "DEVICE_TOKEN_KEYS", value: "<redacted>", expected: "\(expected); key id \"\(key.id)\" appears twice")
            }
            keys.append(key)
        }
        let activeId = env.optionalString("DEVICE_TOKEN_ACTIVE_KEY") ?? keys.first?.id
        guard let active = keys.first(where: { $0.id == activeId }) else {
            throw ConfigurationError(key: "DEVICE_TOKEN_ACTIVE_KEY", value: activeId, expected: "one of the key ids in DEVICE_TOKEN_KEYS")
        }
        do {
            return try DeviceTokenSigner(activeKey: active, previousKeys: keys.filter { $0.id != active.id })
        } catch {
            throw ConfigurationError(key: "DEVICE_TOKEN_KEYS", value: "<redacted>", expected: "\(expected); \(error)")
        }
    }
}
