import AttendanceProtocol
import Foundation

/// The sessions of one (user, site): its events in event-time order and the sessions derived from
/// them, deterministic and free of I/O. The merger loads one per (user, site) inside its PostgreSQL
/// transaction, applies the batch's events, writes `state` back and publishes the returned changes.
///
/// Every operation re-derives the sessions from all events inside the horizon
/// (`SessionDerivation`) and reports the difference to what was reported before as `SessionDelta`s.
/// So a late or out-of-order event lands where its event time puts it, and corrects every session it
/// touches: it may extend, reopen, split or merge sessions that were already reported, even closed ones.
///
/// **Session ids** are `ses_` + the idempotency key of the session's first check-in: the same events
/// give the same ids whatever order they arrived in, and a session keeps its id while it gains or loses
/// later events. When a late check-in *earlier* than the first one joins a session, or a late event
/// bridges two sessions into one, the later-anchored id is reported `closed` with reason `superseded`
/// (`SessionDelta.supersededBy` names the survivor) and the survivor carries all the events.
///
/// **Horizon**: `compact(now:)` forgets events older than `policy.horizon` (8 days by default) before
/// `now`, or before the latest receipt when the pipeline is behind (`compactionReference(now:)`), but
/// never cuts through a session that can still change; the oldest kept time is the `watermark`.
/// An event older than the watermark is `beyondHorizon`: the merger records it in its events table, no
/// session changes (closed history that old is final).
///
/// **Clock**: the latest `receivedAt` of the applied events and `now` of `closeIdle(now:)`. Only a
/// maximum, so the result does not depend on arrival order; the one exception is a clock more than
/// `clockStepBackTolerance` ahead of `closeIdle`'s `now` (the host's clock was stepped back), which
/// takes that `now`.
package struct SessionTimeline: Sendable {
    package private(set) var policy: SessionPolicy
    /// The persistable state (`Codable`).
    package private(set) var state: TimelineState
    private var derived: SessionDerivation.Result
    /// Each held fact by idempotency key. Its index in `state.facts` is found by binary search: an
    /// index map would need renumbering after every insertion before the end (a late event), O(n) each.
    private var factsByKey: [String: StoredFact]
    /// `state.sessions` lists exactly the records of `derived` (true after every publish), so a diff
    /// may skip the sessions a resumed derivation kept.
    private var baselineInSync = false

    /// An empty timeline.
    package init(userId: String, siteId: String, policy: SessionPolicy = .default) throws(SessionPolicyError) {
        try self.init(restoring: TimelineState(userId: userId, siteId: siteId), policy: policy)
    }

    /// A timeline from its persisted state. With a policy other than the one it was written under,
    /// the next operation (or `reconcile()`) reports the sessions the new thresholds change.
    package init(restoring state: TimelineState, policy: SessionPolicy = .default) throws(SessionPolicyError) {
        self.policy = try policy.validated()
        self.state = state
        self.derived = SessionDerivation.Result(sessions: [], placement: [])
        self.factsByKey = [:]
        rederive()
        rebuildIndex()
    }

    // MARK: Reading

    package var userId: String { state.userId }
    package var siteId: String { state.siteId }
    /// The latest receipt time or `now` seen.
    package var clock: Date? { state.clock?.date }
    /// Events before this time no longer change sessions (`nil` before the first compaction).
    package var watermark: Date? { state.watermark?.date }
    /// Events held (inside the horizon).
    package var eventCount: Int { state.facts.count }

    /// The sessions as of now, oldest first.
    package var sessions: [SessionSnapshot] { derived.sessions.map(snapshot) }

    /// The latest session when it is not closed (open or in soft exit).
    package var currentSession: SessionSnapshot? {
        guard let last = derived.sessions.last, last.status != .closed else { return nil }
        return snapshot(last)
    }

    package func session(id: String) -> SessionSnapshot? {
        derived.sessions.first { sessionId($0) == id }.map(snapshot)
    }

    /// The earliest clock at which time alone (`closeIdle(now:)`) changes the latest session: a pending
    /// check-out passing the noise threshold (soft exit) or the grace (closed), an open session passing
    /// the idle cutoff. `nil` when the latest session is closed or there is none. A scheduler (the
    /// merger's idle sweep) needs to look at this timeline again only from then on.
    package var nextTimeDrivenChange: Date? {
        guard let last = derived.sessions.last, last.status != .closed else { return nil }
        if let c = last.pendingCheckOut {
            if last.status == .open { return (c + Millis(seconds: policy.noiseThreshold)).date }
            return (c + Millis(seconds: policy.softExitGrace) + 1).date
        }
        return (last.lastSeenAt + Millis(seconds: policy.idleCutoff) + 1).date
    }

    /// Where an event (by idempotency key) is now, `nil` when the timeline does not hold it.
    package func placement(ofIdempotencyKey key: String) -> FactPlacement? {
        factsByKey[key].map { placement(at: insertionIndex(of: $0)) }
    }

    // MARK: Changing

    /// Applies one accepted event.
    ///
    /// - A key already held is `.duplicate` and changes nothing (not even the clock).
    /// - An event older than the watermark is `.beyondHorizon` and changes nothing.
    /// - Otherwise the event is inserted by event time, the clock advances to its `receivedAt`, and the
    ///   changes to every affected session are returned (oldest session first).
    package mutating func apply(_ fact: AttendanceFact) throws(SessionTimelineError) -> ApplyOutcome {
        guard fact.userId == userId, fact.siteId == siteId else {
            throw .foreignEvent(
                idempotencyKey: fact.idempotencyKey, userId: fact.userId, siteId: fact.siteId,
                timelineUserId: userId, timelineSiteId: siteId)
        }
        if let held = factsByKey[fact.idempotencyKey] {
            let conflicting = !held.sameContent(as: fact)
            return ApplyOutcome(
                disposition: .duplicate(placement: placement(at: insertionIndex(of: held)), conflicting: conflicting), changes: [])
        }
        let stored = StoredFact(fact)
        if let watermark = state.watermark, stored.time < watermark {
            return ApplyOutcome(disposition: .beyondHorizon(watermark: watermark.date), changes: [])
        }
        let position = insertionIndex(of: stored)
        state.facts.insert(stored, at: position)
        factsByKey[stored.key] = stored
        state.clock = max(state.clock ?? Millis.min, Millis(fact.receivedAt))
        state.received = max(state.received ?? Millis.min, Millis(fact.receivedAt))
        let previous = derived
        let kept = rederive(changedFrom: position)
        let changes = publish(keeping: kept)
        return ApplyOutcome(
            disposition: .applied(placement(at: position)), changes: changes, movedKeys: movedKeys(from: previous, insertedAt: position))
    }

    /// The keys of the facts other than the one inserted at `position` whose session (its anchor) differs
    /// from `previous`, the derivation before the insertion. Facts before the point the derivation
    /// resumed from kept theirs, so only the facts from there on are compared.
    private func movedKeys(from previous: SessionDerivation.Result, insertedAt position: Int) -> [String] {
        let start = SessionDerivation.resumePoint(previous, position).map { previous.sessions[$0].anchor } ?? position
        var moved: [String] = []
        for index in start..<state.facts.count where index != position {
            let before = previous.placement[index < position ? index : index - 1]
            var anchorBefore = before >= 0 ? previous.sessions[before].anchor : -1
            if anchorBefore >= position { anchorBefore += 1 }
            let now = derived.placement[index]
            if anchorBefore != (now >= 0 ? derived.sessions[now].anchor : -1) { moved.append(state.facts[index].key) }
        }
        return moved
    }

    /// Advances the clock to `now` and returns what time alone changed: open sessions idle past the
    /// cutoff close (`presence_timeout`), check-outs older than the noise threshold become soft exits,
    /// soft exits past their grace close (`check_out`). Call it periodically (e.g. once per batch).
    ///
    /// The clock only moves forward, except that a clock more than `clockStepBackTolerance` ahead of
    /// `now` takes `now`: it was set while the host's clock ran ahead and has since been stepped back,
    /// and kept, it would close every check-out at once (past its grace) until the host caught up.
    /// What the early clock closed is settled again (a soft exit, say, that a return then reopens).
    @discardableResult
    package mutating func closeIdle(now: Date) -> [SessionDelta] {
        let millis = Millis(now)
        let current = state.clock ?? Millis.min
        guard millis > current || (state.clock != nil && current - millis > Self.clockStepBackTolerance) else {
            return publish(keeping: derived.sessions.count)
        }
        state.clock = millis
        return publish(keeping: rederive(changedFrom: state.facts.count))
    }

    /// How far ahead of the host's present a timeline's clock may be before `closeIdle(now:)` takes
    /// the present (ms): above the skew between two merger hosts that take a partition from each other.
    package static let clockStepBackTolerance: Int64 = 60_000

    /// Re-derives and reports any difference to what was reported (after a policy change, say).
    package mutating func reconcile() -> [SessionDelta] {
        rederive()
        baselineInSync = false
        return publish(keeping: 0)
    }

    /// Changes the policy and reports the sessions the new thresholds change.
    package mutating func setPolicy(_ policy: SessionPolicy) throws(SessionPolicyError) -> [SessionDelta] {
        self.policy = try policy.validated()
        return reconcile()
    }

    /// What `compact(now:)` dropped.
    package struct Compaction: Hashable, Sendable {
        /// Events forgotten (older than the new watermark).
        package var droppedEvents: Int
        /// Sessions that are final and left the state (the merger's sessions table keeps them).
        package var droppedSessionIds: [String]
        package var watermark: Date?
        /// Changes caused by compaction: always empty (compaction never cuts a session that can change);
        /// reported rather than lost if that ever failed.
        package var changes: [SessionDelta]
    }

    /// Forgets history older than `compactionReference(now:longestWait:) - policy.horizon`, keeping every
    /// session that a new event (at or after the new watermark) could still change: the watermark moves
    /// back to the first check-in of the oldest session that is not closed or whose last event is within
    /// the idle cutoff of it.
    @discardableResult
    package mutating func compact(now: Date, longestWait: TimeInterval = SessionPolicy.longestPipelineWait) -> Compaction {
        let idle = Millis(seconds: policy.idleCutoff)
        let cut = compactionReference(now: now, longestWait: longestWait) - Millis(seconds: policy.horizon)
        let sessions = derived.sessions
        var dropped = 0
        while dropped < sessions.count, sessions[dropped].status == .closed, sessions[dropped].lastActivity + idle < cut {
            dropped += 1
        }
        var watermark = cut
        if dropped < sessions.count { watermark = min(watermark, sessions[dropped].checkInAt) }
        while dropped > 0, sessions[dropped - 1].lastActivity + idle >= watermark {
            dropped -= 1
            watermark = min(watermark, sessions[dropped].checkInAt)
        }
        watermark = max(watermark, state.watermark ?? Millis.min)
        // Nothing to forget (the usual case: a busy timeline whose events are all inside the horizon)
        // and the reported sessions are current: only the watermark moves. The merger compacts every
        // large timeline it writes, so this skips a full re-derivation per timeline and batch.
        if dropped == 0, baselineInSync, (state.facts.first?.time ?? Millis.max) >= watermark,
            !state.retired.contains(where: { $0.anchorTime < watermark })
        {
            state.watermark = watermark
            return Compaction(droppedEvents: 0, droppedSessionIds: [], watermark: watermark.date, changes: [])
        }
        let droppedIds = sessions[..<dropped].map(sessionId)
        let before = state.facts.count
        state.facts.removeAll { $0.time < watermark }
        let droppedIdSet = Set(droppedIds)
        state.sessions.removeAll { droppedIdSet.contains($0.id) }
        state.retired.removeAll { $0.anchorTime < watermark }
        state.watermark = watermark
        rederive()
        rebuildIndex()
        baselineInSync = false
        return Compaction(
            droppedEvents: before - state.facts.count, droppedSessionIds: droppedIds, watermark: state.watermark?.date,
            changes: publish(keeping: 0))
    }

    /// The time the horizon is measured back from: `now`, or this timeline's latest receipt when that is
    /// older, but never more than `longestWait` (`SessionPolicy.longestPipelineWait`) before `now`.
    ///
    /// One user's events reach the merger in the order the gateway took them, so an event still to come
    /// was received after the latest receipt applied here, and its event time is at most the gateway's
    /// event-age limit before its receipt. Measured from `now`, a merger catching up on days of backlog
    /// (after an outage) would forget the history that backlog's late events land in: they would be
    /// recorded but belong to no session. Nothing can be waiting longer than the topics keep a record,
    /// which bounds how long a timeline no longer written keeps its last events.
    func compactionReference(now: Date, longestWait: TimeInterval = SessionPolicy.longestPipelineWait) -> Millis {
        let now = Millis(now)
        let oldest = now - Millis(seconds: max(0, longestWait))
        return max(min(now, state.received ?? now), oldest)
    }

    // MARK: Internals

    private func insertionIndex(of fact: StoredFact) -> Int {
        var low = 0, high = state.facts.count
        while low < high {
            let mid = (low + high) / 2
            if AttendanceFact.precedes(state.facts[mid], fact) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Re-derives everything, or (with `changedFrom`) resumes the sweep before that fact index.
    /// Returns how many leading sessions were kept unchanged.
    @discardableResult
    private mutating func rederive(changedFrom: Int? = nil) -> Int {
        guard let changedFrom else {
            derived = SessionDerivation.derive(state.facts, clock: state.clock, policy: policy)
            return 0
        }
        let kept = SessionDerivation.resumePoint(derived, changedFrom) ?? 0
        derived = SessionDerivation.derive(
            state.facts, clock: state.clock, policy: policy, reusing: derived, changedFrom: changedFrom)
        return kept
    }

    private mutating func rebuildIndex() {
        var index: [String: StoredFact] = [:]
        index.reserveCapacity(state.facts.count)
        for fact in state.facts { index[fact.key] = fact }
        factsByKey = index
    }

    private func placement(at index: Int) -> FactPlacement {
        let session = derived.placement[index]
        if session >= 0 { return .session(sessionId(derived.sessions[session])) }
        return state.facts[index].kind == .checkOut ? .orphanCheckOut : .orphanHeartbeat
    }

    private func sessionId(_ s: SessionDerivation.Session) -> String {
        SessionSnapshot.id(anchorIdempotencyKey: state.facts[s.anchor].key)
    }

    private func snapshot(_ s: SessionDerivation.Session) -> SessionSnapshot {
        SessionSnapshot(
            id: sessionId(s), userId: userId, siteId: siteId, status: s.status, checkInAt: s.checkInAt.date,
            lastSeenAt: s.lastSeenAt.date, checkOutAt: s.checkOutAt?.date, closeReason: s.closeReason,
            sessionKeys: s.keys, eventIds: s.factIndices.map { state.facts[$0].key }, reopenCount: s.reopenCount)
    }

    private func record(_ s: SessionDerivation.Session, version: Int64) -> SessionRecord {
        let ids = s.factIndices.map { state.facts[$0].key }
        return SessionRecord(
            id: sessionId(s), version: version, anchorKey: state.facts[s.anchor].key, status: s.status,
            checkInAt: s.checkInAt, lastSeenAt: s.lastSeenAt, checkOutAt: s.checkOutAt,
            closeReason: s.closeReason?.rawValue, reopenCount: s.reopenCount, keys: s.keys,
            eventCount: ids.count, eventDigest: SessionRecord.digest(ids))
    }

    private static func change(from old: SessionStatus, to new: SessionStatus) -> SessionChangeKind {
        switch new {
        case .open: return old == .open ? .extended : .reopened
        case .softExit: return .softExit
        case .closed: return .closed
        }
    }

    /// Diffs the derived sessions against the reported ones, updates the baseline, returns the changes.
    /// The first `kept` sessions are known unchanged when the baseline is in sync.
    private mutating func publish(keeping kept: Int) -> [SessionDelta] {
        let kept = baselineInSync ? min(kept, derived.sessions.count, state.sessions.count) : 0
        let previousTail = state.sessions[kept...]
        var previous: [String: SessionRecord] = [:]
        for record in previousTail { previous[record.id] = record }
        var retired: [String: RetiredSession] = [:]
        var retiredChanged = false
        for entry in state.retired { retired[entry.id] = entry }

        var records = Array(state.sessions[..<kept])
        var changes: [SessionDelta] = []
        var live = Set<String>()
        for s in derived.sessions[kept...] {
            var rec = record(s, version: 0)
            live.insert(rec.id)
            if let old = previous[rec.id] {
                rec.version = old.version
                if !old.sameContent(as: rec) {
                    rec.version += 1
                    changes.append(
                        SessionDelta(change: Self.change(from: old.status, to: rec.status), session: snapshot(s), version: rec.version))
                }
            } else {
                let snap = snapshot(s)
                let returning = retired.removeValue(forKey: rec.id)
                if returning != nil { retiredChanged = true }
                var version = (returning?.version ?? 0) + 1
                var opened = snap
                opened.status = .open
                opened.checkOutAt = nil
                opened.closeReason = nil
                changes.append(SessionDelta(change: .opened, session: opened, version: version))
                if snap.status != .open {
                    version += 1
                    changes.append(SessionDelta(change: Self.change(from: .open, to: snap.status), session: snap, version: version))
                }
                rec.version = version
            }
            records.append(rec)
        }
        for old in previousTail where !live.contains(old.id) {
            let version = old.version + 1
            let gone = SessionSnapshot(
                id: old.id, userId: userId, siteId: siteId, status: .closed, checkInAt: old.checkInAt.date,
                lastSeenAt: old.lastSeenAt.date, checkOutAt: old.checkOutAt?.date, closeReason: .superseded,
                sessionKeys: old.keys, eventIds: [], reopenCount: old.reopenCount)
            changes.append(
                SessionDelta(
                    change: .closed, session: gone, version: version,
                    supersededBy: placement(ofIdempotencyKey: old.anchorKey)?.sessionId))
            retired[old.id] = RetiredSession(id: old.id, version: version, anchorTime: old.checkInAt)
            retiredChanged = true
        }
        state.sessions = records
        if retiredChanged { state.retired = retired.values.sorted { $0.id < $1.id } }
        baselineInSync = true
        return changes.sorted {
            ($0.session.checkInAt, $0.session.id, $0.version) < ($1.session.checkInAt, $1.session.id, $1.version)
        }
    }
}

/// A timeline was asked to do something that is not its business.
package enum SessionTimelineError: Error, Hashable, Sendable {
    /// The event belongs to another (user, site): route events by both before applying.
    case foreignEvent(idempotencyKey: String, userId: String, siteId: String, timelineUserId: String, timelineSiteId: String)
}
