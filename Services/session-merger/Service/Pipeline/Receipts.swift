import AccessControl
import AttendanceProtocol
import Crypto
import Foundation

/// Deterministic receipts: the same idempotency key always gets the same receipt, so a replayed
/// batch (after a crash between commit and verdict) answers with the receipt already recorded.
package enum ServerReceipt {
    /// `rcpt_` + the first 32 hex digits (128 bits) of sha256(idempotency key).
    package static func id(forIdempotencyKey key: String) -> String {
        // One receipt per event written: `Hex` rather than a string per byte (which took 5 % of the
        // merger's CPU).
        let digest = SHA256.hash(data: Array(key.utf8))
        return "rcpt_" + Hex.encode(Array(digest.prefix(16)))
    }
}

/// The JSON the merger writes into PostgreSQL parameters (`jsonb_to_recordset`): the admin APIs'
/// coding, whose RFC 3339 UTC timestamps at millisecond precision PostgreSQL reads as `timestamptz`.
enum MergerJSON {
    static func string<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try AdminJSON.encoder().encode(value), as: UTF8.self)
    }
}
