import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayCore
import IngestGatewayService
import RegistryFeed
import Testing

/// Every refused input: the right status, the right problem type naming the field, and nothing
/// produced.
@Suite("Gateway refusals (router, fake pipeline)")
struct BadInputTests {
    @Test("authentication: missing, malformed, forged, expired tokens are 401; a wrong X-Device-Id is 403")
    func authentication() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            let body = Sample.json(event)

            let none = try await client.device(.post, APIPath.events, as: nil, body: body, key: event.idempotencyKey)
            try none.problem(401, .unauthorized)
            #expect(none.headers[.wwwAuthenticate] == "Bearer")
            // Answered from the headers: the body of a client that may not send is never read (a control
            // character in it would be a 400 once authenticated).
            try await client.device(.post, APIPath.events, as: nil, body: #"{"a":"\u0000"}"#, key: event.idempotencyKey)
                .problem(401, .unauthorized)

            for token in [
                "garbage", "v1.e30.AAAA", TestKeys.token(device: device.deviceId, user: device.userId, signer: TestKeys.foreignSigner),
            ] {
                try await client.device(.post, APIPath.events, as: device, body: body, key: event.idempotencyKey, token: token).problem(
                    401, .unauthorized)
            }
            // Tampered: another device's claims with this token's signature.
            let genuine = device.token.split(separator: ".")
            let other = TestKeys.token(device: "dev_other", user: device.userId).split(separator: ".")
            let tampered = "\(genuine[0]).\(other[1]).\(genuine[2])"
            try await client.device(.post, APIPath.events, as: device, body: body, key: event.idempotencyKey, token: tampered).problem(
                401, .unauthorized)

            let expired = TestKeys.token(
                device: device.deviceId, user: device.userId, issuedAt: Date().addingTimeInterval(-7_200), lifetime: .seconds(3_600))
            let expiredProblem = try await client.device(
                .post, APIPath.events, as: device, body: body, key: event.idempotencyKey, token: expired
            )
            .problem(401, .unauthorized)
            #expect(expiredProblem.detail?.contains("expired") == true)

            let basic = try await client.device(
                .post, APIPath.events, as: device, body: body, key: event.idempotencyKey, token: nil, extra: [:])
            #expect(basic.status.code == 201) // sanity: the genuine token works

            let wrong = try await client.device(
                .post, APIPath.events, as: device, body: Sample.json(Sample.event(for: device)), key: Sample.key(),
                deviceIdHeader: "dev_someone_else")
            let problem = try wrong.problem(403, .forbidden)
            #expect(problem.errors?.first?.field == HTTPHeader.deviceId)

            let missing = try await client.execute(
                uri: APIPath.events, method: .post,
                headers: [
                    .authorization: "Bearer \(device.token)", .contentType: MediaType.json,
                    HTTPFieldName(HTTPHeader.idempotencyKey)!: event.idempotencyKey,
                ], body: .init(string: body))
            #expect(try missing.problem(400, .validation).errors?.first?.field == HTTPHeader.deviceId)

            // The body must be this device's and this user's.
            var foreignDevice = Sample.event(for: device)
            foreignDevice.deviceId = "dev_other"
            let p1 = try await client.postEvent(foreignDevice, as: device).problem(403, .forbidden)
            #expect(p1.errors?.first?.field == "deviceId")
            var foreignUser = Sample.event(for: device)
            foreignUser.userId = "usr_other"
            let p2 = try await client.postEvent(foreignUser, as: device).problem(403, .forbidden)
            #expect(p2.errors?.first?.field == "userId")

            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("a device revoked on the registry feed is refused within the feed's delay; unknown devices with a genuine token pass")
    func revokedDevice() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            #expect(try await client.postEvent(Sample.event(for: device), as: device).status.code == 201)
            RegistryRecords.device(h.cache, device, status: "enrolled", version: 1)
            #expect(try await client.postEvent(Sample.event(for: device), as: device).status.code == 201)
            RegistryRecords.device(h.cache, device, status: "revoked", version: 2)
            let problem = try await client.postEvent(Sample.event(for: device), as: device).problem(403, .forbidden)
            #expect(problem.action == .contactAdmin)
            try await client.device(.get, APIPath.event(idempotencyKey: Sample.key()), as: device).problem(403, .forbidden)

            let rebound = TestDevice.make()
            RegistryRecords.device(h.cache, rebound, status: "enrolled", version: 1, userId: "usr_new_owner")
            try await client.postEvent(Sample.event(for: rebound), as: rebound).problem(403, .forbidden)
            #expect(h.fake.envelopes.count == 2)
        }
    }

    @Test("idempotency header: missing is 400 missing-idempotency-key, malformed or unequal to the body's key is 400")
    func idempotencyHeader() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device)
            try await client.device(.post, APIPath.events, as: device, body: Sample.json(event), key: nil).problem(
                400, .missingIdempotencyKey)
            let bad = try await client.device(.post, APIPath.events, as: device, body: Sample.json(event), key: "has space").problem(
                400, .validation)
            #expect(bad.errors?.first?.field == HTTPHeader.idempotencyKey)
            let long = try await client.device(
                .post, APIPath.events, as: device, body: Sample.json(event), key: String(repeating: "a", count: 129)
            )
            .problem(400, .validation)
            #expect(long.errors?.first?.field == HTTPHeader.idempotencyKey)
            let other = try await client.device(.post, APIPath.events, as: device, body: Sample.json(event), key: Sample.key()).problem(
                400, .validation)
            #expect(other.errors?.first?.field == "idempotencyKey")
            // The draft's quoted form is the same key.
            let quoted = try await client.device(
                .post, APIPath.events, as: device, body: Sample.json(event), key: "\"\(event.idempotencyKey)\"")
            #expect(quoted.status.code == 201)
            #expect(h.fake.envelopes.count == 1)
        }
    }

    /// One invalid body per case: (what, mutation, expected field).
    static let invalidEvents: [(String, @Sendable (inout AttendanceEvent) -> Void, String)] = [
        ("RSSI above 0", { $0.rssiSeries = [-70, 5] }, "rssiSeries[1]"),
        ("RSSI below -127", { $0.rssiSeries = [-128, -70] }, "rssiSeries[0]"),
        ("too many RSSI readings", { $0.rssiSeries = Array(repeating: -70, count: 601) }, "rssiSeries"),
        ("event time 8 days ago", { $0.timestamp = Date().addingTimeInterval(-8 * 86_400) }, "timestamp"),
        ("event time 2 days ahead", { $0.timestamp = Date().addingTimeInterval(2 * 86_400) }, "timestamp"),
        ("malformed beacon UUID", { $0.beacon.uuid = "not-a-uuid" }, "beacon.uuid"),
        ("minor out of range", { $0.beacon.minor = 70_000 }, "beacon.minor"),
        ("oversized device model", { $0.device = .init(model: String(repeating: "x", count: 200), os: "iOS 18.0") }, "device.model"),
        ("oversized site id", { $0.siteId = String(repeating: "s", count: 129) }, "siteId"),
        ("idempotency key not a sha256", { $0.idempotencyKey = "abc" }, "idempotencyKey"),
    ]

    @Test("invalid events are 400 naming the field, nothing produced", arguments: 0..<BadInputTests.invalidEvents.count)
    func invalidEvent(_ index: Int) async throws {
        let (what, mutate, field) = Self.invalidEvents[index]
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            var event = Sample.event(for: device)
            mutate(&event)
            let problem = try await client.postEvent(event, as: device).problem(400, .validation)
            #expect(problem.errors?.map(\.field).contains(field) == true, "\(what): \(problem.errors ?? [])")
            #expect(h.fake.envelopes.isEmpty, "\(what)")
        }
    }

    @Test("an event whose only fault is a time ahead of the server's clock (by up to a day) is 425 with Retry-After, never a final 400")
    func aheadOfTheServersClock() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            // 10 minutes ahead (the event's own stamp is 5 s before the time given): taken in about 5.
            let early = Sample.event(for: device, at: Date().addingTimeInterval(605))
            let sent = Date()
            let response = try await client.postEvent(early, as: device)
            let answered = Date()
            let problem = try response.problem(425, .tooEarly)
            let retryAfter = try #require(response.headers[.retryAfter].flatMap { Int($0) })
            // The wait is until the event time is no more than 5 minutes ahead, in whole seconds, as of
            // when the gateway answered (between sending and the answer, on a busy machine).
            let ahead = early.timestamp.timeIntervalSince1970 - 300
            let bounds =
                Int((ahead - answered.timeIntervalSince1970).rounded(.down))...Int((ahead - sent.timeIntervalSince1970).rounded(.up) + 1)
            #expect(bounds.contains(retryAfter), "Retry-After \(retryAfter), expected \(bounds)")
            #expect(problem.retryAfterSeconds == retryAfter && problem.action == .retryAfter)
            // Anything else wrong with it, or further ahead than a day: the usual 400.
            var alsoBroken = early
            alsoBroken.beacon.minor = 70_000
            alsoBroken.idempotencyKey = Sample.key()
            let broken = try await client.postEvent(alsoBroken, as: device).problem(400, .validation)
            #expect(broken.errors?.map(\.field).sorted() == ["beacon.minor", "timestamp"])
            try await client.postEvent(Sample.event(for: device, at: Date().addingTimeInterval(90_000)), as: device).problem(
                400, .validation)
            // Another user's early event is refused as another user's, so the phone can set it aside.
            var foreign = Sample.event(for: device, at: Date().addingTimeInterval(605))
            foreign.userId = "usr_other"
            try await client.postEvent(foreign, as: device).problem(403, .forbidden)
            // The batch form answers the item the same way; the session contracts too.
            let batch = BatchEventsRequest(events: [
                Sample.event(for: device), Sample.event(for: device, at: Date().addingTimeInterval(605)),
            ])
            let results = try await client.device(.post, APIPath.eventsBatch, as: device, body: Sample.json(batch))
                .decode(BatchEventsResponse.self, status: 200).results
            #expect(results.map(\.status) == [201, 425])
            let checkIn = CheckInRequest(
                userId: device.userId, siteId: "S_HQ", ts: Date().addingTimeInterval(600), sessionKey: "sk_\(device.deviceId)",
                deviceMeta: DeviceMeta(model: "iPhone14,5", os: "iOS 18.0", appVersion: "1.12.0"))
            try await client.device(.post, APIPath.checkIn, as: device, body: Sample.json(checkIn)).problem(425, .tooEarly)
            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("the event-time window is configurable")
    func configurableWindow() async throws {
        var settings = RouterHarness.settings()
        settings.limits.maxEventAge = .seconds(3_600)
        try await RouterHarness.run(settings: settings) { h, client in
            let device = TestDevice.make()
            let event = Sample.event(for: device, at: Date().addingTimeInterval(-7_200))
            let problem = try await client.postEvent(event, as: device).problem(400, .validation)
            #expect(problem.errors?.first?.field == "timestamp")
            #expect(h.fake.envelopes.isEmpty)
        }
    }

    @Test(
        "body shape: malformed JSON, missing and wrongly typed fields are 400 naming the field; other media types are 415; over 64 KiB is 413"
    )
    func bodies() async throws {
        try await RouterHarness.run { h, client in
            let device = TestDevice.make()
            let key = Sample.key()
            let malformed = try await client.device(.post, APIPath.events, as: device, body: #"{"id": "x", "#, key: key).problem(
                400, .validation)
            #expect(malformed.errors?.first?.field == "")
            let missing = try await client.device(.post, APIPath.events, as: device, body: #"{"id":"x"}"#, key: key).problem(
                400, .validation)
            #expect(missing.errors?.first?.field == "idempotencyKey")
            var event = Sample.event(for: device, key: key)
            let json = Sample.json(event).replacingOccurrences(of: #""major":10"#, with: #""major":"ten""#)
            let typed = try await client.device(.post, APIPath.events, as: device, body: json, key: key).problem(400, .validation)
            #expect(typed.errors?.first?.field == "beacon.major")
            // Control characters anywhere in the body's strings are refused at the edge, naming the field.
            for (from, to, field) in [
                (#""type":"checkin""#, #""type":"check\u0000in""#, "type"),
                (#""major":10"#, #""major":10,"note":"a\nb""#, "beacon.note"),
            ] {
                let hostile = Sample.json(event).replacingOccurrences(of: from, with: to)
                #expect(hostile != Sample.json(event))
                let problem = try await client.device(.post, APIPath.events, as: device, body: hostile, key: key).problem(400, .validation)
                #expect(problem.errors?.first?.field == field, "\(problem.errors ?? [])")
            }
            let badType = Sample.json(event).replacingOccurrences(of: #""type":"checkin""#, with: #""type":"teleport""#)
            #expect(
                try await client.device(.post, APIPath.events, as: device, body: badType, key: key).problem(400, .validation).errors?.first?
                    .field == "type")

            let form = try await client.device(
                .post, APIPath.events, as: device, body: Sample.json(event), key: key, contentType: "text/plain")
            let unsupported = try form.problem(415, .unsupportedMediaType)
            #expect(unsupported.errors?.first?.field == "Content-Type")
            try await client.device(.post, APIPath.events, as: device, body: Sample.json(event), key: key, contentType: nil).problem(
                415, .unsupportedMediaType)
            let charset = try await client.device(
                .post, APIPath.events, as: device, body: Sample.json(event), key: key, contentType: "application/json; charset=utf-8")
            #expect(charset.status.code == 201)

            event.idempotencyKey = Sample.key()
            let padded = Sample.json(event).replacingOccurrences(
                of: #"{"id""#, with: #"{"padding":"\#(String(repeating: "p", count: 70_000))","id""#)
            try await client.device(.post, APIPath.events, as: device, body: padded, key: event.idempotencyKey).problem(
                413, .payloadTooLarge)
            #expect(h.fake.envelopes.count == 1)
        }
    }

    @Test("the per-device token bucket answers 429 with Retry-After, per device")
    func rateLimited() async throws {
        // A slow refill, so a slow machine cannot refill a token between the requests.
        let created = ContinuousClock.now
        let limiter = DeviceRateLimiter(settings: TokenBucketConfiguration(ratePerSecond: 0.01, burst: 2))
        try await RouterHarness.run(limiter: limiter) { h, client in
            let device = TestDevice.make()
            #expect(try await client.postEvent(Sample.event(for: device), as: device).status.code == 201)
            #expect(try await client.postEvent(Sample.event(for: device), as: device).status.code == 201)
            let limited = try await client.postEvent(Sample.event(for: device), as: device)
            let problem = try limited.problem(429, .rateLimited)
            // The next token is 100 s after the first was taken, less the time the requests took (tens of
            // seconds on a loaded machine).
            let retryAfter = try #require(limited.headers[.retryAfter].flatMap { Int($0) })
            let elapsed = Int((ContinuousClock.now - created).components.seconds)
            #expect(((99 - elapsed)...100).contains(retryAfter), "Retry-After \(retryAfter) after \(elapsed) s")
            #expect(problem.retryAfterSeconds == retryAfter)
            #expect(problem.action == .retryAfter)
            let other = TestDevice.make()
            #expect(try await client.postEvent(Sample.event(for: other), as: other).status.code == 201)
            #expect(h.fake.envelopes.count == 3)
        }
    }
}
