import AttendanceProtocol
import Foundation
import Logging
import PolicyServiceCore
import PostgresNIO
import ServiceRuntime
import Synchronization

/// One GATT nonce presented by one event.
package struct NonceClaim: Hashable, Sendable {
    package var nonce: String
    package var idempotencyKey: String
    package var userId: String
    /// The nonce's own expiry; the row is pruned a retention period after it.
    package var expiresAt: Date
}

/// The spent GATT nonces shared by every policy instance and kept across restarts.
package protocol SpentNonceStore: Sendable {
    /// Claims each nonce for its event, atomically per nonce: a nonce nobody holds becomes this
    /// event's. Returns, for every nonce some event already held, that event's idempotency key
    /// (it may be the same event: a redelivery).
    func claim(_ claims: [NonceClaim]) async throws -> [String: String]
    /// Deletes nonces that expired before `cutoff`. Returns how many.
    @discardableResult
    func prune(expiredBefore cutoff: Date) async throws -> Int
}

/// `SpentNonceStore` on the policy schema's `spent_gatt_nonces` table: one statement per polled
/// batch (`unnest` of the batch's nonces, `INSERT ... ON CONFLICT DO NOTHING`), so the cost is a
/// round trip per batch, not per event.
package struct PostgresSpentNonceStore: SpentNonceStore {
    let client: PostgresClient
    let logger: Logger

    package func claim(_ claims: [NonceClaim]) async throws -> [String: String] {
        guard !claims.isEmpty else { return [:] }
        // One claim per nonce, the first in offset order: the in-memory history judges later
        // presentations inside the batch.
        var seen = Set<String>()
        let unique = claims.filter { seen.insert($0.nonce).inserted }
        let nonces = unique.map(\.nonce)
        let keys = unique.map(\.idempotencyKey)
        let users = unique.map(\.userId)
        let expiries = unique.map(\.expiresAt)
        // `existing` reads the table as it was when the statement started; `inserted` are ours.
        let rows = try await client.query(
            """
            WITH input AS (
                SELECT * FROM unnest(\(nonces)::text[], \(keys)::text[], \(users)::text[], \(expiries)::timestamptz[])
                    AS t(nonce, idempotency_key, user_id, expires_at)
            ), existing AS (
                SELECT s.nonce, s.idempotency_key FROM spent_gatt_nonces s JOIN input i ON i.nonce = s.nonce
            ), inserted AS (
                INSERT INTO spent_gatt_nonces (nonce, idempotency_key, user_id, expires_at)
                SELECT nonce, idempotency_key, user_id, expires_at FROM input
                ON CONFLICT (nonce) DO NOTHING
                RETURNING nonce
            )
            SELECT nonce, idempotency_key FROM existing
            UNION ALL
            SELECT nonce, NULL FROM inserted
            """, logger: logger
        )
        var held: [String: String] = [:]
        var ours = Set<String>()
        for try await (nonce, key) in rows.decode((String, String?).self) {
            if let key { held[nonce] = key } else { ours.insert(nonce) }
        }
        // Neither held before nor inserted by us: another instance claimed it while this statement
        // ran (its row was not committed yet when ours started). Read who.
        let raced = nonces.filter { held[$0] == nil && !ours.contains($0) }
        if !raced.isEmpty {
            let again = try await client.query(
                "SELECT nonce, idempotency_key FROM spent_gatt_nonces WHERE nonce = ANY(\(raced)::text[])",
                logger: logger
            )
            for try await (nonce, key) in again.decode((String, String).self) { held[nonce] = key }
        }
        return held
    }

    @discardableResult
    package func prune(expiredBefore cutoff: Date) async throws -> Int {
        let rows = try await client.query(
            "DELETE FROM spent_gatt_nonces WHERE expires_at < \(cutoff) RETURNING 1", logger: logger
        )
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}

/// Makes `gatt_challenge`'s "already used" check durable and shared: before a batch is decided,
/// the nonces of its GATT check-ins are claimed in the `SpentNonceStore`, and every nonce another
/// event already holds is put in the instance's `PolicyHistory`, which the rule reads. So a nonce
/// spent before a restart, or on another instance (after a rebalance, or a replay sent under
/// another user), is refused as reused; a redelivery of the same event is not.
///
/// Only nonces this service issued for the event's beacon and device and unexpired at the moment the
/// rule judges them (`GattChallengeRule.judgedAt`) are claimed: a forged or expired one is refused on that alone and must not fill the table. A
/// claimed nonce stays spent whatever the verdict, like the in-memory rule (a refused punch must
/// not free its nonce for a second try).
package struct GattNonceLedger: Sendable {
    package let store: any SpentNonceStore
    package let nonces: GattNonceCodec

    /// The claims a batch makes, in order.
    package func claims(for events: [RawEventEnvelope]) -> [NonceClaim] {
        var claims: [NonceClaim] = []
        for event in events {
            guard let body = event.attendanceEvent, body.type == .checkin, let proof = body.gatt,
                let beacon = RegistryBeaconKey(body.beacon),
                case .valid(let expiresAt) = nonces.check(
                    proof.nonce, beacon: beacon, deviceId: event.deviceId, at: GattChallengeRule.judgedAt(event))
            else { continue }
            claims.append(NonceClaim(nonce: proof.nonce, idempotencyKey: event.idempotencyKey, userId: event.userId, expiresAt: expiresAt))
        }
        return claims
    }

    /// Claims the batch's nonces and loads the holders of those already spent into `history`.
    /// Throws when the store fails: the caller must not decide the batch without the check.
    package func prepare(_ events: [RawEventEnvelope], history: PolicyHistory) async throws {
        let claims = claims(for: events)
        guard !claims.isEmpty else { return }
        let held = try await store.claim(claims)
        // The holder of each nonce: whoever held it before, else the batch's first presenter
        // (the store gave it to that one), so a later presentation in the batch is a reuse even
        // when the first one's proof failed.
        var holders = held
        for claim in claims where holders[claim.nonce] == nil { holders[claim.nonce] = claim.idempotencyKey }
        for claim in claims {
            if let holder = holders[claim.nonce], holder != claim.idempotencyKey {
                history.recordNonce(claim.nonce, userId: claim.userId, idempotencyKey: holder)
            }
        }
    }
}
