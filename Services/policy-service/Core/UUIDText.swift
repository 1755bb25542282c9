import AttendanceProtocol
import Foundation
import Synchronization

/// Parses the canonical 36-character UUID text (either case) without allocating. Foundation's
/// `UUID(uuidString:)` on Linux goes through `sscanf`, which was the largest single cost of a
/// decision: every rule that resolves the beacon parses its UUID.
package enum UUIDText {
    package static func parse(_ text: String) -> UUID? {
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var text = text
        let ok = text.withUTF8 { utf8 -> Bool in
            guard utf8.count == 36 else { return false }
            var out = 0
            var i = 0
            return withUnsafeMutableBytes(of: &bytes) { raw -> Bool in
                while i < 36 {
                    if i == 8 || i == 13 || i == 18 || i == 23 {
                        guard utf8[i] == UInt8(ascii: "-") else { return false }
                        i += 1
                        continue
                    }
                    guard let high = Hex.value(utf8[i]), let low = Hex.value(utf8[i + 1]) else { return false }
                    raw[out] = high << 4 | low
                    out += 1
                    i += 2
                }
                return out == 16
            }
        }
        return ok ? UUID(uuid: bytes) : nil
    }
}

extension SemanticVersion {
    private static let cache = Mutex<[String: SemanticVersion?]>([:])

    /// `SemanticVersion(text)`, remembered: a fleet states a handful of app versions, and parsing one
    /// costs more than the rest of the attestation rule. Bounded: the table is cleared when it
    /// reaches 1,024 distinct texts (garbage versions cannot grow it without limit).
    package static func cached(_ text: String) -> SemanticVersion? {
        if let hit = cache.withLock({ $0[text] }) { return hit }
        let parsed = SemanticVersion(text)
        cache.withLock { table in
            if table.count >= 1_024 { table.removeAll(keepingCapacity: true) }
            table[text] = parsed
        }
        return parsed
    }
}
