import AttendanceProtocol
import Crypto
import Foundation

/// `gatt_challenge`: a device check-in proves it talked to the real beacon: its `gatt` member holds
/// a nonce the gateway issued for this beacon and device, alive at the event's time (`judgedAt`: the
/// event's time, or its receipt when the device's clock says later; between the nonce's issue, less
/// `maxClockSkewSeconds`, and its expiry), not presented before by another event, and
/// HMAC(nonce, beacon key) computed by the beacon. A check-in queued offline keeps its proof: the
/// handshake happened when the event did. An event dated before its nonce was issued cannot have
/// been proved then: a device that backdates a check-in to reuse an old proof is refused, and one
/// dated within the nonce's life records a time at which it held the proof.
///
/// Hosted only when the service has the nonce key and the beacons' keys (`PolicyEngine.withGatt(_:)`).
/// Applies to check-ins; check-outs and heartbeats pass. A check-in through the session contract
/// names no beacon and carries no proof, so it fires as "no proof": otherwise a site that enforces
/// the challenge would accept a check-in posted from anywhere through the contract. A redelivery of the
/// same event (same idempotency key) is not a reuse.
///
/// | finding | action | risk |
/// |---|---|---|
/// | no proof sent (a contract check-in included) | walk_to_gate | 0.5 |
/// | nonce not issued for this beacon and device (forged or borrowed) | contact_admin | 0.9 |
/// | nonce expired at the event's time | walk_to_gate | 0.3 |
/// | event dated before the nonce was issued | contact_admin | 0.9 |
/// | nonce already used by another event | contact_admin | 0.9 |
/// | beacon has no key | contact_admin | 0.5 |
/// | wrong HMAC (the beacon did not sign it: replayed identity) | contact_admin | 0.95 |
/// | signed with the key a rotation replaced, within its grace | note (never refuses) | 0 |
package struct GattChallengeRule: PolicyRule {
    package let nonces: GattNonceCodec
    package let keyring: any BeaconKeyring

    package init(nonces: GattNonceCodec, keyring: any BeaconKeyring) {
        self.nonces = nonces
        self.keyring = keyring
    }

    package var id: PolicyRuleID { .gattChallenge }

    /// The moment a proof is judged at: the event's time, or its receipt when the device's clock
    /// says later. The spent-nonce ledger claims by the same moment.
    package static func judgedAt(_ event: RawEventEnvelope) -> Date {
        min(event.payload.eventTime, event.receivedAt)
    }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        if case .checkIn = event.payload {
            return .fire(
                "no GATT challenge proof: a check-in through the session contract cannot carry one", action: .walkToGate, risk: 0.5)
        }
        guard let body = event.attendanceEvent, body.type == .checkin else { return .passed }
        let beacon = body.beacon
        guard let proof = body.gatt else {
            return .fire("no GATT challenge proof from beacon \(beacon.canonicalId)", action: .walkToGate, risk: 0.5)
        }
        guard let uuid = UUIDText.parse(beacon.uuid), let key = RegistryBeaconKey(uuid: uuid, major: beacon.major, minor: beacon.minor)
        else {
            return .fire("beacon \(beacon.canonicalId) is not a valid identity", action: .contactAdmin, risk: 0.9)
        }
        let judgedAt = Self.judgedAt(event)
        let issuedAt: Date
        switch nonces.check(proof.nonce, beacon: key, deviceId: event.deviceId, at: judgedAt) {
        case .forged:
            return .fire("GATT nonce was not issued for this beacon and device", action: .contactAdmin, risk: 0.9)
        case .expired(let expiresAt):
            return .fire(
                "GATT nonce expired \(Wording.duration(judgedAt.timeIntervalSince(expiresAt))) before the event",
                action: .walkToGate, risk: 0.3
            )
        case .valid(let expiresAt):
            issuedAt = expiresAt.addingTimeInterval(-nonces.lifetime)
            let skew = TimeInterval(context.settings.maxClockSkewSeconds)
            if judgedAt < issuedAt.addingTimeInterval(-skew) {
                return .fire(
                    "the event is dated \(Wording.duration(issuedAt.timeIntervalSince(judgedAt))) before its GATT nonce was issued",
                    action: .contactAdmin, risk: 0.9
                )
            }
        }
        if let usedBy = context.history.nonceUse(userId: event.userId, nonce: proof.nonce), usedBy != event.idempotencyKey {
            return .fire("GATT nonce was already used by another event", action: .contactAdmin, risk: 0.9)
        }
        guard let beaconKey = keyring.key(for: key) else {
            return .fire("beacon \(beacon.canonicalId) has no GATT key", action: .contactAdmin, risk: 0.5)
        }
        if GattProof.isValid(hmac: proof.hmac, nonce: proof.nonce, beaconKey: beaconKey) { return .passed }
        // A rotated key: the beacon signs with the replaced one until an installer writes the new
        // one, and a refused check-in is lost for good. Accepted, with a note, until its grace ends:
        // judged at the event's moment, and the nonce issued before the end (a backdated event cannot
        // stretch the grace by the clock skew allowed).
        if let previous = keyring.previousKey(for: key, at: judgedAt), issuedAt < previous.validUntil,
            GattProof.isValid(hmac: proof.hmac, nonce: proof.nonce, beaconKey: previous.key)
        {
            return .note(
                "GATT proof signed with beacon \(beacon.canonicalId)'s replaced key (version \(previous.version)), accepted until "
                    + "\(WireTimestamp.string(from: previous.validUntil)): write the new key into the beacon")
        }
        return .fire("GATT proof does not match beacon \(beacon.canonicalId)'s key", action: .contactAdmin, risk: 0.95)
    }
}
