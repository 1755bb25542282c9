import AttendanceProtocol
import Foundation
import SessionMergerCore
import Testing

import struct PresenceKit.SplitMix64

/// 2025-09-18T00:00:00Z, a Thursday.
let day0 = WireTimestamp.date(from: "2025-09-18T00:00:00Z")!

/// `day0` + days, hours, minutes, seconds (UTC).
func at(_ hour: Int, _ minute: Int = 0, _ second: Int = 0, day: Int = 0) -> Date {
    day0.addingTimeInterval(TimeInterval(((day * 24 + hour) * 60 + minute) * 60 + second))
}

func utc(_ text: String) -> Date { WireTimestamp.date(from: text)! }

let userId = "u_1"
let siteId = "S_HQ"

/// One event of the default user at the default site; received when it happened unless told.
func fact(
    _ key: String, _ kind: AttendanceFact.Kind, _ time: Date, key sessionKey: String? = nil, received: Date? = nil,
    user: String = userId, site: String = siteId
) -> AttendanceFact {
    AttendanceFact(
        idempotencyKey: key, userId: user, siteId: site, kind: kind, eventTime: time, sessionKey: sessionKey,
        gateId: nil, receivedAt: received ?? time)
}

func checkIn(_ key: String, _ time: Date, key sessionKey: String? = nil, received: Date? = nil) -> AttendanceFact {
    fact(key, .checkIn, time, key: sessionKey, received: received)
}

func checkOut(_ key: String, _ time: Date, key sessionKey: String? = nil, received: Date? = nil) -> AttendanceFact {
    fact(key, .checkOut, time, key: sessionKey, received: received)
}

func heartbeat(_ key: String, _ time: Date, key sessionKey: String? = nil, received: Date? = nil) -> AttendanceFact {
    fact(key, .heartbeat, time, key: sessionKey, received: received)
}

func newTimeline(_ policy: SessionPolicy = .default) throws -> SessionTimeline {
    try SessionTimeline(userId: userId, siteId: siteId, policy: policy)
}

extension SessionTimeline {
    /// Applies every fact in order; returns the outcomes.
    @discardableResult
    mutating func applyAll(_ facts: [AttendanceFact]) throws -> [ApplyOutcome] {
        var outcomes: [ApplyOutcome] = []
        for fact in facts { outcomes.append(try apply(fact)) }
        return outcomes
    }
}

extension Array where Element == SessionDelta {
    var kinds: [SessionChangeKind] { map(\.change) }
    var ids: [String] { map(\.session.id) }
}

func sid(_ anchorKey: String) -> String { SessionSnapshot.id(anchorIdempotencyKey: anchorKey) }

/// What a consumer of `attendance.sessions` ends up with after applying `deltas` in order: the highest
/// version of each session id, superseded ones dropped.
func fold(_ deltas: [SessionDelta]) -> [SessionSnapshot] {
    var latest: [String: SessionDelta] = [:]
    for delta in deltas where (latest[delta.session.id]?.version ?? 0) < delta.version {
        latest[delta.session.id] = delta
    }
    return latest.values
        .filter { $0.session.closeReason != .superseded }
        .map(\.session)
        .sorted { ($0.checkInAt, $0.id) < ($1.checkInAt, $1.id) }
}
