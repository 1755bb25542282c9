import Crypto

/// The `Idempotency-Key` every attendance request carries
/// (docs/SPECIFICATION.md, "2. The device outbox and delivery"): lowercase hex SHA-256 of
///
///     userId|deviceId|beaconId|tStart|nonce
///
/// exactly, UTF-8 encoded, no trailing newline, where
/// - `userId`, `deviceId`: as persisted on the device (they must not contain `|`);
/// - `beaconId`: `<lowercase canonical uuid>:<major>:<minor>` in decimal,
///   e.g. `f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:3` (`BeaconIdentity.beaconId`);
/// - `tStart`: **epoch milliseconds**, UTC, decimal, no padding, e.g. `1758177312000`. For a check-in
///   this is the session start; for a check-out or heartbeat it is that event's own time;
/// - `nonce`: 16 lowercase hex digits (64 random bits) drawn per event, so two events that share every
///   other field (a check-in and a heartbeat in the same millisecond) still get different keys.
///
/// Example: `u_123|d_456|f7826da6-4fa2-4e98-8024-bc5b71e0893e:10:3|1758177312000|0123456789abcdef`.
///
/// The key is computed once, stored with the event in the outbox and reused verbatim by every retry,
/// and kept when the event's times are corrected onto the server's clock
/// (`Outbox.correctPhoneClockStamps`); the server dedupes on it.
public struct IdempotencyKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// 64 lowercase hexadecimal characters.
    public let hex: String

    public init(hex: String) { self.hex = hex }

    public var description: String { hex }

    public static func canonicalInput(
        userId: String, deviceId: String, beaconId: String, tStart: Timestamp, nonce: String
    ) -> String {
        "\(userId)|\(deviceId)|\(beaconId)|\(tStart.millisecondsSinceEpoch)|\(nonce)"
    }

    public static func make(
        userId: String, deviceId: String, beaconId: String, tStart: Timestamp, nonce: String
    ) -> IdempotencyKey {
        let input = canonicalInput(userId: userId, deviceId: deviceId, beaconId: beaconId, tStart: tStart, nonce: nonce)
        let digest = SHA256.hash(data: Array(input.utf8))
        return IdempotencyKey(hex: Hex.string(bytes: digest))
    }

    /// A nonce in the documented format (16 lowercase hex digits).
    public static func nonce(using rng: inout some RandomNumberGenerator) -> String {
        Hex.string(rng.next() as UInt64, digits: 16)
    }

    public init(from decoder: any Decoder) throws {
        hex = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(hex)
    }
}
