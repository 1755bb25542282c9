import AccessControl
import AttendanceProtocol
import Foundation

/// Enrollment code text: ten Crockford base32 characters shown as `XXXXX-XXXXX` (50 random bits).
///
/// Short enough to type from a screen, and safe because it is one-time, expires, and is stored as a
/// keyed digest of its normalized form (`DeviceTokenSigner.keyedDigests`): 50 bits are too few for a
/// plain hash, which a copy of the database could be searched for in hours.
package enum EnrollmentCodeFormat {
    package static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    package static let length = 10

    package static func generate() -> String {
        let chars = Secrets.randomBytes(length).map { alphabet[Int($0 & 0x1F)] }
        return String(chars[0..<5]) + "-" + String(chars[5...])
    }

    /// Upper-cases, drops dashes and spaces, and reads I/L as 1 and O as 0 (Crockford), so what a
    /// person types matches what was shown. `nil` when it cannot be a code.
    package static func normalize(_ text: String) -> String? {
        var out: [Character] = []
        for ch in text.uppercased() {
            switch ch {
            case "-", " ": continue
            case "I", "L": out.append("1")
            case "O": out.append("0")
            default:
                guard alphabet.contains(ch) else { return nil }
                out.append(ch)
            }
        }
        return out.count == length ? String(out) : nil
    }

    package static let digestPurpose = "enrollment-code"

    /// The digest stored for a new code (under the active signing key).
    package static func digest(normalized: String, signer: DeviceTokenSigner) -> String {
        signer.keyedDigests(of: normalized, purpose: digestPurpose)[0]
    }

    /// Every digest a stored code may have: under each signing key held, and the plain SHA-256 that
    /// codes stored before the keyed digest carry (they expire within 30 days).
    package static func lookupDigests(normalized: String, signer: DeviceTokenSigner) -> [String] {
        signer.keyedDigests(of: normalized, purpose: digestPurpose) + [Secrets.sha256Hex(normalized)]
    }
}

/// Generated entity ids: a readable prefix and 96 random bits (`site_3f9c…`).
package enum EntityIdGenerator {
    package static func make(_ prefix: String) -> String {
        "\(prefix)_\(Secrets.hex(Secrets.randomBytes(12)))"
    }

    /// What `registry.entity_id` accepts (`EntityId`).
    package static func isValid(_ id: String) -> Bool { EntityId.isValid(id) }
}
