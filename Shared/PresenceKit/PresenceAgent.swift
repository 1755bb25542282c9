/// Runs a `PresenceStateMachine` for a host that does not want to manage timers itself — the fleet
/// simulator, scenario tests, a trace replayer.
///
/// The machine records the deadline of every timer it schedules; the agent fires them (in deadline
/// order, each at its own deadline time, or at the wake-up time when it is more than
/// `lateTimerToleranceMs` overdue) before delivering a later event, and filters the
/// `scheduleTimer` / `cancelTimer` effects out of what it returns. Everything else (posts, snapshots,
/// notifications, scanning, logs) is returned in order for the host to act on — typically
/// `outbox.store(effects)` then send. The `storingIn:` forms do the storing themselves and keep the
/// machine as it was when the outbox cannot store (a full disk): no decision is ever in the machine
/// without its post on disk, and the same event (or the timer, still due) decides again later.
public struct PresenceAgent: Sendable {
    public private(set) var machine: PresenceStateMachine

    public init(machine: PresenceStateMachine) {
        self.machine = machine
    }

    /// The earliest pending timer deadline: the host should call `advance(to:)` no later than this.
    public var nextDeadline: Timestamp? {
        var best: Timestamp?
        for id in TimerID.allCases {
            if let d = machine.deadline(of: id), best.map({ d < $0 }) ?? true { best = d }
        }
        return best
    }

    /// Fires every timer due at or before `now`, then delivers `event` at `now`.
    public mutating func handle(_ event: PresenceEvent, at now: Timestamp) -> [PresenceEffect] {
        var out = advance(to: now)
        out.append(contentsOf: Self.hostEffects(machine.handle(event, at: now)))
        return out
    }

    /// `handle(_:at:)`, its durable effects stored in `outbox` (`Outbox.store`) before the machine moves
    /// on. When the outbox throws, the machine is as it was before the call and the error is rethrown.
    public mutating func handle(_ event: PresenceEvent, at now: Timestamp, storingIn outbox: Outbox) throws(OutboxError) -> [PresenceEffect]
    {
        try committing(to: outbox) { $0.handle(event, at: now) }
    }

    /// `advance(to:)`, stored in `outbox` as `handle(_:at:storingIn:)` does.
    public mutating func advance(to now: Timestamp, storingIn outbox: Outbox) throws(OutboxError) -> [PresenceEffect] {
        try committing(to: outbox) { $0.advance(to: now) }
    }

    /// `replace(directory:at:)`, stored in `outbox` as `handle(_:at:storingIn:)` does.
    public mutating func replace(
        directory: SiteDirectory, at now: Timestamp, storingIn outbox: Outbox
    ) throws(OutboxError) -> [PresenceEffect] {
        try committing(to: outbox) { $0.replace(directory: directory, at: now) }
    }

    /// Runs `step` on a copy, stores its effects, and only then takes the copy's machine.
    private mutating func committing(
        to outbox: Outbox, _ step: (inout PresenceAgent) -> [PresenceEffect]
    ) throws(OutboxError) -> [PresenceEffect] {
        var next = self
        let effects = step(&next)
        try outbox.store(effects)
        self = next
        return effects
    }

    /// How overdue a timer may be and still fire at its own deadline. One later than that was due while
    /// the host could not run it (the app suspended, the phone asleep): it fires at `now`, once, so a
    /// suspension is not replayed as silence (a person at their desk checked out before the reading
    /// that woke the app is delivered) nor as a burst of heartbeats. What the machine stamps from its
    /// last presence (a check-out's time) is unaffected.
    public static let lateTimerToleranceMs: Int64 = 10_000

    /// Fires every timer due at or before `now`, each at its deadline (at `now` when it is more than
    /// `lateTimerToleranceMs` overdue).
    public mutating func advance(to now: Timestamp) -> [PresenceEffect] {
        var out: [PresenceEffect] = []
        // Time never runs backwards for the machine: once a late timer fired at `now`, a timer due
        // just before it (within the tolerance) fires at `now` too.
        var firedAt: Timestamp?
        // A timer handler may schedule another timer that is also due; the bound only guards against
        // a (buggy) zero-delay loop.
        for _ in 0..<10_000 {
            var due: (TimerID, Timestamp)?
            for id in TimerID.allCases {
                if let d = machine.deadline(of: id), d <= now, due.map({ d < $0.1 }) ?? true { due = (id, d) }
            }
            guard let (id, deadline) = due else { break }
            var at = now - deadline > Self.lateTimerToleranceMs ? now : deadline
            if let firedAt, at < firedAt { at = firedAt }
            firedAt = at
            out.append(contentsOf: Self.hostEffects(machine.handle(.timerFired(id), at: at)))
        }
        return out
    }

    /// Replaces the configuration (see `PresenceStateMachine.apply(config:at:)`).
    public mutating func apply(config: PresenceConfig, at now: Timestamp) throws(ConfigValidationError) -> [PresenceEffect] {
        Self.hostEffects(try machine.apply(config: config, at: now))
    }

    /// Puts a new site directory in force (see `PresenceStateMachine.replace(directory:at:)`).
    public mutating func replace(directory: SiteDirectory, at now: Timestamp) -> [PresenceEffect] {
        Self.hostEffects(machine.replace(directory: directory, at: now))
    }

    static func hostEffects(_ effects: [PresenceEffect]) -> [PresenceEffect] {
        guard
            effects.contains(where: {
                if case .scheduleTimer = $0 { return true }; if case .cancelTimer = $0 { return true }; return false
            })
        else {
            return effects
        }
        return effects.filter {
            switch $0 {
            case .scheduleTimer, .cancelTimer: return false
            default: return true
            }
        }
    }
}
