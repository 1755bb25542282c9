import AttendanceProtocol
import Foundation
import Synchronization

/// The final outcome of a request as the verdict told it: only the fields its answer needs. The
/// request's identity (key, device, request id, event time) is the entry's, so the table, up to
/// `maxEntries` (200,000 by default) outcomes, does not hold it twice.
package struct RecordedOutcome: Sendable, Hashable {
    package var outcome: VerdictOutcome
    package var httpStatus: Int
    package var serverReceiptId: String?
    package var sessionId: String?
    package var reasons: [String]
    package var action: AppAction
    package var retryAfterSeconds: Int?
    package var decidedAt: Date

    /// The answer part of a verdict.
    package init(_ verdict: AttendanceVerdict) {
        outcome = verdict.outcome
        httpStatus = verdict.httpStatus
        serverReceiptId = verdict.serverReceiptId
        sessionId = verdict.sessionId
        reasons = verdict.reasons
        action = verdict.action
        retryAfterSeconds = verdict.retryAfterSeconds
        decidedAt = verdict.decidedAt
    }

    /// The `GET /v1/attendance/events/{key}` status: a duplicate is an accepted event.
    package var eventStatus: EventOutcomeStatus {
        switch outcome {
        case .accepted, .duplicate: return .accepted
        case .rejected: return .rejected
        case .payloadMismatch: return .payloadMismatch
        }
    }
}

/// A request this instance received, with its outcome once known.
package struct IdempotencyEntry: Sendable, Hashable {
    package let key: String
    package let deviceId: String
    package let fingerprint: String
    package let requestId: String
    package let eventTime: Date?
    package let receivedAt: Date
    package internal(set) var outcome: RecordedOutcome? = nil

    /// As the status endpoint shows it (`pending` until the verdict).
    package var response: EventOutcomeResponse {
        guard let outcome else {
            return EventOutcomeResponse(
                idempotencyKey: key, status: .pending, httpStatus: AcceptanceStatus.queued.httpStatus,
                eventTime: eventTime, receivedAt: receivedAt
            )
        }
        // A duplicate is the event recorded by an earlier request: its status is the recording's
        // (201), as the merger's table tells it.
        let httpStatus = outcome.outcome == .duplicate ? VerdictOutcome.accepted.httpStatus : outcome.httpStatus
        return EventOutcomeResponse(
            idempotencyKey: key, status: outcome.eventStatus, httpStatus: httpStatus,
            serverReceiptId: outcome.serverReceiptId, sessionId: outcome.sessionId,
            reasons: outcome.reasons.isEmpty && outcome.outcome != .rejected ? nil : outcome.reasons,
            action: outcome.outcome == .rejected ? outcome.action : nil,
            eventTime: eventTime, receivedAt: receivedAt, decidedAt: outcome.decidedAt
        )
    }
}

/// What `IdempotencyTable.begin` found for a key.
package enum BeginResult: Sendable, Hashable {
    /// New (or forgotten): the caller owns the request, produces it, then waits for the verdict.
    case started
    /// The first request with this key has no outcome yet (409 in flight).
    case inFlight(IdempotencyEntry)
    /// The same payload already has its outcome (replay it).
    case completed(IdempotencyEntry, RecordedOutcome)
    /// The key was used with another payload (422).
    case mismatch(IdempotencyEntry)
    /// The table holds `maxEntries` requests still waiting for their verdict (a pipeline hours behind):
    /// this new one is not taken (503 with `Retry-After`; the phone keeps it), so memory stays bounded.
    case full
}

/// Lifetimes and size of the table.
package struct IdempotencyTableConfiguration: Sendable, Hashable {
    /// How long an outcome is replayed from memory. Later repeats are produced again and the
    /// merger answers `duplicate` from PostgreSQL, so this only saves round trips.
    package var completedTTL: Duration
    /// How long a request without a verdict blocks its key (409 in flight). After that a repeat is
    /// produced again (the merger dedupes), so a lost verdict never blocks a device for good.
    package var inFlightTTL: Duration
    /// Entries kept at most; the oldest finished ones go first.
    package var maxEntries: Int

    package init(completedTTL: Duration = .seconds(3_600), inFlightTTL: Duration = .seconds(120), maxEntries: Int = 200_000) {
        self.completedTTL = completedTTL
        self.inFlightTTL = inFlightTTL
        self.maxEntries = maxEntries
    }
}

/// Requests of this gateway instance by idempotency key: in flight (with the handlers waiting for
/// their verdict) or finished (with the outcome, for replays and the status endpoint).
///
/// One `Mutex` guards the dictionary; waiting is a continuation per waiter, resumed by `complete`,
/// `abandon`, its cancellation or its deadline, whichever comes first. Deadlines are kept in one
/// queue that a single sweeper task ends (it runs while waits are pending): a wait costs no task
/// and no timer of its own.
package final class IdempotencyTable: Sendable {
    package let settings: IdempotencyTableConfiguration
    private let state = Mutex(State())

    struct Slot {
        var entry: IdempotencyEntry
        var waiters: [UInt64: CheckedContinuation<RecordedOutcome?, Never>] = [:]
        /// When the outcome arrived (this process's clock).
        var completedAt: Date?
        /// When it was received and when its outcome arrived, on the monotonic clock: an entry's age is
        /// the longer of the two clocks' (`age`), so a wall clock stepped back keeps nothing longer.
        var receivedUptime = ContinuousClock.now
        var completedUptime: ContinuousClock.Instant?
        /// Earlier requests with this key and payload that outlived their in-flight time (the first
        /// `earlierRequestsKept`): the verdict of any of them is this request's outcome too. The first are
        /// kept, not the latest: a user's copies are decided in the order they were produced, so the
        /// first copy's verdict is the one that comes, however many copies a long backlog made since.
        var earlierRequestIds: [String] = []
    }

    /// How many earlier requests of one key and payload a slot remembers.
    static let earlierRequestsKept = 16

    struct State {
        var slots: [String: Slot] = [:]
        /// The keys of each device's slots: a device's pending list reads its own entries, not the table.
        var keysByDevice: [String: Set<String>] = [:]
        var nextWaiter: UInt64 = 0
        /// Pending waits by deadline, earliest first. A wait that ended otherwise stays until its
        /// deadline and is skipped then.
        var deadlines = ArrayQueue<Deadline>()
        /// Keys in the order their outcome arrived: a full table evicts from the front without
        /// sorting. A key that was forgotten or started again since is skipped when it comes up.
        var finished = ArrayQueue<String>()
        /// A sweeper task is running (it stops when no deadline is left).
        var sweeping = false

        /// Forgets the slot of `key` and its place in its device's keys.
        mutating func remove(_ key: String) {
            guard let slot = slots.removeValue(forKey: key) else { return }
            let device = slot.entry.deviceId
            keysByDevice[device]?.remove(key)
            if keysByDevice[device]?.isEmpty == true { keysByDevice[device] = nil }
        }
    }

    struct Deadline {
        var at: ContinuousClock.Instant
        var key: String
        var waiter: UInt64
    }

    /// A first-in, first-out queue over an array: taking the front moves an index, and the array
    /// drops its taken front now and then (constant time per element, amortized).
    struct ArrayQueue<Element> {
        private var items: [Element] = []
        private var head = 0

        var first: Element? { head < items.count ? items[head] : nil }

        mutating func append(_ element: Element) { items.append(element) }

        /// Inserts `element` after every element not ordered after it (`less`), searching only when
        /// it does not belong at the end.
        mutating func insert(_ element: Element, orderedBy less: (Element, Element) -> Bool) {
            guard let last = items.last, less(element, last) else { return items.append(element) }
            var low = head, high = items.count
            while low < high {
                let mid = (low + high) / 2
                if less(element, items[mid]) { high = mid } else { low = mid + 1 }
            }
            items.insert(element, at: low)
        }

        mutating func removeFirst() {
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1_024, head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
        }
    }

    package init(settings: IdempotencyTableConfiguration = IdempotencyTableConfiguration()) {
        self.settings = settings
    }

    package var count: Int { state.withLock { $0.slots.count } }

    /// Registers a request, or reports what an earlier one with the same key became.
    package func begin(
        key: String, deviceId: String, fingerprint: String, requestId: String, eventTime: Date?, now: Date = Date()
    ) -> BeginResult {
        let uptime = ContinuousClock.now
        let (result, dropped) = state.withLock { state -> (BeginResult, [CheckedContinuation<RecordedOutcome?, Never>]) in
            var dropped: [CheckedContinuation<RecordedOutcome?, Never>] = []
            var earlier: [String] = []
            if let slot = state.slots[key] {
                if !isExpired(slot, now: now, uptime: uptime) {
                    if slot.entry.fingerprint != fingerprint { return (.mismatch(slot.entry), []) }
                    if let outcome = slot.entry.outcome { return (.completed(slot.entry, outcome), []) }
                    return (.inFlight(slot.entry), [])
                }
                dropped = Array(slot.waiters.values)
                state.remove(key)
                if slot.entry.outcome == nil, slot.entry.fingerprint == fingerprint {
                    earlier = Array((slot.earlierRequestIds + [slot.entry.requestId]).prefix(Self.earlierRequestsKept))
                }
            }
            if state.slots.count >= settings.maxEntries {
                evictOldestFinished(&state, downTo: settings.maxEntries - 1)
                // Every entry left waits for its verdict: a new request is not taken (a key's own expired
                // entry was removed above, so a repeat of it always fits).
                if state.slots.count >= settings.maxEntries { return (.full, dropped) }
            }
            state.keysByDevice[deviceId, default: []].insert(key)
            state.slots[key] = Slot(
                entry: IdempotencyEntry(
                    key: key, deviceId: deviceId, fingerprint: fingerprint, requestId: requestId, eventTime: eventTime, receivedAt: now
                ), earlierRequestIds: earlier)
            return (.started, dropped)
        }
        for waiter in dropped { waiter.resume(returning: nil) }
        return result
    }

    /// Forgets a request that could not be produced (the device keeps it and retries).
    package func abandon(key: String, requestId: String) {
        let waiters = state.withLock { state -> [CheckedContinuation<RecordedOutcome?, Never>] in
            guard let slot = state.slots[key], slot.entry.requestId == requestId, slot.entry.outcome == nil else { return [] }
            state.remove(key)
            return Array(slot.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Records the outcome for `key` and wakes its waiters. `false` when this instance holds no
    /// request with that key (restarted, or forgotten), or, given `requestId`, when the key's request
    /// is another one with another payload: nothing waits for it, and the later request keeps waiting
    /// for its own verdict. The verdict of an earlier request with the same payload that outlived its
    /// in-flight time (a pipeline more than that behind) completes the later one: the merger records
    /// the key once, and the later copy's verdict would only repeat it. The first outcome
    /// stands: a verdict delivered again (the merger answers a redelivered event `duplicate`) changes
    /// nothing a replay answers.
    @discardableResult
    package func complete(key: String, requestId: String? = nil, outcome: RecordedOutcome, now: Date = Date()) -> Bool {
        let waiters = state.withLock { state -> [CheckedContinuation<RecordedOutcome?, Never>]? in
            guard var slot = state.slots[key] else { return nil }
            if let requestId, slot.entry.requestId != requestId, !slot.earlierRequestIds.contains(requestId) { return nil }
            if slot.entry.outcome != nil { return [] }
            slot.completedAt = now
            slot.completedUptime = ContinuousClock.now
            state.finished.append(key)
            slot.entry.outcome = outcome
            let waiters = Array(slot.waiters.values)
            slot.waiters = [:]
            state.slots[key] = slot
            return waiters
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: outcome) }
        return true
    }

    /// Waits up to `timeout` for the outcome of `key`; `nil` on timeout, cancellation, or when the
    /// request was abandoned.
    package func waitForOutcome(key: String, timeout: Duration) async -> RecordedOutcome? {
        if let outcome = state.withLock({ $0.slots[key]?.entry.outcome }) { return outcome }
        guard timeout > .zero else { return nil }
        let deadline = ContinuousClock.now + timeout
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<RecordedOutcome?, Never>) in
                let (immediate, startSweeper) = state.withLock { state -> (RecordedOutcome??, Bool) in
                    guard var slot = state.slots[key] else { return (.some(nil), false) }
                    if let outcome = slot.entry.outcome { return (.some(outcome), false) }
                    // Checked under the lock the cancellation handler takes: either the handler
                    // finds this waiter, or this sees the cancellation.
                    if Task.isCancelled { return (.some(nil), false) }
                    slot.waiters[id] = continuation
                    state.slots[key] = slot
                    // Waits share one timeout, so a deadline almost always belongs at the end.
                    state.deadlines.insert(Deadline(at: deadline, key: key, waiter: id)) { $0.at < $1.at }
                    let start = !state.sweeping
                    state.sweeping = true
                    return (.none, start)
                }
                if case .some(let outcome) = immediate { continuation.resume(returning: outcome) }
                if startSweeper { Task { await self.endWaitsAtTheirDeadlines() } }
            }
        } onCancel: {
            let waiter = state.withLock { $0.slots[key]?.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }

    /// The entry of `key` when it belongs to `deviceId` and is kept: a request past its in-flight time is
    /// still pending until it is forgotten (its copy is queued in Kafka; the pipeline is behind).
    package func lookup(key: String, deviceId: String, now: Date = Date()) -> IdempotencyEntry? {
        let uptime = ContinuousClock.now
        return state.withLock { state in
            guard let slot = state.slots[key], slot.entry.deviceId == deviceId, !isForgotten(slot, now: now, uptime: uptime) else {
                return nil
            }
            return slot.entry
        }
    }

    /// This device's kept entries received at or after `since`, oldest first (pending ones past their
    /// in-flight time too, so a poll's cursor never passes them).
    package func entries(deviceId: String, since: Date, now: Date = Date()) -> [IdempotencyEntry] {
        let uptime = ContinuousClock.now
        return state.withLock { state in
            (state.keysByDevice[deviceId] ?? []).compactMap { key in
                guard let slot = state.slots[key], slot.entry.receivedAt >= since, !self.isForgotten(slot, now: now, uptime: uptime) else {
                    return nil
                }
                return slot.entry
            }
        }
        .sorted { ($0.receivedAt, $0.key) < ($1.receivedAt, $1.key) }
    }

    /// Drops expired entries (call now and then: a full table only evicts finished entries). A request
    /// past its in-flight time is kept `completedTTL` longer, though a repeat no longer waits for it: its
    /// verdict, when the pipeline is that far behind, still completes it (and the repeat that replaced
    /// it, `begin`), so the phone's next try is answered from it.
    package func purgeExpired(now: Date = Date()) {
        let uptime = ContinuousClock.now
        let dropped = state.withLock { state -> [CheckedContinuation<RecordedOutcome?, Never>] in
            var dropped: [CheckedContinuation<RecordedOutcome?, Never>] = []
            for (key, slot) in state.slots where isForgotten(slot, now: now, uptime: uptime) {
                dropped += slot.waiters.values
                state.remove(key)
            }
            // Outcomes expire in the order they arrived: the front of the queue is now gone.
            while let key = state.finished.first, state.slots[key]?.completedAt == nil { state.finished.removeFirst() }
            return dropped
        }
        for waiter in dropped { waiter.resume(returning: nil) }
    }

    // MARK: Internals

    /// Past what `purgeExpired` keeps: a finished entry once expired, one in flight `completedTTL`
    /// after its in-flight time.
    private func isForgotten(_ slot: Slot, now: Date, uptime: ContinuousClock.Instant) -> Bool {
        if slot.completedAt != nil { return isExpired(slot, now: now, uptime: uptime) }
        let kept = Self.seconds(settings.inFlightTTL) + Self.seconds(settings.completedTTL)
        return Self.age(since: slot.entry.receivedAt, slot.receivedUptime, now: now, uptime: uptime) > kept
    }

    /// In flight: `inFlightTTL` after it was received; finished: `completedTTL` after the outcome
    /// arrived here.
    private func isExpired(_ slot: Slot, now: Date, uptime: ContinuousClock.Instant) -> Bool {
        if let completedAt = slot.completedAt, let completedUptime = slot.completedUptime {
            return Self.age(since: completedAt, completedUptime, now: now, uptime: uptime) > Self.seconds(settings.completedTTL)
        }
        return Self.age(since: slot.entry.receivedAt, slot.receivedUptime, now: now, uptime: uptime) > Self.seconds(settings.inFlightTTL)
    }

    /// Seconds since `date` by the wall clock (`now`, which tests set) or since `instant` by the
    /// monotonic one, whichever is longer: after the host's clock is stepped back, an entry still
    /// ages by the monotonic clock (a step forward only ends it early, and the merger dedupes).
    private static func age(since date: Date, _ instant: ContinuousClock.Instant, now: Date, uptime: ContinuousClock.Instant) -> Double {
        max(now.timeIntervalSince(date), seconds(instant.duration(to: uptime)))
    }

    /// Forgets the finished entries whose outcome arrived first until at most `limit` are left, in
    /// constant time per entry (a finished entry has no waiters). Requests in flight stay: they leave
    /// when their verdict comes (and then ages out) or when they are forgotten (`isForgotten`), an
    /// in-flight time plus `completedTTL` after they were received.
    private func evictOldestFinished(_ state: inout State, downTo limit: Int) {
        while state.slots.count > limit, let key = state.finished.first {
            state.finished.removeFirst()
            if state.slots[key]?.completedAt != nil { state.remove(key) }
        }
    }

    /// Ends each pending wait at its deadline, up to `sweepGranularity` late (up to 100 ms for a wait
    /// shorter than every one already pending: the sweeper wakes at least that often); returns when
    /// none is left.
    private func endWaitsAtTheirDeadlines() async {
        while true {
            let (due, next) = state.withLock { state -> ([CheckedContinuation<RecordedOutcome?, Never>], ContinuousClock.Instant?) in
                let now = ContinuousClock.now
                var due: [CheckedContinuation<RecordedOutcome?, Never>] = []
                while let first = state.deadlines.first, first.at <= now {
                    state.deadlines.removeFirst()
                    if let waiter = state.slots[first.key]?.waiters.removeValue(forKey: first.waiter) { due.append(waiter) }
                }
                guard let first = state.deadlines.first else {
                    state.sweeping = false
                    return (due, nil)
                }
                return (due, first.at)
            }
            for waiter in due { waiter.resume(returning: nil) }
            guard let next else { return }
            let now = ContinuousClock.now
            try? await Task.sleep(until: min(max(next, now + Self.sweepGranularity), now + .milliseconds(100)), clock: .continuous)
        }
    }

    /// The sweeper sleeps at least this long between rounds.
    static let sweepGranularity = Duration.milliseconds(10)

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
