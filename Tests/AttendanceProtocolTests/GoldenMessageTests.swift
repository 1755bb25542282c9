import Foundation
import Testing

@testable import AttendanceProtocol

/// One golden file per topic message (and per variant that changes the shape).
@Suite("Topic message golden files")
struct GoldenMessageTests {
    @Test func rawEventFromEventsEndpoint() throws {
        try expectGolden(Sample.raw(.event(Sample.seedEvent)), "raw-event.json")
    }

    @Test func rawEventFromCheckIn() throws {
        try expectGolden(Sample.raw(.checkIn(Sample.checkIn)), "raw-event-check-in.json")
    }

    @Test func rawEventFromCheckOut() throws {
        var raw = Sample.raw(.checkOut(Sample.checkOut))
        raw.siteId = nil
        try expectGolden(raw, "raw-event-check-out.json")
    }

    @Test func rawEventFromHeartbeat() throws {
        try expectGolden(Sample.raw(.heartbeat(Sample.heartbeat)), "raw-event-heartbeat.json")
    }

    @Test func vettedEvent() throws {
        let vetted = VettedEvent(raw: Sample.raw(.event(Sample.seedEvent)), decision: Sample.decision)
        try expectGolden(vetted, "vetted-event.json")
        #expect(vetted.decision.reasons == ["checked in 40 s ago at this gate"])
    }

    @Test func acceptedVerdict() throws {
        let verdict = AttendanceVerdict(
            requestId: "req_01J8ZQ6W3K", idempotencyKey: Sample.idempotencyKey, userId: "u_1024", deviceId: "d_7f3a",
            siteId: "S_HQ", outcome: .accepted, serverReceiptId: "rcpt_01J8ZQ6W9T", sessionId: "ses_01J8ZQ6WA2",
            policyVersion: 7, eventTime: ts("2025-09-18T06:35:12Z"), decidedAt: ts("2025-09-18T06:35:12.618Z"),
            gatewayInstance: "gateway-0"
        )
        #expect(verdict.httpStatus == 201)
        try expectGolden(verdict, "verdict-accepted.json")
    }

    @Test func rejectedVerdict() throws {
        let verdict = AttendanceVerdict(
            requestId: "req_01J8ZQ6W3K", idempotencyKey: Sample.idempotencyKey, userId: "u_1024", deviceId: "d_7f3a",
            siteId: "S_HQ", outcome: .rejected, reasons: Sample.decision.reasons, action: .retryAfter,
            retryAfterSeconds: 20, policyVersion: 7, eventTime: ts("2025-09-18T06:35:12Z"),
            decidedAt: ts("2025-09-18T06:35:12.618Z"), gatewayInstance: "gateway-1"
        )
        #expect(verdict.httpStatus == 409)
        #expect(verdict.partitionKey == .verdict(gatewayInstance: "gateway-1"))
        try expectGolden(verdict, "verdict-rejected.json")
    }

    @Test func verdictOutcomesMapToTheContractStatuses() {
        #expect(VerdictOutcome.accepted.httpStatus == 201)
        #expect(VerdictOutcome.duplicate.httpStatus == 200)
        #expect(VerdictOutcome.rejected.httpStatus == 409)
        #expect(VerdictOutcome.payloadMismatch.httpStatus == 422)
        #expect(VerdictOutcome.payloadMismatch.rawValue == "payload_mismatch")
    }

    @Test func sessionChange() throws {
        let change = SessionChange(
            sessionId: "ses_01J8ZQ6WA2", userId: "u_1024", siteId: "S_HQ", sessionKey: "sk_u1024_S_HQ_20250918",
            change: .closed, checkInAt: ts("2025-09-18T06:35:12Z"), checkOutAt: ts("2025-09-18T17:02:45Z"),
            lastSeenAt: ts("2025-09-18T17:01:30Z"), closeReason: .checkOut,
            eventIds: [Sample.idempotencyKey, "0f4b7c1d9e2a3b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"],
            version: 4, changedAt: ts("2025-09-18T17:12:45.004Z")
        )
        try expectGolden(change, "session-change.json")
    }

    @Test func deviceTelemetryBatch() throws {
        let batch = DeviceTelemetryBatch(
            batchId: "req_01J8ZR0C7M", deviceId: "d_7f3a", userId: "u_1024", siteId: "S_HQ", appVersion: "1.12.0",
            deviceModel: "iPhone14,5", osVersion: "iOS 18.0", receivedAt: ts("2025-09-18T06:40:00.120Z"),
            events: [
                TelemetryEvent(
                    eventId: "d_7f3a-000118", name: .regionEnter, at: ts("2025-09-18T06:35:04.200Z"),
                    attributes: ["region": "company.uuid", "trigger": "beacon"]),
                TelemetryEvent(eventId: "d_7f3a-000119", name: .rangingStop, at: ts("2025-09-18T06:35:11.900Z"), value: 6200),
                TelemetryEvent(eventId: "d_7f3a-000120", name: .api201, at: ts("2025-09-18T06:35:12.650Z"), value: 219),
                TelemetryEvent(eventId: "d_7f3a-000121", name: .battery, at: ts("2025-09-18T06:36:00Z"), value: 0.82),
                TelemetryEvent(eventId: "d_7f3a-000122", name: .unrecognized("wifi_scan"), at: ts("2025-09-18T06:36:30Z")),
            ]
        )
        try expectGolden(batch, "device-telemetry.json")
    }

    @Test func registryUpsert() throws {
        struct Beacon: Codable, Equatable {
            var uuid: String
            var major: Int
            var minor: Int
            var siteId: String
            var gateId: String
            var txPower: Int
            var status: String
        }
        let beacon = Beacon(uuid: Sample.beaconUUID, major: 10, minor: 3, siteId: "S_HQ", gateId: "G_MAIN", txPower: -59, status: "active")
        let change = try RegistryChange.upsert(.beacon, id: "B_0003", version: 12, changedAt: ts("2025-09-01T02:00:00Z"), entity: beacon)
        #expect(change.partitionKey.value == "beacon:B_0003")
        try expectGolden(change, "registry-change.json")
        #expect(try change.decodePayload(as: Beacon.self) == beacon)
    }

    @Test func deadLetter() throws {
        let original = Array(#"{"schemaVersion":2,"requestId":"req_9"}"#.utf8)
        let error = ProtocolDecodingError.unsupportedSchemaVersion(found: 2, supported: 1)
        let letter = DeadLetter(
            sourceTopic: Topic.rawEvents.name, partition: 3, offset: 418_221, key: "u_1024", payload: Data(original),
            decodingError: error, consumer: "policy-service/policy", failedAt: ts("2025-09-18T06:35:13.007Z")
        )
        #expect(letter.reason == .unsupportedSchemaVersion)
        #expect(letter.partitionKey == .deadLetter(originalKey: "u_1024"))
        #expect(letter.topic == .rawEvents)
        try expectGolden(letter, "dead-letter.json")
    }
}

/// One golden file per REST body.
@Suite("REST DTO golden files")
struct GoldenRESTTests {
    @Test func checkIn() throws { try expectGolden(Sample.checkIn, "check-in-request.json") }
    @Test func checkOut() throws { try expectGolden(Sample.checkOut, "check-out-request.json") }
    @Test func heartbeat() throws { try expectGolden(Sample.heartbeat, "heartbeat-request.json") }

    @Test func acceptedResponse() throws {
        try expectGolden(
            AcceptedResponse(serverReceiptId: "rcpt_01J8ZQ6W9T", sessionId: "ses_01J8ZQ6WA2", status: .accepted),
            "accepted-response.json"
        )
    }

    @Test func queuedResponse() throws {
        let queued = AcceptedResponse(status: .queued, statusUrl: APIPath.event(idempotencyKey: Sample.idempotencyKey))
        #expect(queued.status.httpStatus == 202)
        try expectGolden(queued, "queued-response.json")
    }

    @Test func batchRequest() throws {
        var second = Sample.seedEvent
        second.id = "0b5e8d2a-77c1-4f3e-9a60-3c1d2e4f5a6b"
        second.idempotencyKey = "0f4b7c1d9e2a3b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
        second.type = .checkout
        second.timestamp = ts("2025-09-18T17:02:45Z")
        second.queuedOffline = true
        try expectGolden(BatchEventsRequest(events: [Sample.seedEvent, second]), "batch-request.json")
    }

    @Test func batchResponse() throws {
        let response = BatchEventsResponse(results: [
            BatchItemResult(
                idempotencyKey: Sample.idempotencyKey, status: 201,
                body: .accepted(AcceptedResponse(serverReceiptId: "rcpt_01J8ZQ6W9T", sessionId: "ses_01J8ZQ6WA2", status: .accepted))
            ),
            BatchItemResult(
                idempotencyKey: "0f4b7c1d9e2a3b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", status: 409,
                body: .problem(.policyConflict(reasons: ["checked out 5 s after checking in"], action: .walkToGate))
            ),
        ])
        try expectGolden(response, "batch-response.json")
    }

    @Test func eventOutcome() throws {
        let outcome = EventOutcomeResponse(
            idempotencyKey: Sample.idempotencyKey, status: .accepted, httpStatus: 201, serverReceiptId: "rcpt_01J8ZQ6W9T",
            sessionId: "ses_01J8ZQ6WA2", eventTime: ts("2025-09-18T06:35:12Z"), receivedAt: ts("2025-09-18T06:35:12.431Z"),
            decidedAt: ts("2025-09-18T06:35:12.618Z")
        )
        try expectGolden(outcome, "event-outcome.json")
    }

    @Test func pending() throws {
        let pending = PendingResponse(
            deviceId: "d_7f3a", since: ts("2025-09-18T00:00:00Z"), asOf: ts("2025-09-18T09:15:00.040Z"),
            events: [
                EventOutcomeResponse(
                    idempotencyKey: Sample.idempotencyKey, status: .accepted, httpStatus: 201, serverReceiptId: "rcpt_01J8ZQ6W9T",
                    sessionId: "ses_01J8ZQ6WA2", eventTime: ts("2025-09-18T06:35:12Z"), receivedAt: ts("2025-09-18T06:35:12.431Z"),
                    decidedAt: ts("2025-09-18T06:35:12.618Z")
                ),
                EventOutcomeResponse(
                    idempotencyKey: "0f4b7c1d9e2a3b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", status: .pending,
                    httpStatus: 202, eventTime: ts("2025-09-18T09:14:58Z"), receivedAt: ts("2025-09-18T09:14:59.870Z")
                ),
            ],
            openSessions: [
                SessionSummary(
                    sessionId: "ses_01J8ZQ6WA2", siteId: "S_HQ", sessionKey: "sk_u1024_S_HQ_20250918", state: .open,
                    checkInAt: ts("2025-09-18T06:35:12Z"), lastSeenAt: ts("2025-09-18T09:00:00.250Z")
                )
            ]
        )
        try expectGolden(pending, "pending-response.json")
    }

    @Test func challenge() throws {
        let challenge = ChallengeResponse(
            beaconId: BeaconIdentity(uuid: Sample.beaconUUID, major: 10, minor: 3).canonicalId,
            nonce: "9b1f0c2d4e6a8b3c", expiresAt: ts("2025-09-18T06:35:42Z")
        )
        try expectGolden(challenge, "challenge-response.json")
    }

    @Test func telemetryUpload() throws {
        let upload = TelemetryUploadRequest(
            appVersion: "1.12.0", deviceModel: "iPhone14,5", osVersion: "iOS 18.0", siteId: "S_HQ",
            events: [
                TelemetryEvent(
                    eventId: "d_7f3a-000123", name: .offlineEnqueue, at: ts("2025-09-18T07:10:00Z"),
                    attributes: ["idempotencyKey": Sample.idempotencyKey]),
                TelemetryEvent(eventId: "d_7f3a-000124", name: .outboxSent, at: ts("2025-09-18T07:42:13.300Z"), value: 1),
            ]
        )
        try expectGolden(upload, "telemetry-upload-request.json")
        try expectGolden(TelemetryUploadResponse(accepted: 2), "telemetry-upload-response.json")
    }

    @Test func problemValidation() throws {
        let problem = ProblemDetails.validation(
            [
                FieldError(field: "beacon.minor", reason: "must be within 0...65535, is 70000"),
                FieldError(field: "rssiSeries[3]", reason: "must be within -127...0 dBm, is 12"),
            ],
            instance: "/v1/attendance/events"
        )
        #expect(problem.status == 400)
        try expectGolden(problem, "problem-validation.json")
    }

    @Test func problemPolicyConflict() throws {
        let problem = ProblemDetails.policyConflict(
            reasons: ["checked in 40 s ago at this gate"], action: .retryAfter, retryAfterSeconds: 20,
            instance: "/v1/attendance/events"
        )
        try expectGolden(problem, "problem-policy-conflict.json")
    }

    @Test func problemRateLimited() throws {
        try expectGolden(ProblemDetails.rateLimited(retryAfterSeconds: 3, instance: "/v1/attendance/events"), "problem-rate-limited.json")
    }
}
