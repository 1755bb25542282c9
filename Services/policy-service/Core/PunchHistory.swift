import AttendanceProtocol
import Foundation
import Synchronization

/// An accepted punch (check-in or check-out), as the history keeps it.
package struct PunchRecord: Hashable, Sendable {
    package var idempotencyKey: String
    package var userId: String
    package var deviceId: String
    package var siteId: String?
    /// The gate of the event's beacon, when the event names a registered beacon.
    package var gateId: String?
    package var type: AttendanceEventType
    /// Event time (the device's), not receipt time: offline events land where they happened.
    package var time: Date

    package init(
        idempotencyKey: String, userId: String, deviceId: String, siteId: String?, gateId: String?, type: AttendanceEventType, time: Date
    ) {
        (self.idempotencyKey, self.userId, self.deviceId) = (idempotencyKey, userId, deviceId)
        (self.siteId, self.gateId, self.type, self.time) = (siteId, gateId, type, time)
    }
}

extension PunchRecord {
    /// The punch an event makes, its gate resolved through the registry. Its site is the event's, else
    /// (a check-out contract names none) the site of the user's latest punch in `history`: the site
    /// whose policy decided it (`SitePolicies.policy(for:history:)`), where it ends the stay.
    package init(event: RawEventEnvelope, registry: any RegistryView, history: (any PunchHistory)? = nil) {
        var gateId: String?
        if let beacon = event.attendanceEvent?.beacon {
            gateId = registry.beacon(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor)?.gateId
        }
        self.init(
            idempotencyKey: event.idempotencyKey, userId: event.userId, deviceId: event.deviceId,
            siteId: event.policySiteId ?? history?.lastPunch(userId: event.userId)?.siteId, gateId: gateId,
            type: event.payload.eventType, time: event.payload.eventTime
        )
    }

    /// Where the rate limit counts punches: the gate, else `site:<siteId>` for punches without a
    /// known gate (the check-in contract has no beacon), else `nil` (nothing to count by).
    package var punchPoint: String? {
        if let gateId { return gateId }
        if let siteId { return "site:" + siteId }
        return nil
    }
}

/// Per-user recent-punch history as the rules see it. Only accepted punches are in it.
package protocol PunchHistory: Sendable {
    /// The latest (by event time) accepted punch of the user at a punch point (`PunchRecord.punchPoint`).
    func lastPunch(userId: String, punchPoint: String) -> PunchRecord?
    /// The latest (by event time) accepted punch of the user anywhere.
    func lastPunch(userId: String) -> PunchRecord?
    /// Whether an accepted punch of the user had this idempotency key (a replay is not a new punch).
    func hasAccepted(idempotencyKey: String, userId: String) -> Bool
    /// The devices the user punched from within `window` seconds of `time` (either side).
    func devicesSeen(userId: String, around time: Date, within window: TimeInterval) -> Set<String>
    /// The idempotency key of the event that already presented this GATT nonce, or `nil`.
    func nonceUse(userId: String, nonce: String) -> String?
}

extension PunchHistory {
    /// Histories that keep no nonces (older conformers) report none used.
    package func nonceUse(userId: String, nonce: String) -> String? { nil }
}

/// The in-memory `PunchHistory` the service feeds from its own decisions.
///
/// A reference type behind a mutex: the consumer records accepts while decisions read, and a
/// record never copies the tables. Memory is bounded per user (`keysPerUser` idempotency keys,
/// one record per punch point, the latest `keysPerUser` punch times per device); `prune(before:)` drops
/// users idle since a cutoff.
package final class PolicyHistory: PunchHistory {
    struct UserState: Sendable {
        var last: PunchRecord?
        var byPoint: [String: PunchRecord] = [:]
        /// Recent accepted keys, oldest first (a small ring: linear search is fastest at this size).
        var keys: [String] = []
        /// Each device's accepted punch times, ascending, the latest `keysPerUser` of them: a late punch
        /// is judged against the punches around its own time, not only against each device's latest.
        var devicePunches: [String: [Date]] = [:]
        var latestActivity: Date = .distantPast
        /// GATT nonces already presented, with the event that presented them, oldest first.
        /// Bounded like `keys`: nonces live a minute, so only a flood could push one out early.
        var nonces: [(nonce: String, key: String)] = []
    }

    package let keysPerUser: Int
    private let state = Mutex<[String: UserState]>([:])

    package init(keysPerUser: Int = 64) {
        precondition(keysPerUser > 0, "keysPerUser must be positive")
        self.keysPerUser = keysPerUser
    }

    // MARK: Recording

    /// Records the punch of an accepted event and returns it; returns `nil` (and records nothing) for a
    /// rejection or a heartbeat. Recording the same idempotency key twice is harmless.
    @discardableResult
    package func record(_ decision: PolicyDecision, for event: RawEventEnvelope, registry: any RegistryView) -> PunchRecord? {
        // A verified nonce is spent whatever the verdict: a refused punch must not free it for reuse.
        if let gatt = event.attendanceEvent?.gatt,
            decision.ruleResults.contains(where: { $0.ruleId == .gattChallenge && !$0.fired })
        {
            recordNonce(gatt.nonce, userId: event.userId, idempotencyKey: event.idempotencyKey)
        }
        guard decision.outcome == .accept, event.isPunch else { return nil }
        let punch = PunchRecord(event: event, registry: registry, history: self)
        record(punch)
        return punch
    }

    /// Records an accepted punch (for warming up from stored events too).
    package func record(_ punch: PunchRecord) {
        let keysPerUser = self.keysPerUser
        state.withLock { users in
            // In place through the dictionary's modify accessor: no copy of the user's tables.
            Self.add(punch, to: &users[punch.userId, default: UserState()], keysPerUser: keysPerUser)
        }
    }

    private static func add(_ punch: PunchRecord, to user: inout UserState, keysPerUser: Int) {
        if !user.keys.contains(punch.idempotencyKey) {
            if user.keys.count >= keysPerUser { user.keys.removeFirst(user.keys.count - keysPerUser + 1) }
            user.keys.append(punch.idempotencyKey)
        }
        if user.last.map({ punch.time >= $0.time }) ?? true { user.last = punch }
        if let point = punch.punchPoint, user.byPoint[point].map({ punch.time >= $0.time }) ?? true {
            user.byPoint[point] = punch
        }
        Self.insert(punch.time, into: &user.devicePunches[punch.deviceId, default: []], limit: keysPerUser)
        user.latestActivity = max(user.latestActivity, punch.time)
    }

    /// Inserts `time` into the ascending `times` once, keeping the latest `limit`.
    private static func insert(_ time: Date, into times: inout [Date], limit: Int) {
        // Linear: at most `limit` (64 by default) times, and punches arrive mostly in order.
        let index = times.lastIndex { $0 < time }.map { $0 + 1 } ?? 0
        guard index == times.count || times[index] != time else { return }
        times.insert(time, at: index)
        if times.count > limit { times.removeFirst(times.count - limit) }
    }

    /// Marks a GATT nonce as presented by the event with `idempotencyKey`.
    package func recordNonce(_ nonce: String, userId: String, idempotencyKey: String) {
        let limit = keysPerUser
        state.withLock { users in
            Self.addNonce(nonce, key: idempotencyKey, to: &users[userId, default: UserState()], limit: limit)
        }
    }

    private static func addNonce(_ nonce: String, key: String, to user: inout UserState, limit: Int) {
        guard !user.nonces.contains(where: { $0.nonce == nonce }) else { return }
        if user.nonces.count >= limit { user.nonces.removeFirst(user.nonces.count - limit + 1) }
        user.nonces.append((nonce, key))
    }

    /// Forgets users whose latest punch is before `cutoff`, and devices last seen before it.
    package func prune(before cutoff: Date) {
        state.withLock { users in
            users = users.filter { $0.value.latestActivity >= cutoff }
            for (id, var user) in users where user.devicePunches.values.contains(where: { ($0.first ?? cutoff) < cutoff }) {
                user.devicePunches = user.devicePunches.compactMapValues { times in
                    let kept = times.drop { $0 < cutoff }
                    return kept.isEmpty ? nil : Array(kept)
                }
                users[id] = user
            }
        }
    }

    package var userCount: Int { state.withLock { $0.count } }

    // MARK: PunchHistory

    package func lastPunch(userId: String, punchPoint: String) -> PunchRecord? {
        state.withLock { $0[userId]?.byPoint[punchPoint] }
    }

    package func lastPunch(userId: String) -> PunchRecord? {
        state.withLock { $0[userId]?.last }
    }

    package func hasAccepted(idempotencyKey: String, userId: String) -> Bool {
        state.withLock { $0[userId]?.keys.contains(idempotencyKey) ?? false }
    }

    package func nonceUse(userId: String, nonce: String) -> String? {
        state.withLock { $0[userId]?.nonces.first(where: { $0.nonce == nonce })?.key }
    }

    package func devicesSeen(userId: String, around time: Date, within window: TimeInterval) -> Set<String> {
        state.withLock { users in
            guard let punches = users[userId]?.devicePunches else { return [] }
            var devices = Set<String>()
            for (device, times) in punches where times.contains(where: { abs($0.timeIntervalSince(time)) <= window }) {
                devices.insert(device)
            }
            return devices
        }
    }
}
