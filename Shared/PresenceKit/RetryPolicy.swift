/// When to retry a request that got no final verdict (docs/SPECIFICATION.md,
/// "2. The device outbox and delivery"): 100 ms, 500 ms, 2 s, 5 s, then exponential backoff with **full
/// jitter** (a uniform delay between 0 and min(cap, base · 2^k)) so that a fleet coming back online after
/// an outage does not retry in lockstep. Every retry is bounded by a deadline: in the background the app
/// has about 10 s (`backgroundBudgetMs`); a retry that would start after the deadline is not attempted
/// now — the entry stays in the outbox for the next drain.
public struct RetryPolicy: Sendable, Hashable {
    /// Fixed delays of the first retries, milliseconds.
    public var initialDelaysMs: [Int64]
    /// Ceiling of the first jittered retry; doubles with each further retry.
    public var backoffBaseMs: Int64
    /// Largest ceiling (the SLO is 99 % of events on the server within 5 minutes).
    public var backoffCapMs: Int64

    /// The background execution budget iOS grants after a region event (about 10 s).
    public static let backgroundBudgetMs: Int64 = 10_000

    public init(initialDelaysMs: [Int64] = [100, 500, 2_000, 5_000], backoffBaseMs: Int64 = 10_000, backoffCapMs: Int64 = 300_000) {
        precondition(initialDelaysMs.allSatisfy { $0 >= 0 } && backoffBaseMs > 0 && backoffCapMs >= backoffBaseMs)
        self.initialDelaysMs = initialDelaysMs
        self.backoffBaseMs = backoffBaseMs
        self.backoffCapMs = backoffCapMs
    }

    /// Upper bound of the delay before retry number `retry` (1 = the retry after the first failure).
    /// For the fixed steps it is the delay itself.
    public func ceiling(beforeRetry retry: Int) -> Int64 {
        precondition(retry >= 1, "retries are numbered from 1")
        if retry <= initialDelaysMs.count { return initialDelaysMs[retry - 1] }
        let k = retry - initialDelaysMs.count - 1
        guard k < 62 else { return backoffCapMs }
        let (value, overflow) = backoffBaseMs.multipliedReportingOverflow(by: Int64(1) << Int64(k))
        return overflow ? backoffCapMs : min(backoffCapMs, value)
    }

    /// The delay before retry number `retry`: fixed for the first steps, then uniform in 0...ceiling.
    public func delay(beforeRetry retry: Int, using random: inout some RandomNumberGenerator) -> Int64 {
        let ceiling = ceiling(beforeRetry: retry)
        if retry <= initialDelaysMs.count { return ceiling }
        return Int64.random(in: 0...ceiling, using: &random)
    }

    /// When retry number `retry` should start, or nil if that is after `deadline`.
    public func nextAttempt(
        beforeRetry retry: Int, now: Timestamp, deadline: Timestamp?, using random: inout some RandomNumberGenerator
    ) -> Timestamp? {
        let at = now + delay(beforeRetry: retry, using: &random)
        if let deadline, at > deadline { return nil }
        return at
    }
}

/// What came back from one send attempt.
public enum DeliveryResult: Sendable, Hashable {
    /// An HTTP response. `problemType` is the problem+json `type` (it tells a policy 409 from an
    /// "in flight" 409); `retryAfterMs` comes from a `Retry-After` header (429/503).
    case response(status: Int, problemType: String? = nil, retryAfterMs: Int64? = nil)
    case timeout
    case transportError(String)
}

public enum DeliveryVerdict: Sendable, Hashable {
    /// The server decided; the entry leaves the outbox.
    case final(status: Int)
    /// No decision yet; keep the entry and retry with the same idempotency key.
    case retry(reason: String, notBeforeMs: Int64?)
}

/// Which outcomes are final. Default (the no-loss contract): 201, 200, 409, 422, 400. Everything else — 202
/// (queued, no verdict yet), 5xx, 429, 401, timeouts, transport errors — keeps the entry. A 409 whose
/// problem type says the same key is still *in flight* is not a verdict either.
public struct DeliveryClassifier: Sendable, Hashable {
    public var finalStatuses: Set<Int>

    public init(finalStatuses: Set<Int> = [200, 201, 400, 409, 422]) {
        self.finalStatuses = finalStatuses
    }

    public func verdict(for result: DeliveryResult) -> DeliveryVerdict {
        switch result {
        case let .response(status, problemType, retryAfter):
            if status == 409, let type = problemType?.lowercased(),
                type.contains("in-flight") || type.contains("in_flight") || type.contains("inflight")
            {
                return .retry(reason: "409 in flight", notBeforeMs: retryAfter)
            }
            if finalStatuses.contains(status) { return .final(status: status) }
            return .retry(reason: "HTTP \(status)", notBeforeMs: retryAfter)
        case .timeout:
            return .retry(reason: "timeout", notBeforeMs: nil)
        case .transportError(let message):
            return .retry(reason: "transport error: \(message)", notBeforeMs: nil)
        }
    }
}

/// Sends outbox entries in their original append order with the retry policy, until the outbox is
/// empty, the deadline stops it, its task is cancelled or the next entry waits for the server's clock
/// (`Stop.awaitingServerClock`). Strictly in order (head-of-line): the server never sees a check-out
/// before the check-in it closes.
///
/// One exception keeps the line moving: an entry that the identity the drain sends as can never deliver.
/// When the answer is 403 and the entry's `deviceId` or `userId` is not the drain's `identity` (an event
/// of the device before a re-enrolment, the previous user's `user_changed` check-out sent with the new
/// user's token), the entry is parked (`Outbox.park`): kept in the outbox, listed by
/// `Outbox.parkedEntries()` for the host to export, never sent again by the drain and never deleted
/// by it, and the drain goes on with the next entry. A 403 for an entry of the current identity (the
/// device revoked, or bound to another user) is not a verdict either, but nothing this phone sends will be
/// taken until an administrator acts: the drain stops there (`Stop.forbidden`), the entry kept, so the
/// app can tell its user, and the next drain asks once more.
public struct OutboxDrainer: Sendable {
    public var outbox: Outbox
    public var policy: RetryPolicy
    public var classifier: DeliveryClassifier
    public var clock: any PresenceClock
    /// The user and device the requests are authenticated as; nil turns parking off (every 403 stops
    /// the drain).
    public var identity: DeviceIdentity?
    /// Waits `ms` milliseconds: `Task.sleep` in production, `ManualClock.advance` in virtual time.
    public var sleep: @Sendable (Int64) async -> Void

    public init(
        outbox: Outbox, policy: RetryPolicy = RetryPolicy(), classifier: DeliveryClassifier = DeliveryClassifier(),
        clock: any PresenceClock, sendingAs identity: DeviceIdentity? = nil, sleep: @escaping @Sendable (Int64) async -> Void
    ) {
        self.outbox = outbox
        self.policy = policy
        self.classifier = classifier
        self.clock = clock
        self.identity = identity
        self.sleep = sleep
    }

    /// An entry and the answer that ended its turn in the drain.
    public struct EntryStatus: Sendable, Hashable {
        public var id: UInt64
        public var status: Int
    }

    /// An entry that got its final verdict.
    public typealias Delivered = EntryStatus
    /// An entry moved out of the drain order because the current identity cannot deliver it.
    public typealias Parked = EntryStatus

    public enum Stop: Sendable, Hashable {
        /// Everything was delivered.
        case empty
        /// The deadline came (or the next retry would start after it), or the drain's task was
        /// cancelled (`lastReason` "cancelled"); resume at `retryAt` or later.
        case deadline(retryAt: Timestamp, lastReason: String?)
        /// The next entry's times are the phone's own clock (`OutboxEntry.stampedWithPhoneClock`): it
        /// waits until an answer tells the server's clock and the host corrects it
        /// (`PresenceEvent.serverClockKnown`), then the drain goes on.
        case awaitingServerClock
        /// Every entry was sent and answered, but the outbox could not record the answers (a write
        /// failed: a full disk). The answered entries are still stored and go again at the next drain,
        /// answered from the server's record (200 with the original receipt), until a write succeeds
        /// and they leave.
        case unrecorded(OutboxError)
        /// The server refused this phone itself (403 for an entry of the drain's own identity: the
        /// device revoked, or now bound to another user). The entry is kept; the app tells its user to
        /// contact their administrator, and drains again at its next occasion (a launch, a region event,
        /// a periodic wake), which asks the server once more. Retrying at once would only repeat the
        /// refusal and hold every later event behind it anyway.
        case forbidden(problemType: String?)
    }

    public struct Report: Sendable, Hashable {
        public var delivered: [Delivered] = []
        public var parked: [Parked] = []
        public var attempts = 0
        public var stop = Stop.empty
    }

    /// `lastReason` of a drain stopped by the cancellation of its task.
    public static let cancelledReason = "cancelled"

    /// Drains until empty, `deadline`, or the cancellation of the calling task (checked before every
    /// send and after every wait: a `sleep` that returns early when cancelled must not turn the retry
    /// loop into a busy loop). `send` performs one request for the entry with the stored payload (and
    /// must reuse the idempotency key inside it).
    public func drain(
        deadline: Timestamp?,
        random: inout some RandomNumberGenerator,
        send: (OutboxEntry, [UInt8]) async -> DeliveryResult
    ) async throws(OutboxError) -> Report {
        var report = Report()
        // Answered, but the outbox could not record it (a full disk): the server has it, so the drain
        // goes on with the entries after it instead of sending it again and again.
        var unrecorded: (after: UInt64, error: OutboxError)?
        func next() -> OutboxEntry? {
            guard let unrecorded else { return outbox.first() }
            return outbox.first(after: unrecorded.after)
        }
        while let entry = next() {
            // Sent as stamped, it would be refused (the gateway's window) or recorded at the phone's time.
            if entry.stampedWithPhoneClock {
                report.stop = .awaitingServerClock
                return report
            }
            let now = clock.now()
            if Task.isCancelled {
                report.stop = .deadline(retryAt: now, lastReason: Self.cancelledReason)
                return report
            }
            if let deadline, now >= deadline {
                report.stop = .deadline(retryAt: now, lastReason: nil)
                return report
            }
            let payload = try outbox.payload(of: entry.id)
            // Noting the attempt only spares a resend with the same key; a disk too full to note it
            // must not keep the event from the server.
            let sent: OutboxEntry
            do {
                sent = try outbox.markSent(entry.id)
            } catch {
                guard case .io = error else { throw error }
                outbox.recordAttempt(entry.id)
                var counted = entry
                counted.attempts += 1
                sent = counted
            }
            let result = await send(sent, payload)
            report.attempts += 1
            if case .response(let status, let problemType, _) = result, status == 403 {
                if belongsToAnotherIdentity(payload) {
                    try outbox.park(entry.id, status: status)
                    report.parked.append(Parked(id: entry.id, status: status))
                    continue
                }
                report.stop = .forbidden(problemType: problemType)
                return report
            }
            switch classifier.verdict(for: result) {
            case .final(let status):
                do {
                    try outbox.markDone(entry.id, status: status)
                } catch {
                    guard case .io = error else { throw error }
                    unrecorded = (entry.id, error)
                }
                report.delivered.append(Delivered(id: entry.id, status: status))
            case let .retry(reason, notBefore):
                var delay = policy.delay(beforeRetry: max(1, sent.attempts), using: &random)
                if let notBefore { delay = max(delay, notBefore + Self.spread(notBefore, using: &random)) }
                let next = clock.now() + delay
                if let deadline, next > deadline {
                    report.stop = .deadline(retryAt: next, lastReason: reason)
                    return report
                }
                await sleep(delay)
                if Task.isCancelled {
                    report.stop = .deadline(retryAt: max(next, clock.now()), lastReason: Self.cancelledReason)
                    return report
                }
            }
        }
        report.stop = unrecorded.map { .unrecorded($0.error) } ?? .empty
        return report
    }

    /// What is added at random to a server's `Retry-After`: up to half of it, at most
    /// `retryAfterSpreadMaxMs`. Phones told the same wait at the same moment (a gateway back from an
    /// outage answers every one `Retry-After: 2`) then come back spread out, not in one wave; a long
    /// wait (a 425 until the phone's event time comes) stays close to what the server said.
    static func spread(_ retryAfterMs: Int64, using random: inout some RandomNumberGenerator) -> Int64 {
        let most = min(retryAfterMs / 2, retryAfterSpreadMaxMs)
        return most > 0 ? Int64.random(in: 0...most, using: &random) : 0
    }

    /// The most `spread(_:using:)` adds.
    static let retryAfterSpreadMaxMs: Int64 = 5_000

    /// True when `payload` is an `AttendanceEvent` of another user or device than `identity` (never
    /// for a payload that is not one, nor without an identity).
    func belongsToAnotherIdentity(_ payload: [UInt8]) -> Bool {
        guard let identity, let event = try? PresenceCoding.decodeEvent(payload) else { return false }
        return event.deviceId != identity.deviceId || event.userId != identity.userId
    }
}
