import AttendanceProtocol
import Foundation
import IngestGatewayCore
import Testing

@Suite("Gateway core: idempotency table, token bucket, keys")
struct CoreTests {
    static func outcome(_ outcome: VerdictOutcome = .accepted) -> RecordedOutcome {
        RecordedOutcome(
            AttendanceVerdict(
                requestId: "r", idempotencyKey: "k", userId: "u", deviceId: "d", outcome: outcome, serverReceiptId: "rcpt",
                sessionId: "ses",
                decidedAt: Date(), gatewayInstance: "gw"))
    }

    @Test func beginReportsEveryState() {
        let table = IdempotencyTable()
        let now = Date()
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "f1", requestId: "r1", eventTime: nil, now: now) == .started)
        guard case .inFlight = table.begin(key: "k", deviceId: "d", fingerprint: "f1", requestId: "r2", eventTime: nil, now: now) else {
            Issue.record("expected in flight")
            return
        }
        guard case .mismatch = table.begin(key: "k", deviceId: "d", fingerprint: "f2", requestId: "r3", eventTime: nil, now: now) else {
            Issue.record("expected mismatch")
            return
        }
        #expect(table.complete(key: "k", outcome: Self.outcome(), now: now))
        guard
            case .completed(_, let outcome) = table.begin(
                key: "k", deviceId: "d", fingerprint: "f1", requestId: "r4", eventTime: nil, now: now)
        else {
            Issue.record("expected completed")
            return
        }
        #expect(outcome.serverReceiptId == "rcpt")
        #expect(!table.complete(key: "unknown", outcome: Self.outcome()))
        #expect(table.lookup(key: "k", deviceId: "d", now: now) != nil)
        #expect(table.lookup(key: "k", deviceId: "other", now: now) == nil)
    }

    @Test func entriesExpire() {
        let table = IdempotencyTable(
            settings: IdempotencyTableConfiguration(completedTTL: .seconds(60), inFlightTTL: .seconds(10), maxEntries: 1_000))
        let t0 = Date()
        #expect(table.begin(key: "a", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil, now: t0) == .started)
        // In flight past its TTL: a repeat is produced again.
        #expect(table.begin(key: "a", deviceId: "d", fingerprint: "f", requestId: "r2", eventTime: nil, now: t0 + 11) == .started)
        table.complete(key: "a", outcome: Self.outcome(), now: t0 + 12)
        #expect(table.lookup(key: "a", deviceId: "d", now: t0 + 70) != nil)
        #expect(table.lookup(key: "a", deviceId: "d", now: t0 + 73) == nil)
        table.purgeExpired(now: t0 + 73)
        #expect(table.count == 0)
    }

    /// The host's clock is stepped back ten minutes (NTP) after a request whose verdict never comes:
    /// by the wall clock alone its key would answer 409 in flight for ten minutes more than its
    /// in-flight time, and every later event of that phone's outbox would wait behind it.
    @Test func aClockSteppedBackKeepsNothingLonger() async throws {
        let table = IdempotencyTable(
            settings: IdempotencyTableConfiguration(completedTTL: .milliseconds(50), inFlightTTL: .milliseconds(50), maxEntries: 1_000))
        let t0 = Date()
        #expect(table.begin(key: "a", deviceId: "d", fingerprint: "f", requestId: "r1", eventTime: nil, now: t0) == .started)
        #expect(table.begin(key: "b", deviceId: "d", fingerprint: "f", requestId: "r1", eventTime: nil, now: t0) == .started)
        table.complete(key: "b", outcome: Self.outcome(), now: t0)
        try await Task.sleep(for: .milliseconds(120))
        let steppedBack = t0 - 600
        #expect(table.begin(key: "a", deviceId: "d", fingerprint: "f", requestId: "r2", eventTime: nil, now: steppedBack) == .started)
        #expect(table.lookup(key: "b", deviceId: "d", now: steppedBack) == nil)
    }

    @Test func theTableStaysBounded() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(maxEntries: 100))
        for i in 0..<300 {
            _ = table.begin(key: "k\(i)", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil)
            table.complete(key: "k\(i)", outcome: Self.outcome())
        }
        #expect(table.count <= 100)
        #expect(table.lookup(key: "k299", deviceId: "d") != nil)
    }

    @Test("a full table forgets the finished entries whose outcome came first, and never one in flight")
    func aFullTableEvictsTheOldestOutcomesFirst() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(maxEntries: 1_000))
        let t0 = Date()
        for i in 0..<10 { _ = table.begin(key: "waiting-\(i)", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil, now: t0) }
        for i in 0..<20_000 {
            _ = table.begin(key: "k\(i)", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil, now: t0)
            // Outcomes arrive out of request order: each odd key's just before its even neighbour's.
            if i % 2 == 1 {
                table.complete(key: "k\(i)", outcome: Self.outcome(), now: t0)
                table.complete(key: "k\(i - 1)", outcome: Self.outcome(), now: t0)
            }
        }
        #expect(table.count == 1_000)
        for i in 0..<10 { #expect(table.lookup(key: "waiting-\(i)", deviceId: "d", now: t0) != nil) }
        #expect(table.lookup(key: "k19999", deviceId: "d", now: t0) != nil)
        #expect(table.lookup(key: "k19010", deviceId: "d", now: t0) != nil)
        #expect(table.lookup(key: "k19009", deviceId: "d", now: t0) == nil)
        // Past their lifetime (in flight: 120 s, then an hour for a late verdict), the janitor's purge
        // empties the table and its queue of outcomes.
        table.purgeExpired(now: t0 + 3_601)
        #expect(table.count == 10)
        table.purgeExpired(now: t0 + 3_721)
        #expect(table.count == 0)
    }

    @Test("a verdict for an earlier request with the same key and another payload does not complete the request that replaced it")
    func aLateVerdictOfAnEarlierRequestWithAnotherPayloadIsIgnored() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(inFlightTTL: .seconds(10)))
        let t0 = Date()
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p1", requestId: "r1", eventTime: nil, now: t0) == .started)
        // r1's verdict is late; after the in-flight time the key is taken by r2, with another payload.
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p2", requestId: "r2", eventTime: nil, now: t0 + 11) == .started)
        #expect(!table.complete(key: "k", requestId: "r1", outcome: Self.outcome(), now: t0 + 12))
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 12)?.outcome == nil)
        #expect(table.complete(key: "k", requestId: "r2", outcome: Self.outcome(.payloadMismatch), now: t0 + 13))
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 13)?.outcome?.outcome == .payloadMismatch)
    }

    /// The pipeline more than the in-flight time behind (a merger catching up): the phone's retry
    /// produced the event again under a new request, and the first request's verdict, when it comes,
    /// answers both, so the phone gets its final answer without waiting for the copy's.
    /// A pipeline hours behind: the phone's retries made more copies than a slot remembers. A user's copies
    /// are decided in the order they were produced, so the first copy's verdict is the one that comes:
    /// it still completes the request, and a read meanwhile says pending, not 404.
    @Test("the first copy's verdict completes a request however many copies a long backlog made")
    func theFirstCopysVerdictCompletesAfterManyCopies() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(inFlightTTL: .seconds(10)))
        let t0 = Date()
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p", requestId: "r0", eventTime: nil, now: t0) == .started)
        // Past its in-flight time, before any repeat: still pending to a read, and listed for a poll.
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 11)?.outcome == nil)
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 11) != nil)
        #expect(table.entries(deviceId: "d", since: t0, now: t0 + 11).map(\.key) == ["k"])
        for i in 1...20 {
            let repeated = table.begin(
                key: "k", deviceId: "d", fingerprint: "p", requestId: "r\(i)", eventTime: nil, now: t0 + Double(i) * 11)
            #expect(repeated == .started)
        }
        #expect(table.complete(key: "k", requestId: "r0", outcome: Self.outcome(.accepted), now: t0 + 240))
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 241)?.outcome?.outcome == .accepted)
    }

    /// Memory stays bounded while every request waits (a pipeline hours behind): a new request is refused
    /// (503, the phone keeps it), a repeat of one the table holds is not.
    @Test("a table full of requests awaiting their verdict refuses new ones, not repeats")
    func aTableFullOfWaitingRequestsRefusesNewOnes() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(inFlightTTL: .seconds(10), maxEntries: 3))
        let t0 = Date()
        for i in 0..<3 {
            #expect(table.begin(key: "k\(i)", deviceId: "d", fingerprint: "p", requestId: "r\(i)", eventTime: nil, now: t0) == .started)
        }
        #expect(table.begin(key: "new", deviceId: "d", fingerprint: "p", requestId: "rn", eventTime: nil, now: t0 + 1) == .full)
        #expect(table.count == 3)
        #expect(table.begin(key: "k0", deviceId: "d", fingerprint: "p", requestId: "r0b", eventTime: nil, now: t0 + 11) == .started)
        // An outcome makes room.
        table.complete(key: "k1", outcome: Self.outcome(), now: t0 + 12)
        #expect(table.begin(key: "new", deviceId: "d", fingerprint: "p", requestId: "rn", eventTime: nil, now: t0 + 13) == .started)
    }

    @Test("a verdict for an earlier request with the same key and payload completes the request that replaced it")
    func aLateVerdictOfAnEarlierRequestWithTheSamePayloadCompletesTheLaterOne() async {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(inFlightTTL: .seconds(10)))
        let t0 = Date()
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p", requestId: "r1", eventTime: nil, now: t0) == .started)
        // The janitor runs between the tries: an expired request is still remembered.
        table.purgeExpired(now: t0 + 50)
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p", requestId: "r2", eventTime: nil, now: t0 + 61) == .started)
        table.purgeExpired(now: t0 + 100)
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "p", requestId: "r3", eventTime: nil, now: t0 + 122) == .started)
        async let waited = table.waitForOutcome(key: "k", timeout: .seconds(30))
        try? await Task.sleep(for: .milliseconds(50))
        #expect(table.complete(key: "k", requestId: "r1", outcome: Self.outcome(.accepted), now: t0 + 123))
        #expect(await waited?.outcome == .accepted)
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 124)?.outcome?.outcome == .accepted)
        // The copies' verdicts (`duplicate`) change nothing.
        #expect(table.complete(key: "k", requestId: "r3", outcome: Self.outcome(.duplicate), now: t0 + 125))
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 126)?.outcome?.outcome == .accepted)

        // A verdict that comes after the in-flight time, before any repeat, completes its request: the
        // phone's next try is answered from it rather than produced again.
        #expect(table.begin(key: "j", deviceId: "d", fingerprint: "p", requestId: "s1", eventTime: nil, now: t0) == .started)
        table.purgeExpired(now: t0 + 200)
        #expect(table.complete(key: "j", requestId: "s1", outcome: Self.outcome(.accepted), now: t0 + 201))
        guard case .completed = table.begin(key: "j", deviceId: "d", fingerprint: "p", requestId: "s2", eventTime: nil, now: t0 + 202)
        else {
            Issue.record("a repeat after the late verdict is answered from it")
            return
        }
    }

    @Test("a verdict delivered again does not replace the first outcome")
    func aRedeliveredVerdictKeepsTheFirstOutcome() {
        let table = IdempotencyTable()
        let t0 = Date()
        #expect(table.begin(key: "k", deviceId: "d", fingerprint: "f", requestId: "r1", eventTime: nil, now: t0) == .started)
        #expect(table.complete(key: "k", requestId: "r1", outcome: Self.outcome(.accepted), now: t0))
        // The merger answers a redelivered event `duplicate`, with the same request id.
        #expect(table.complete(key: "k", requestId: "r1", outcome: Self.outcome(.duplicate), now: t0 + 1))
        #expect(table.lookup(key: "k", deviceId: "d", now: t0 + 2)?.outcome?.outcome == .accepted)
    }

    @Test("a device's entries are its own, whatever leaves the table")
    func entriesOfADeviceFollowTheTable() {
        let table = IdempotencyTable(settings: IdempotencyTableConfiguration(inFlightTTL: .seconds(10), maxEntries: 4))
        let t0 = Date()
        for (key, device) in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")] {
            #expect(table.begin(key: key, deviceId: device, fingerprint: "f", requestId: "r", eventTime: nil, now: t0) == .started)
        }
        #expect(table.entries(deviceId: "a", since: t0, now: t0).map(\.key) == ["a1", "a2"])
        table.abandon(key: "a1", requestId: "r")
        table.complete(key: "b1", outcome: Self.outcome(), now: t0)
        // Full: b1's outcome, the oldest, makes room.
        #expect(table.begin(key: "a3", deviceId: "a", fingerprint: "f", requestId: "r", eventTime: nil, now: t0) == .started)
        #expect(table.begin(key: "b3", deviceId: "b", fingerprint: "f", requestId: "r", eventTime: nil, now: t0) == .started)
        #expect(table.entries(deviceId: "a", since: t0, now: t0).map(\.key) == ["a2", "a3"])
        #expect(table.entries(deviceId: "b", since: t0, now: t0).map(\.key) == ["b2", "b3"])
        // An expired in-flight key taken again by another device moves to it; the others, past their
        // in-flight time but not forgotten, are still pending to their devices' polls.
        #expect(table.begin(key: "a2", deviceId: "b", fingerprint: "f", requestId: "r", eventTime: nil, now: t0 + 11) == .started)
        #expect(table.entries(deviceId: "a", since: t0, now: t0 + 11).map(\.key) == ["a3"])
        #expect(table.entries(deviceId: "b", since: t0, now: t0 + 11).map(\.key) == ["b2", "b3", "a2"])
        table.purgeExpired(now: t0 + 3_700)
        #expect(table.count == 0 && table.entries(deviceId: "b", since: t0, now: t0 + 3_700).isEmpty)
    }

    @Test func waitersGetTheOutcomeOrTimeOut() async {
        let table = IdempotencyTable()
        _ = table.begin(key: "k", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil)
        async let waited = table.waitForOutcome(key: "k", timeout: .seconds(60))
        try? await Task.sleep(for: .milliseconds(50))
        table.complete(key: "k", outcome: Self.outcome(.rejected))
        #expect(await waited?.outcome == .rejected)

        _ = table.begin(key: "slow", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil)
        let start = ContinuousClock.now
        #expect(await table.waitForOutcome(key: "slow", timeout: .milliseconds(100)) == nil)
        // Returns after its own timeout, not anyone else's (a generous bound: the suite runs beside 600 others).
        #expect(ContinuousClock.now - start < .seconds(30))

        // Abandoning wakes the waiters with nothing.
        async let abandoned = table.waitForOutcome(key: "slow", timeout: .seconds(60))
        try? await Task.sleep(for: .milliseconds(50))
        table.abandon(key: "slow", requestId: "r")
        #expect(await abandoned == nil)
        #expect(table.lookup(key: "slow", deviceId: "d") == nil)

        // A cancelled waiter returns at once.
        _ = table.begin(key: "c", deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil)
        let task = Task { await table.waitForOutcome(key: "c", timeout: .seconds(30)) }
        try? await Task.sleep(for: .milliseconds(50))
        task.cancel()
        #expect(await task.value == nil)
    }

    @Test func eachWaitEndsAtItsOwnDeadlineWhateverOtherWaitsArePending() async {
        let table = IdempotencyTable()
        for key in ["long", "short"] { _ = table.begin(key: key, deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil) }
        async let long = table.waitForOutcome(key: "long", timeout: .seconds(30))
        try? await Task.sleep(for: .milliseconds(20))
        // A shorter wait queued behind a longer one still ends at its own deadline.
        let start = ContinuousClock.now
        #expect(await table.waitForOutcome(key: "short", timeout: .milliseconds(100)) == nil)
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(100) && waited < .seconds(25))
        table.complete(key: "long", outcome: Self.outcome())
        #expect(await long?.outcome == .accepted)

        // Many waits at once all end, completed or timed out.
        let keys = (0..<500).map { "many-\($0)" }
        for key in keys { _ = table.begin(key: key, deviceId: "d", fingerprint: "f", requestId: "r", eventTime: nil) }
        await withTaskGroup(of: Bool.self) { group in
            for (i, key) in keys.enumerated() {
                group.addTask { await table.waitForOutcome(key: key, timeout: .milliseconds(i % 2 == 0 ? 50 : 5_000)) != nil }
            }
            try? await Task.sleep(for: .milliseconds(200))
            for (i, key) in keys.enumerated() where i % 2 == 1 { table.complete(key: key, outcome: Self.outcome()) }
            var answered = 0
            for await got in group where got { answered += 1 }
            #expect(answered == 250)
        }
    }

    @Test func tokenBucket() {
        let limiter = DeviceRateLimiter(settings: TokenBucketConfiguration(ratePerSecond: 2, burst: 3))
        let t0 = ContinuousClock.now
        #expect((0..<3).map { _ in limiter.acquire("d", now: t0) } == [.allowed, .allowed, .allowed])
        #expect(limiter.acquire("d", now: t0) == .limited(retryAfterSeconds: 1))
        #expect(limiter.acquire("other", now: t0) == .allowed)
        #expect(limiter.acquire("d", now: t0 + .milliseconds(500)) == .allowed)
        #expect(limiter.acquire("d", now: t0 + .milliseconds(500)) == .limited(retryAfterSeconds: 1))
        #expect(limiter.acquire("d", now: t0 + .seconds(10)) == .allowed)

        let slow = DeviceRateLimiter(settings: TokenBucketConfiguration(ratePerSecond: 0.1, burst: 1))
        #expect(slow.acquire("d", now: t0) == .allowed)
        #expect(slow.acquire("d", now: t0) == .limited(retryAfterSeconds: 10))
    }

    @Test func idleBucketsAreDropped() {
        let limiter = DeviceRateLimiter(settings: TokenBucketConfiguration(ratePerSecond: 10, burst: 1), maxDevices: 10)
        let t0 = ContinuousClock.now
        for i in 0..<10 { _ = limiter.acquire("d\(i)", now: t0) }
        _ = limiter.acquire("late", now: t0 + .seconds(5))
        #expect(limiter.trackedDevices == 1)
    }

    @Test func keys() throws {
        let ts = Date(timeIntervalSince1970: 1_790_000_000)
        let checkIn = IdempotencyKeys.derived(kind: .checkIn, userId: "u", sessionKey: "s")
        #expect(checkIn.count == 64)
        #expect(checkIn == IdempotencyKeys.sha256Hex(Array("v1|check_in|u|s".utf8)))
        #expect(IdempotencyKeys.derived(kind: .checkOut, userId: "u", sessionKey: "s") != checkIn)
        #expect(IdempotencyKeys.derived(kind: .checkIn, userId: "u2", sessionKey: "s") != checkIn)
        #expect(
            IdempotencyKeys.derived(kind: .heartbeat, userId: "u", sessionKey: "s", ts: ts)
                != IdempotencyKeys.derived(kind: .heartbeat, userId: "u", sessionKey: "s", ts: ts + 30))
        #expect(
            IdempotencyKeys.derived(kind: .heartbeat, userId: "u", sessionKey: "s", ts: ts)
                == IdempotencyKeys.sha256Hex(Array("v1|heartbeat|u|s|\(WireTimestamp.string(from: ts))".utf8)))

        #expect(IdempotencyKeys.parseHeader("\"abc-1\"") == "abc-1")
        #expect(IdempotencyKeys.parseHeader("abc def") == nil)
        #expect(IdempotencyKeys.parseHeader("") == nil)
        #expect(IdempotencyKeys.parseHeader(String(repeating: "a", count: 129)) == nil)
        #expect(IdempotencyKeys.parseHeader("hb.2025-09-18T06:35:12Z") == "hb.2025-09-18T06:35:12Z")

        // The fingerprint ignores member order and whitespace: it hashes the canonical encoding.
        let payload = RawEventPayload.heartbeat(HeartbeatRequest(sessionKey: "s", ts: ts))
        let reordered = try ProtocolCodec.wire.decode(
            HeartbeatRequest.self, from: #"{ "ts": "\#(WireTimestamp.string(from: ts))",  "sessionKey": "s" }"#)
        #expect(try IdempotencyKeys.fingerprint(payload) == IdempotencyKeys.fingerprint(.heartbeat(reordered)))
        #expect(
            try IdempotencyKeys.fingerprint(payload)
                == IdempotencyKeys.sha256Hex(Array(#"{"sessionKey":"s","ts":"\#(WireTimestamp.string(from: ts))"}"#.utf8)))
    }
}
