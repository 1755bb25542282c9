import AttendanceProtocol
import Foundation

/// Where a session stands: `open` (present; a check-out younger than the noise threshold still
/// counts as present), `softExit` (checked out; presence within the soft-exit grace reopens it) or
/// `closed` (final unless a late event changes history). The protocol's wire enum.
package typealias SessionStatus = SessionState

/// A session as derived from a timeline's events.
package struct SessionSnapshot: Codable, Hashable, Sendable {
    /// `ses_` + the idempotency key of the session's first check-in (its anchor): deterministic, so a
    /// replay or a different arrival order of the same events gives the same id.
    package var id: String
    package var userId: String
    package var siteId: String
    package var status: SessionStatus
    /// The first check-in's event time.
    package var checkInAt: Date
    /// The latest presence (check-in or heartbeat) event time.
    package var lastSeenAt: Date
    /// The check-out that ended presence, when the session is in soft exit or closed by it.
    package var checkOutAt: Date?
    /// Why it closed, when `status == .closed`.
    package var closeReason: SessionCloseReason?
    /// The device session keys of its events, in order of first appearance.
    package var sessionKeys: [String]
    /// The idempotency keys of its events, in event-time order.
    package var eventIds: [String]
    /// How many soft exits were followed by presence within the grace (each one a `reopened`).
    package var reopenCount: Int

    /// The session id for an anchor (first check-in) idempotency key.
    package static func id(anchorIdempotencyKey key: String) -> String { "ses_" + key }

    /// When presence ended: the check-out, else the last presence; `nil` while open.
    package var endedAt: Date? {
        status == .open ? nil : (checkOutAt ?? lastSeenAt)
    }

    /// The device's session key the session was opened with (the anchor's), else its first one.
    package var primarySessionKey: String? { sessionKeys.first }
}

extension SessionCloseReason {
    /// The session no longer exists as such: a late event merged it into another session (or an
    /// earlier check-in re-anchored it). Its events now belong to `SessionDelta.supersededBy`.
    /// Consumers drop it; it is not a check-out.
    package static var superseded: SessionCloseReason { .unrecognized("superseded") }
}

/// One change to one session, as the merger stores and publishes it.
package struct SessionDelta: Codable, Hashable, Sendable {
    package var change: SessionChangeKind
    /// The session after the change (for a superseded session: its last state, without events).
    package var session: SessionSnapshot
    /// Grows by one with every change of this session id.
    package var version: Int64
    /// For a superseded session: the id of the session its events now belong to.
    package var supersededBy: String?

    /// The `attendance.sessions` message for this change.
    package func sessionChange(changedAt: Date) -> SessionChange {
        SessionChange(
            sessionId: session.id, userId: session.userId, siteId: session.siteId,
            sessionKey: session.primarySessionKey, change: change, checkInAt: session.checkInAt,
            checkOutAt: session.checkOutAt, lastSeenAt: session.lastSeenAt, closeReason: session.closeReason,
            eventIds: Array(session.eventIds.suffix(SessionChange.maxEventIds)), eventCount: session.eventIds.count,
            version: version, changedAt: changedAt)
    }
}

/// Where an applied event ended up.
package enum FactPlacement: Hashable, Sendable {
    /// Part of this session.
    case session(String)
    /// A check-out with no session to end (none open, its grace long over, or its key belongs to an
    /// earlier session). Recorded; a late check-in may still adopt it.
    case orphanCheckOut
    /// A heartbeat with no session to extend (its check-in has not arrived, or it came after the
    /// session ended). Recorded; a late check-in may still adopt it.
    case orphanHeartbeat

    package var sessionId: String? {
        if case .session(let id) = self { return id }
        return nil
    }
}

/// The result of applying one event to a timeline.
package struct ApplyOutcome: Hashable, Sendable {
    package enum Disposition: Hashable, Sendable {
        /// New: recorded and placed.
        case applied(FactPlacement)
        /// Already seen (same idempotency key): nothing changed. `placement` is where the first copy
        /// is now; `conflicting` when the content differs (kind, event time or session key).
        case duplicate(placement: FactPlacement?, conflicting: Bool)
        /// Its event time is before the timeline's horizon watermark: history there is final. The
        /// merger records the event; no session changes.
        case beyondHorizon(watermark: Date)
    }

    package var disposition: Disposition
    /// Every session change the event caused, including corrections of earlier sessions.
    package var changes: [SessionDelta]
    /// The idempotency keys of the other events this one moved to another session, or out of one (a late
    /// event that splits a session, bridges two, or gives orphans a session): where each is now is
    /// `SessionTimeline.placement(ofIdempotencyKey:)`.
    package var movedKeys: [String] = []

    /// The session the event is in now, if any (the verdict's `sessionId`).
    package var sessionId: String? {
        switch disposition {
        case .applied(let placement): return placement.sessionId
        case .duplicate(let placement, _): return placement?.sessionId
        case .beyondHorizon: return nil
        }
    }

    package var isDuplicate: Bool {
        if case .duplicate = disposition { return true }
        return false
    }

    package var isOrphanCheckOut: Bool {
        disposition == .applied(.orphanCheckOut)
    }
}
