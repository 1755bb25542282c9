import AttendanceProtocol
import Foundation

/// Sessions as a pure function of (ordered events, clock, policy).
///
/// One sweep over the events in event-time order (`AttendanceFact.precedes`). The latest session is
/// the *current* one; each event either joins it, ends it, opens a new one (check-ins only) or is an
/// orphan. With `t` the event's time, `s` the current session, `c` its pending check-out:
///
/// | current session | check-in / heartbeat at `t` | check-out at `t` |
/// |---|---|---|
/// | none | check-in opens; heartbeat is an orphan | orphan |
/// | open | joins if `t - lastSeen <= idleCutoff` (or key link); else `s` closes `presence_timeout` and a check-in opens a new one, a heartbeat is an orphan | stale key → orphan; else pending check-out `c = t` (within the idle cutoff or key link), else `s` closes `presence_timeout`, orphan |
/// | pending check-out `c` | `t - c < noise`: the check-out was noise, forgotten; `t - c <= grace`, key link, or a check-in within the merge window of `s`'s last event: reopened; else `s` closes `check_out` at `c` and a check-in opens a new one, a heartbeat is an orphan | stale key → orphan; within grace or key link: the later check-out wins (`c = t`); else `s` closes `check_out`, orphan |
/// | closed | key link, or a check-in within the merge window of `s`'s last event: reopened; else a check-in opens, a heartbeat is an orphan | key link: `s` gets this later check-out; else orphan |
///
/// *Key link*: the event carries a `sessionKey` that `s` already has and is within the idle cutoff of
/// `s`'s last event: the device says it is the same session, so the soft-exit grace and merge window do
/// not split it (events of one session share a key). Keys never split sessions: different
/// keys in the merge window or while a session is open are one session (two devices, an app restart).
/// *Stale key*: a check-out whose key belongs only to an earlier session (a later one has started
/// since), within the idle cutoff of that session's last event, does not end the current session.
///
/// The *clock* (the latest receipt time or `now` the timeline has seen) settles the last session:
/// a pending check-out younger than the noise threshold leaves it `open`; within the grace it is
/// `soft_exit`; after the grace `closed` (`check_out`). An open session whose last presence is older
/// than the idle cutoff is `closed` (`presence_timeout`). Because the clock is a maximum, the result
/// does not depend on the order events arrived in.
enum SessionDerivation {
    struct Session: Hashable, Sendable {
        var anchor: Int
        var factIndices: [Int]
        var status: SessionStatus
        var checkInAt: Millis
        var lastSeenAt: Millis
        var lastActivity: Millis
        var pendingCheckOut: Millis?
        var checkOutAt: Millis?
        var closeReason: SessionCloseReason?
        var keys: [String]
        var reopenCount: Int

        init(anchor: Int, fact: StoredFact) {
            self.anchor = anchor
            self.factIndices = [anchor]
            self.status = .open
            self.checkInAt = fact.time
            self.lastSeenAt = fact.time
            self.lastActivity = fact.time
            self.pendingCheckOut = nil
            self.checkOutAt = nil
            self.closeReason = nil
            self.keys = fact.sessionKey.map { [$0] } ?? []
            self.reopenCount = 0
        }

        mutating func add(_ index: Int, _ fact: StoredFact) {
            factIndices.append(index)
            lastActivity = max(lastActivity, fact.time)
            if fact.kind.isPresence { lastSeenAt = max(lastSeenAt, fact.time) }
            if let key = fact.sessionKey, !keys.contains(key) { keys.append(key) }
        }

        mutating func close(_ reason: SessionCloseReason) {
            status = .closed
            closeReason = reason
            checkOutAt = reason == .checkOut ? pendingCheckOut : nil
        }

        mutating func reopen() {
            status = .open
            closeReason = nil
            checkOutAt = nil
            pendingCheckOut = nil
            reopenCount += 1
        }
    }

    struct Result: Hashable, Sendable {
        var sessions: [Session]
        /// Per fact: the index of its session in `sessions`, or -1 for an orphan.
        var placement: [Int]
    }

    /// Derives the sessions of `facts` (in `AttendanceFact.precedes` order).
    ///
    /// The sweep is causal: what it decides at an event depends only on the events before it. So when
    /// `previous` was derived from the same events except from index `changedFrom` on (an insertion
    /// there, or only the clock changed with `changedFrom == facts.count`), the sweep resumes at the
    /// first check-in of the session that was current at that index and keeps everything before it:
    /// applying an event costs the current session plus the events after it, not the whole horizon.
    static func derive(
        _ facts: [StoredFact], clock: Millis?, policy: SessionPolicy, reusing previous: Result? = nil, changedFrom: Int = 0
    ) -> Result {
        let merge = Millis(seconds: policy.mergeWindow)
        let grace = Millis(seconds: policy.softExitGrace)
        let noise = Millis(seconds: policy.noiseThreshold)
        let idle = Millis(seconds: policy.idleCutoff)

        var sessions: [Session] = []
        var placement = [Int](repeating: -1, count: facts.count)
        // Keys of sessions that ended before the current one, with that session's last event time.
        var earlierKeys: [String: Millis] = [:]
        var start = 0

        if let previous, changedFrom > 0 {
            if let resume = resumePoint(previous, changedFrom) {
                sessions = Array(previous.sessions[..<resume])
                for session in sessions {
                    for key in session.keys { earlierKeys[key] = session.lastActivity }
                }
                start = previous.sessions[resume].anchor
            } else {
                // No session began before the change: everything before it is an orphan, and the sweep
                // reaches `changedFrom` with no session, exactly the state it starts in. (Without this,
                // a timeline of orphan heartbeats re-swept all of them on every event.)
                start = changedFrom
            }
            placement.replaceSubrange(0..<start, with: previous.placement[..<start])
        }

        func open(_ index: Int) {
            if let previous = sessions.last {
                for key in previous.keys { earlierKeys[key] = previous.lastActivity }
            }
            sessions.append(Session(anchor: index, fact: facts[index]))
            placement[index] = sessions.count - 1
        }

        for i in start..<facts.count {
            let f = facts[i]
            let t = f.time
            guard var s = sessions.last else {
                if f.kind == .checkIn { open(i) }
                continue
            }
            let current = sessions.count - 1
            let keyLink = f.sessionKey.map { s.keys.contains($0) } == true && t - s.lastActivity <= idle
            let staleKey =
                f.sessionKey.map { key in
                    !s.keys.contains(key) && earlierKeys[key].map { t - $0 <= idle } == true
                } == true
            let inMergeWindow = f.kind == .checkIn && t - s.lastActivity <= merge
            var joins = false
            var opensNew = false

            if s.status == .closed {
                switch f.kind {
                case .checkIn, .heartbeat:
                    if keyLink || inMergeWindow {
                        s.reopen()
                        joins = true
                    } else {
                        opensNew = f.kind == .checkIn
                    }
                case .checkOut:
                    if keyLink {
                        s.status = .open
                        s.closeReason = nil
                        s.checkOutAt = nil
                        s.pendingCheckOut = t
                        joins = true
                    }
                }
            } else if let c = s.pendingCheckOut {
                switch f.kind {
                case .checkIn, .heartbeat:
                    if t - c < noise {
                        s.pendingCheckOut = nil // noise: the check-out never happened
                        joins = true
                    } else if t - c <= grace || keyLink || inMergeWindow {
                        s.reopen()
                        joins = true
                    } else {
                        s.close(.checkOut)
                        opensNew = f.kind == .checkIn
                    }
                case .checkOut:
                    if staleKey {
                        break
                    } else if t - c <= grace || keyLink {
                        s.pendingCheckOut = t
                        joins = true
                    } else {
                        s.close(.checkOut)
                    }
                }
            } else {
                let withinIdle = t - s.lastSeenAt <= idle || keyLink
                switch f.kind {
                case .checkIn, .heartbeat:
                    if withinIdle {
                        joins = true
                    } else {
                        s.close(.presenceTimeout)
                        opensNew = f.kind == .checkIn
                    }
                case .checkOut:
                    if staleKey {
                        break
                    } else if withinIdle {
                        s.pendingCheckOut = t
                        joins = true
                    } else {
                        s.close(.presenceTimeout)
                    }
                }
            }
            if joins {
                s.add(i, f)
                placement[i] = current
            }
            sessions[current] = s
            if opensNew { open(i) }
        }

        // The clock settles the last session.
        if var last = sessions.last, last.status != .closed {
            let now = clock ?? Millis.min
            if let c = last.pendingCheckOut {
                if now - c < noise {
                    last.status = .open
                } else if now - c <= grace {
                    last.status = .softExit
                    last.checkOutAt = c
                } else {
                    last.close(.checkOut)
                }
            } else if now - last.lastSeenAt > idle {
                last.close(.presenceTimeout)
            }
            sessions[sessions.count - 1] = last
        }
        return Result(sessions: sessions, placement: placement)
    }

    /// The index of the last session whose first check-in is before `index`, if any.
    static func resumePoint(_ result: Result, _ index: Int) -> Int? {
        var low = 0, high = result.sessions.count
        while low < high {
            let mid = (low + high) / 2
            if result.sessions[mid].anchor < index { low = mid + 1 } else { high = mid }
        }
        return low > 0 ? low - 1 : nil
    }
}
