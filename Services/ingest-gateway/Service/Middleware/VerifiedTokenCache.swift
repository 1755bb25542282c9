import AccessControl
import AttendanceProtocol
import Foundation
import Synchronization

/// Device tokens whose signature this gateway already checked, with their claims. A phone sends
/// the same token on every request for hours, and checking it (base64url, the payload's JSON, an
/// HMAC) was about a tenth of the gateway's CPU. The signing keys are fixed for the process's
/// life, so a token that verified once verifies again until it expires, and expiry is checked on
/// every hit. Revocation is not the token's business: the registry feed is consulted on every
/// request, cached or not. Bounded: when full it is emptied, which costs one verification per
/// active device.
final class VerifiedTokenCache: Sendable {
    private let entries = Mutex<[String: DeviceClaims]>([:])
    let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    /// The claims of `token` if it verified before and has not expired at `now`.
    func claims(for token: String, now: Date) -> DeviceClaims? {
        guard capacity > 0 else { return nil }
        return entries.withLock { entries in
            guard let claims = entries[token] else { return nil }
            guard now < claims.expiresAt else {
                entries[token] = nil
                return nil
            }
            return claims
        }
    }

    func store(_ claims: DeviceClaims, for token: String) {
        guard capacity > 0 else { return }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = claims
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
