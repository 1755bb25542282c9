import AttendanceProtocol
import Crypto
import Foundation

/// The gateway's idempotency rules (IETF `Idempotency-Key` draft;
/// docs/SPECIFICATION.md, "3. Device API").
///
/// - `POST /v1/attendance/events` and the batch form carry the device's key
///   (sha256(userId|deviceId|beaconId|tStart|nonce)): the header for a single
///   event (required; it must equal the body's `idempotencyKey`), the body's field per batch item.
/// - A session contract's `Idempotency-Key` header is scoped to the authenticated device: the
///   event's key is `scoped(header:userId:deviceId:)`,
///   `sha256hex("v1|header|<userId>|<deviceId>|<header>")`, so a counter such as `hb-1` sent by two
///   users, or by a user's new phone after re-enrolment, is two events, never one answered as the
///   other's replay or refused as a mismatch. The answer echoes the header; status lookups accept
///   either key.
/// - The session contracts are idempotent by `sessionKey`. A request without the header gets the
///   key derived by `derived(kind:userId:sessionKey:ts:)`:
///   `sha256hex("v1|<kind>|<userId>|<sessionKey>")` for check-in and check-out, and
///   `sha256hex("v1|heartbeat|<userId>|<sessionKey>|<ts as RFC 3339 ms>")` for heartbeats (one
///   session has many heartbeats, one per `ts`). The user is the authenticated one, so two users'
///   session keys never collide. A device that checks out of the same session twice (a soft exit
///   reopened) sends its own `Idempotency-Key` for the second check-out: under the derived key it
///   is a repeat of the first one.
/// - A key is remembered with the fingerprint of its payload: the lowercase hex sha256 of the
///   payload's `ProtocolCodec.canonical` encoding (what `RawEventEnvelope.payloadFingerprint`
///   documents). The same key with another fingerprint is a 422.
package enum IdempotencyKeys {
    /// The longest header value accepted (a sha256 hex key is 64).
    package static let maxHeaderLength = 128

    /// The key for a session contract sent without an `Idempotency-Key` header.
    package static func derived(kind: RawEventKind, userId: String, sessionKey: String, ts: Date? = nil) -> String {
        var material = "v1|\(kind.rawValue)|\(userId)|\(sessionKey)"
        if kind == .heartbeat, let ts { material += "|\(WireTimestamp.string(from: ts))" }
        return sha256Hex(Array(material.utf8))
    }

    /// The key a session contract's `Idempotency-Key` header stands for, for the authenticated device.
    package static func scoped(header: String, userId: String, deviceId: String) -> String {
        sha256Hex(Array("v1|header|\(userId)|\(deviceId)|\(header)".utf8))
    }

    /// The key for a contract payload: the header's (scoped to the device) when given, else the derived one.
    package static func key(for payload: RawEventPayload, userId: String, deviceId: String, header: String?) -> String? {
        if let header { return scoped(header: header, userId: userId, deviceId: deviceId) }
        switch payload {
        case .event: return nil
        case .checkIn(let request): return derived(kind: .checkIn, userId: userId, sessionKey: request.sessionKey)
        case .checkOut(let request): return derived(kind: .checkOut, userId: userId, sessionKey: request.sessionKey)
        case .heartbeat(let request): return derived(kind: .heartbeat, userId: userId, sessionKey: request.sessionKey, ts: request.ts)
        }
    }

    /// The header value as a key: surrounding quotes (the draft's structured-field string form)
    /// removed, then 1...128 characters of `A-Z a-z 0-9 - _ . :`. `nil` when it is not usable.
    package static func parseHeader(_ raw: String) -> String? {
        var value = raw.trimmingCharacters(in: .whitespaces)
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            value = String(value.dropFirst().dropLast())
        }
        guard (1...maxHeaderLength).contains(value.utf8.count) else { return nil }
        let allowed = value.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == 0x2D || c == 0x5F || c == 0x2E || c == 0x3A
        }
        return allowed ? value : nil
    }

    /// Lowercase hex sha256 of the payload's canonical encoding.
    package static func fingerprint(_ payload: RawEventPayload) throws(ProtocolEncodingError) -> String {
        fingerprint(try PreEncoded(payload))
    }

    /// The same, from a payload already encoded (the gateway then produces that encoding too).
    package static func fingerprint(_ payload: PreEncoded<RawEventPayload>) -> String {
        sha256Hex(payload.bytes(.canonical))
    }

    package static func sha256Hex(_ bytes: [UInt8]) -> String {
        let digest = SHA256.hash(data: bytes)
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in digest {
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
