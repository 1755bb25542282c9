import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayCore
import LocalStackTesting
import RegistryFeed
import Synchronization
import Testing

@testable import IngestGatewayService

@Suite("Gateway event flow (router, fake pipeline)")
struct EventFlowTests {
    @Test("a new event is produced once and answered 201 with the receipt and session")
    func accepted() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let response = try await client.postEvent(event, as: device)
            let body = try response.decode(AcceptedResponse.self, status: 201)
            #expect(body.status == .accepted)
            #expect(body.serverReceiptId == "rcpt_\(event.idempotencyKey.prefix(12))")
            #expect(body.sessionId == "ses_\(device.userId)")
            #expect(response.header(HTTPHeader.requestId) != nil)
            #expect(response.header(HTTPHeader.idempotentReplayed) == nil)

            let envelopes = h.fake.envelopes
            #expect(envelopes.count == 1)
            let envelope = try #require(envelopes.first)
            #expect(envelope.idempotencyKey == event.idempotencyKey)
            #expect(envelope.userId == device.userId)
            #expect(envelope.partitionKey.value == device.userId)
            #expect(envelope.deviceId == device.deviceId)
            #expect(envelope.gatewayInstance == h.pipeline.instanceId)
            #expect(envelope.appVersion == "1.12.0")
            #expect(envelope.requestId == response.header(HTTPHeader.requestId))
            #expect(envelope.payload == .event(event))
            // Unknown beacon: the payload's own site.
            #expect(envelope.siteId == "S_HQ")
            let canonical = try ProtocolCodec.canonical.encode(event)
            #expect(envelope.payloadFingerprint == IdempotencyKeys.sha256Hex(canonical))
        }
    }

    @Test("the site comes from the beacon through the registry feed")
    func siteFromBeacon() async throws {
        try await RouterHarness.run { h, client in
            RegistryRecords.place(h.cache, beaconUUID: Sample.beaconUUID, major: 10, minor: 3, site: "site_resolved")
            let device = TestDevice.make()
            let response = try await client.postEvent(Sample.event(for: device), as: device)
            #expect(response.status.code == 201)
            #expect(h.fake.envelopes.first?.siteId == "site_resolved")
        }
    }

    @Test("no verdict within the wait: 202 with Location, then the status endpoint tells pending, then the outcome")
    func queuedThenStatus() async throws {
        try await RouterHarness.run(settings: RouterHarness.settings(wait: .milliseconds(150))) { h, client in
            h.fake.set(.silent)
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let response = try await client.postEvent(event, as: device)
            let body = try response.decode(AcceptedResponse.self, status: 202)
            let url = APIPath.event(idempotencyKey: event.idempotencyKey)
            #expect(body.status == .queued)
            #expect(body.statusUrl == url)
            #expect(body.serverReceiptId == nil)
            #expect(response.headers[.location] == url)

            let pending = try await client.device(.get, url, as: device).decode(EventOutcomeResponse.self, status: 200)
            #expect(pending.status == .pending)
            #expect(pending.httpStatus == 202)

            // A repeat while the verdict is outstanding is in flight.
            let repeatWhileQueued = try await client.postEvent(event, as: device)
            try repeatWhileQueued.problem(409, .inFlight)

            // The verdict arrives late: the status endpoint has it, and a repeat replays it.
            let produced = try #require(h.fake.envelopes.first)
            let verdict = try #require(FakePipeline.verdict(for: produced, .accept))
            #expect(h.pipeline.receive(verdict))
            let done = try await client.device(.get, url, as: device).decode(EventOutcomeResponse.self, status: 200)
            #expect(done.status == .accepted)
            #expect(done.httpStatus == 201)
            #expect(done.serverReceiptId == verdict.serverReceiptId)
            #expect(done.sessionId == verdict.sessionId)

            let replay = try await client.postEvent(event, as: device)
            #expect(try replay.decode(AcceptedResponse.self, status: 200).serverReceiptId == verdict.serverReceiptId)
            #expect(replay.header(HTTPHeader.idempotentReplayed) == "true")
            #expect(h.fake.envelopes.count == 1)

            // Another device does not see it.
            let stranger = TestDevice.make()
            try await client.device(.get, url, as: stranger).problem(404, .notFound)
        }
    }

    @Test("a repeat after the outcome replays it: 200, Idempotent-Replayed, the original receipt, nothing produced")
    func replay() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let first = try await client.postEvent(event, as: device).decode(AcceptedResponse.self, status: 201)
            let again = try await client.postEvent(event, as: device)
            let replayed = try again.decode(AcceptedResponse.self, status: 200)
            #expect(again.header(HTTPHeader.idempotentReplayed) == "true")
            #expect(replayed.serverReceiptId == first.serverReceiptId)
            #expect(replayed.sessionId == first.sessionId)
            #expect(replayed.status == .accepted)
            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("a key this instance forgot is produced again and the merger's duplicate is a 200 with the original receipt")
    func duplicateFromMerger() async throws {
        try await RouterHarness.run { h, client in
            h.fake.set(.duplicate(receipt: "rcpt_original"))
            let device = TestDevice.make()
            let response = try await client.postEvent(Sample.event(for: device), as: device)
            let body = try response.decode(AcceptedResponse.self, status: 200)
            #expect(body.status == .duplicate)
            #expect(body.serverReceiptId == "rcpt_original")
            #expect(response.header(HTTPHeader.idempotentReplayed) == "true")
        }
    }

    @Test("the same key with another payload is a 422, after the outcome and while in flight")
    func payloadMismatch() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            #expect(try await client.postEvent(event, as: device).status.code == 201)
            var other = event
            other.rssiSeries = [-60, -61]
            try await client.postEvent(other, as: device).problem(422, .payloadMismatch)

            h.fake.set(.accept, delay: .milliseconds(600))
            let slow = Sample.event(for: device)
            async let first = client.postEvent(slow, as: device)
            // The first request is in flight once the (slow) merger holds it.
            try await eventually("the first request in flight") { h.fake.envelopes.count == 2 }
            var changed = slow
            changed.type = .checkout
            try await client.postEvent(changed, as: device).problem(422, .payloadMismatch)
            #expect(try await first.status.code == 201)
            #expect(h.fake.envelopes.count == 2)
        }
    }

    @Test("two concurrent requests with the same key: one is answered, the other is 409 in flight (not a policy conflict)")
    func inFlight() async throws {
        try await RouterHarness.run { h, client in
            h.fake.set(.accept, delay: .milliseconds(500))
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            async let a = client.postEvent(event, as: device)
            async let b = client.postEvent(event, as: device)
            let responses = try await [a, b]
            let statuses = responses.map(\.status.code).sorted()
            #expect(statuses == [201, 409])
            let conflict = try #require(responses.first { $0.status.code == 409 })
            let problem = try conflict.problem(409, .inFlight)
            #expect(problem.type != ProblemType.policyConflict.uri)
            #expect(problem.action == .retryAfter)
            #expect(conflict.headers[.retryAfter] == "2")
            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("a policy refusal is a 409 problem with the reasons and the app's action, and is replayed as such")
    func policyConflict() async throws {
        try await RouterHarness.run { h, client in
            h.fake.set(.reject(reasons: ["beacon seen but outside the geofence"], action: .walkToGate))
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let problem = try await client.postEvent(event, as: device).problem(409, .policyConflict)
            #expect(problem.reasons == ["beacon seen but outside the geofence"])
            #expect(problem.action == .walkToGate)
            #expect(problem.instance == APIPath.event(idempotencyKey: event.idempotencyKey))

            let again = try await client.postEvent(event, as: device)
            #expect(try again.problem(409, .policyConflict).action == .walkToGate)
            #expect(again.header(HTTPHeader.idempotentReplayed) == "true")

            let status = try await client.device(.get, APIPath.event(idempotencyKey: event.idempotencyKey), as: device)
                .decode(EventOutcomeResponse.self, status: 200)
            #expect(status.status == .rejected)
            #expect(status.httpStatus == 409)
            #expect(status.action == .walkToGate)
            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("a failed produce is a 503 with Retry-After; nothing is remembered, so the retry goes through")
    func produceFailure() async throws {
        try await RouterHarness.run { h, client in
            h.fake.set(.fail)
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let response = try await client.postEvent(event, as: device)
            try response.problem(503, .unavailable)
            #expect(response.headers[.retryAfter] == "2")
            h.fake.set(.accept)
            #expect(try await client.postEvent(event, as: device).status.code == 201)
        }
    }

    @Test("the batch form answers one result per event, in order")
    func batch() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let good = Sample.event(for: device)
            var bad = Sample.event(for: device)
            bad.rssiSeries = [-70, 12]
            let second = Sample.event(for: device)
            var clash = good
            clash.rssiSeries = [-50]
            let request = BatchEventsRequest(events: [good, bad, second, good, clash])
            let response = try await client.device(.post, APIPath.eventsBatch, as: device, body: Sample.json(request))
            let results = try response.decode(BatchEventsResponse.self, status: 200).results
            #expect(results.map(\.status) == [201, 400, 201, 200, 422])
            #expect(results.map(\.idempotencyKey) == request.events.map(\.idempotencyKey))
            try #require(results.count > 1)
            guard case .problem(let problem) = results[1].body else {
                Issue.record("expected a problem for the invalid item")
                return
            }
            #expect(problem.errors?.map(\.field) == ["events[1].rssiSeries[1]"])
            try #require(results.count > 3)
            guard case .accepted(let accepted) = results[0].body, case .accepted(let repeated) = results[3].body else {
                Issue.record("expected receipts")
                return
            }
            #expect(accepted.serverReceiptId == repeated.serverReceiptId)
            #expect(h.fake.envelopes.count == 2)

            // Batch-level problems: empty, too many, not an object.
            try await client.device(.post, APIPath.eventsBatch, as: device, body: #"{"events":[]}"#).problem(400, .validation)
            let tooMany = BatchEventsRequest(events: (0...100).map { _ in Sample.event(for: device) })
            let tooManyProblem = try await client.device(.post, APIPath.eventsBatch, as: device, body: Sample.json(tooMany)).problem(
                400, .validation)
            #expect(tooManyProblem.errors?.first?.field == "events")
        }
    }

    @Test("session contracts: keys derived from the session key, check-in site, replays, heartbeats by ts")
    func contracts() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let now = Sample.now()
            let checkIn = CheckInRequest(
                userId: device.userId, siteId: "S_HQ", ts: now, sessionKey: "sk_\(device.deviceId)",
                deviceMeta: DeviceMeta(model: "iPhone14,5", os: "iOS 18.0", appVersion: "1.12.0")
            )
            let first = try await client.device(.post, APIPath.checkIn, as: device, body: Sample.json(checkIn))
            #expect(try first.decode(AcceptedResponse.self, status: 201).status == .accepted)
            let derived = IdempotencyKeys.derived(kind: .checkIn, userId: device.userId, sessionKey: checkIn.sessionKey)
            #expect(first.header(HTTPHeader.idempotencyKey) == derived)
            let envelope = try #require(h.fake.envelopes.last)
            #expect(envelope.idempotencyKey == derived)
            #expect(envelope.payload == .checkIn(checkIn))
            #expect(envelope.siteId == "S_HQ")

            let again = try await client.device(.post, APIPath.checkIn, as: device, body: Sample.json(checkIn))
            #expect(again.status.code == 200)
            #expect(again.header(HTTPHeader.idempotentReplayed) == "true")

            for offset in [60.0, 120.0] {
                let heartbeat = HeartbeatRequest(sessionKey: checkIn.sessionKey, ts: now.addingTimeInterval(offset))
                #expect(try await client.device(.post, APIPath.heartbeat, as: device, body: Sample.json(heartbeat)).status.code == 201)
            }
            let checkOut = CheckOutRequest(sessionKey: checkIn.sessionKey, ts: now.addingTimeInterval(180), reason: .regionExit)
            let out = try await client.device(.post, APIPath.checkOut, as: device, body: Sample.json(checkOut))
            #expect(out.status.code == 201)
            #expect(h.fake.envelopes.map(\.payload.kind) == [.checkIn, .heartbeat, .heartbeat, .checkOut])
            #expect(Set(h.fake.envelopes.map(\.idempotencyKey)).count == 4)
            #expect(h.fake.envelopes.last?.siteId == nil)

            // A header wins over the derived key, scoped to the user; the answer echoes it.
            let explicit = Sample.key()
            let second = CheckOutRequest(sessionKey: checkIn.sessionKey, ts: now.addingTimeInterval(240), reason: .manual)
            let withHeader = try await client.device(.post, APIPath.checkOut, as: device, body: Sample.json(second), key: explicit)
            #expect(withHeader.status.code == 201)
            #expect(withHeader.header(HTTPHeader.idempotencyKey) == explicit)
            #expect(
                h.fake.envelopes.last?.idempotencyKey
                    == IdempotencyKeys.scoped(header: explicit, userId: device.userId, deviceId: device.deviceId))

            // Someone else's check-in.
            var foreign = checkIn
            foreign.userId = "usr_other"
            foreign.sessionKey = "sk_other"
            let problem = try await client.device(.post, APIPath.checkIn, as: device, body: Sample.json(foreign)).problem(403, .forbidden)
            #expect(problem.errors?.first?.field == "userId")
        }
    }

    @Test("a contract's header key is the device's own: two users, or a user's new phone, sending hb-1 are separate events")
    func headerKeysAreScopedToTheDevice() async throws {
        try await RouterHarness.run { h, client in
            let now = Sample.now()
            var keys: [String] = []
            let first = TestDevice.make()
            // The same user re-enrolled on a new phone, whose counter starts at hb-1 again.
            let newPhone = TestDevice(
                deviceId: "dev_new_\(first.userId)", userId: first.userId,
                token: TestKeys.token(device: "dev_new_\(first.userId)", user: first.userId))
            for device in [first, TestDevice.make(), newPhone] {
                let heartbeat = HeartbeatRequest(sessionKey: "sk_shared", ts: now)
                let answer = try await client.device(.post, APIPath.heartbeat, as: device, body: Sample.json(heartbeat), key: "hb-1")
                #expect(answer.status.code == 201, "\(answer.text)")
                #expect(answer.header(HTTPHeader.idempotentReplayed) == nil)
                let envelope = try #require(h.fake.envelopes.last)
                #expect(envelope.userId == device.userId)
                keys.append(envelope.idempotencyKey)
                // The sender finds its request by the key it sent.
                let found = try await client.device(.get, APIPath.event(idempotencyKey: "hb-1"), as: device)
                #expect(try found.decode(EventOutcomeResponse.self, status: 200).idempotencyKey == envelope.idempotencyKey)
            }
            #expect(h.fake.envelopes.count == 3)
            #expect(Set(keys).count == 3)
        }
    }

    @Test("telemetry is produced with the authenticated device and answered 202")
    func telemetry() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let upload = TelemetryUploadRequest(
                appVersion: "1.12.0", deviceModel: "iPhone14,5", osVersion: "iOS 18.0", siteId: "S_HQ",
                events: [
                    TelemetryEvent(eventId: "e1", name: .regionEnter, at: Sample.now().addingTimeInterval(-30)),
                    TelemetryEvent(eventId: "e2", name: .api201, at: Sample.now().addingTimeInterval(-29), value: 180),
                ]
            )
            let response = try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(upload))
            #expect(try response.decode(TelemetryUploadResponse.self, status: 202).accepted == 2)
            let batch = try #require(h.fake.telemetry.first)
            #expect(batch.deviceId == device.deviceId)
            #expect(batch.partitionKey.value == device.deviceId)
            #expect(batch.userId == device.userId)
            #expect(batch.batchId == response.header(HTTPHeader.requestId))
            #expect(batch.events == upload.events)

            var bad = upload
            bad.events = []
            try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(bad)).problem(400, .validation)
            // The site is kept only when it is one of the user's: a site the registry does not give them
            // (another organization's, say) does not label the aggregator's per-site figures.
            #expect(batch.siteId == nil)
            h.cache.apply(
                RegistryRecords.upsert(
                    RegistryEntityType(rawValue: "user"), device.userId, version: 1,
                    ["id": .string(device.userId), "siteIds": .array([.string("S_HQ")])]))
            _ = try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(upload))
            #expect(h.fake.telemetry.last?.siteId == "S_HQ")
            var elsewhere = upload
            elsewhere.siteId = "S_OTHER_ORG"
            _ = try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(elsewhere))
            #expect(h.fake.telemetry.count == 3 && h.fake.telemetry.last?.siteId == nil)

            h.fake.state.withLock { $0.failTelemetry = true }
            try await client.device(.post, APIPath.telemetry, as: device, body: Sample.json(upload)).problem(503, .unavailable)
            #expect(h.fake.telemetry.count == 3)
        }
    }

    @Test("pending: the device's stored outcomes, its requests in flight, and the user's open sessions")
    func pending() async throws {
        try await RouterHarness.run(settings: RouterHarness.settings(wait: .milliseconds(50))) { h, client in
            let device = TestDevice.make()
            let since = Sample.now().addingTimeInterval(-3_600)
            let stored = EventOutcomeResponse(
                idempotencyKey: Sample.key(), status: .accepted, httpStatus: 201, serverReceiptId: "rcpt_1", sessionId: "ses_1",
                eventTime: since.addingTimeInterval(60), receivedAt: since.addingTimeInterval(70), decidedAt: since.addingTimeInterval(71)
            )
            let old = EventOutcomeResponse(
                idempotencyKey: Sample.key(), status: .accepted, httpStatus: 201, serverReceiptId: "rcpt_0",
                receivedAt: since.addingTimeInterval(-10)
            )
            h.repository.outcomes.withLock {
                $0[stored.idempotencyKey] = (device.deviceId, stored)
                $0[old.idempotencyKey] = (device.deviceId, old)
            }
            let session = SessionSummary(
                sessionId: "ses_1", siteId: "S_HQ", sessionKey: "sk_1", state: .open, checkInAt: since.addingTimeInterval(60))
            h.repository.sessions.withLock { $0[device.userId] = [session] }
            h.fake.set(.silent)
            let queued = Sample.event(for: device)
            #expect(try await client.postEvent(queued, as: device).status.code == 202)

            let uri = "\(APIPath.pending)?since=\(WireTimestamp.string(from: since))"
            let pending = try await client.device(.get, uri, as: device).decode(PendingResponse.self, status: 200)
            #expect(pending.deviceId == device.deviceId)
            #expect(pending.events.map(\.idempotencyKey) == [stored.idempotencyKey, queued.idempotencyKey])
            #expect(pending.events.map(\.status) == [.accepted, .pending])
            #expect(pending.openSessions == [session])
            // The next `since` stops at the request still pending, so the next poll shows its outcome.
            let queuedAt = try #require(pending.events.last?.receivedAt)
            // Both travel to the millisecond: `asOf` is the receipt's, rounded down, so at most a rounding
            // step on each side apart.
            #expect(pending.asOf <= queuedAt && queuedAt.timeIntervalSince(pending.asOf) < 0.002)
            let again = try await client.device(.get, "\(APIPath.pending)?since=\(WireTimestamp.string(from: pending.asOf))", as: device)
                .decode(PendingResponse.self, status: 200)
            #expect(again.events.map(\.idempotencyKey) == [queued.idempotencyKey])

            let problem = try await client.device(.get, APIPath.pending, as: device).problem(400, .validation)
            #expect(problem.errors?.first?.field == "since")
            try await client.device(.get, "\(APIPath.pending)?since=yesterday", as: device).problem(400, .validation)
            // One `since`, nothing else: never the first of two, nor an unknown parameter ignored.
            let twice = "\(APIPath.pending)?since=\(WireTimestamp.string(from: since))&since=2030-01-01T00:00:00Z"
            #expect(try await client.device(.get, twice, as: device).problem(400, .validation).errors?.first?.field == "since")
            try await client.device(.get, "\(uri)&sicne=x", as: device).problem(400, .validation)
        }
    }

    /// A poll's `asOf` travels to the millisecond, and so does the receipt the merger stores: a poll
    /// answers its `asOf` rounded down, and a request received after it in the same millisecond is kept at
    /// that millisecond, so the next poll lists it.
    @Test("a request received within a poll's millisecond is in the next poll")
    func aRequestInAPollsMillisecondIsInTheNextPoll() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_758_177_312.1226))
        try await RouterHarness.run(settings: RouterHarness.settings(wait: .milliseconds(10)), now: { clock.withLock { $0 } }) {
            h, client in
            let device = TestDevice.make()
            h.fake.set(.silent)
            let before = try #require(WireTimestamp.date(from: "2025-09-18T06:35:00Z"))
            let first = try await client.device(.get, "\(APIPath.pending)?since=\(WireTimestamp.string(from: before))", as: device)
                .decode(PendingResponse.self, status: 200)
            #expect(WireTimestamp.string(from: first.asOf) == "2025-09-18T06:35:12.122Z")
            #expect(first.events.isEmpty)

            let event = Sample.event(for: device)
            let submission = IngestPipeline.Submission(
                idempotencyKey: event.idempotencyKey, payload: .event(event),
                device: AuthenticatedDevice(deviceId: device.deviceId, userId: device.userId, tokenExpiresAt: .distantFuture),
                appVersion: "1.12.0", requestId: "req-ms")
            let received = Date(timeIntervalSince1970: 1_758_177_312.1228)
            clock.withLock { $0 = received }
            _ = await h.pipeline.submit(submission, now: received)
            let next = try await client.device(.get, "\(APIPath.pending)?since=\(WireTimestamp.string(from: first.asOf))", as: device)
                .decode(PendingResponse.self, status: 200)
            #expect(next.events.map(\.idempotencyKey) == [event.idempotencyKey])
            // The receipt as the merger will store it: a poll from that millisecond lists it too.
            #expect(next.events.first?.receivedAt == WireTimestamp.date(from: "2025-09-18T06:35:12.123Z"))
            let exact = try await client.device(.get, "\(APIPath.pending)?since=2025-09-18T06:35:12.123Z", as: device)
                .decode(PendingResponse.self, status: 200)
            #expect(exact.events.map(\.idempotencyKey) == [event.idempotencyKey])
        }
    }

    @Test("the status endpoint falls back to the merger's table, and 404 for an unknown key")
    func statusFromStore() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let stored = EventOutcomeResponse(
                idempotencyKey: Sample.key(), status: .rejected, httpStatus: 409, reasons: ["too soon"], action: .retryAfter,
                receivedAt: Sample.now(), decidedAt: Sample.now()
            )
            h.repository.outcomes.withLock { $0[stored.idempotencyKey] = (device.deviceId, stored) }
            let found = try await client.device(.get, APIPath.event(idempotencyKey: stored.idempotencyKey), as: device)
                .decode(EventOutcomeResponse.self, status: 200)
            #expect(found == stored)
            try await client.device(.get, APIPath.event(idempotencyKey: Sample.key()), as: device).problem(404, .notFound)
        }
    }
}

/// Registry records as the registry publishes them (payload field names of `RegistryFeed`).
enum RegistryRecords {
    static func upsert(_ type: RegistryEntityType, _ id: String, version: Int64, _ payload: [String: JSONValue]) -> RegistryRecord {
        .upsert(RegistryChange(entityType: type, entityId: id, version: version, changedAt: Date(), payload: .object(payload)))
    }

    static func place(_ cache: RegistryCache, beaconUUID: String, major: Int, minor: Int, site: String) {
        cache.apply([
            upsert(
                RegistryEntityType(rawValue: "gate"), "gate_\(site)", version: 1,
                ["id": .string("gate_\(site)"), "siteId": .string(site), "name": .string("Main")]),
            upsert(
                RegistryEntityType(rawValue: "beacon"), "bcn_\(site)", version: 1,
                [
                    "id": .string("bcn_\(site)"), "uuid": .string(beaconUUID), "major": .integer(Int64(major)),
                    "minor": .integer(Int64(minor)), "status": .string("active"), "gateId": .string("gate_\(site)"),
                ]),
        ])
    }

    static func device(_ cache: RegistryCache, _ device: TestDevice, status: String, version: Int64, userId: String? = nil) {
        cache.apply(
            upsert(
                RegistryEntityType(rawValue: "device"), device.deviceId, version: version,
                [
                    "id": .string(device.deviceId), "userId": .string(userId ?? device.userId), "status": .string(status),
                ]))
    }
}
