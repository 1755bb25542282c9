import Foundation
import Testing

@testable import AttendanceProtocol

/// Golden JSON fixtures in `Golden/`, copied into the test bundle.
///
/// To regenerate after an intentional wire change: `UPDATE_GOLDEN=1 swift test`, review the diff,
/// run again. The `seed-000-8.1*.json` fixtures (the specified example payload) are written by hand
/// and never regenerated.
enum Golden {
    static func bytes(_ name: String) throws -> [UInt8] {
        let url = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Golden"),
            "missing golden fixture \(name)"
        )
        return Array(try Data(contentsOf: url))
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try bytes(name), as: UTF8.self)
    }

    /// The fixture in the source tree (for UPDATE_GOLDEN).
    static func sourceURL(_ name: String, filePath: String = #filePath) -> URL {
        URL(fileURLWithPath: filePath).deletingLastPathComponent().appendingPathComponent("Golden").appendingPathComponent(name)
    }

    static var updating: Bool { ProcessInfo.processInfo.environment["UPDATE_GOLDEN"] == "1" }
}

/// Asserts that `value` encodes to the golden file byte for byte, that the file decodes back to
/// `value`, and that the compact and canonical forms round-trip too.
func expectGolden<T: Codable & Equatable>(
    _ value: T, _ name: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let encoded = try ProtocolCodec.pretty.encode(value)
    if Golden.updating {
        let url = Golden.sourceURL(name)
        let existing = try? Data(contentsOf: url)
        if existing != Data(encoded) { try Data(encoded).write(to: url) }
        return
    }
    let fixture = try Golden.bytes(name)
    #expect(
        encoded == fixture,
        "encoding differs from Golden/\(name):\n\(String(decoding: encoded, as: UTF8.self))",
        sourceLocation: sourceLocation
    )
    let decoded = try ProtocolCodec.wire.decode(T.self, from: fixture)
    #expect(decoded == value, "Golden/\(name) decodes to a different value", sourceLocation: sourceLocation)

    let compact = try ProtocolCodec.wire.encode(value)
    #expect(!compact.contains(0x0A), sourceLocation: sourceLocation)
    #expect(try ProtocolCodec.wire.decode(T.self, from: compact) == value, sourceLocation: sourceLocation)
    let canonical = try ProtocolCodec.canonical.encode(value)
    #expect(try ProtocolCodec.wire.decode(T.self, from: canonical) == value, sourceLocation: sourceLocation)
}

/// Decodes `json` and returns the typed error (failing the test when decoding succeeds).
func decodingError<T: Decodable>(
    _ type: T.Type, _ json: String, codec: ProtocolCodec = .wire, sourceLocation: SourceLocation = #_sourceLocation
) -> ProtocolDecodingError? {
    do {
        _ = try codec.decode(type, from: json)
        Issue.record("decoding \(T.self) succeeded, expected an error", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// Edits a JSON document through `JSONValue` (for building broken inputs from a good fixture).
func edited(_ json: [UInt8], _ edit: (inout [String: JSONValue]) throws -> Void) throws -> String {
    var object = try #require(try ProtocolCodec.wire.decode(JSONValue.self, from: json).objectValue)
    try edit(&object)
    return try ProtocolCodec.wire.encodeToString(JSONValue.object(object))
}

func ts(_ text: String) -> Date {
    guard let date = WireTimestamp.date(from: text) else { fatalError("bad test timestamp \(text)") }
    return date
}

/// Sample values shared by the golden tests.
enum Sample {
    static let idempotencyKey = "fc3544f5ffdbf8e7878500171150720e20ff5021d0999795129b72fab41f2f59"
    static let beaconUUID = "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34"

    /// The strict form of the specified example payload (Golden/seed-000-8.1.json).
    static let seedEvent = AttendanceEvent(
        id: "6f1c2b9e-4d3a-4e8b-9c5d-2a7e1f0b3c4d",
        idempotencyKey: idempotencyKey,
        userId: "u_1024",
        deviceId: "d_7f3a",
        timestamp: ts("2025-09-18T06:35:12Z"),
        type: .checkin,
        siteId: "S_HQ",
        beacon: BeaconIdentity(uuid: beaconUUID, major: 10, minor: 3),
        rssiSeries: [-75, -71, -68, -66],
        txPower: -59,
        motion: .init(state: .walking, steps2min: 42),
        geofence: .init(inside: true, radius: 200),
        handshake: .init(ok: true, rt: 180),
        network: .init(online: true, latencyMs: 210),
        app: .init(version: "1.12.0", build: 345),
        device: .init(model: "iPhone14,5", os: "iOS 18.0")
    )

    /// Every optional extension filled in.
    static var extendedEvent: AttendanceEvent {
        var event = seedEvent
        event.sessionKey = "sk_u1024_S_HQ_20250918"
        event.tEnd = ts("2025-09-18T06:35:19.500Z")
        event.queuedOffline = true
        event.firstAttemptAt = ts("2025-09-18T06:35:20.125Z")
        event.location = .init(lat: 10.776889, lon: 106.700806, accuracyM: 12.5)
        event.attestation = .init(jailbroken: false, simulatedLocation: false, mockProvider: false)
        event.gatt = .init(nonce: "9b1f0c2d4e6a8b3c", hmac: "5d41402abc4b2a76b9719d911017c592")
        return event
    }

    static let checkIn = CheckInRequest(
        userId: "u_1024", siteId: "S_HQ", ts: ts("2025-09-18T06:35:12Z"), sessionKey: "sk_u1024_S_HQ_20250918",
        deviceMeta: DeviceMeta(model: "iPhone14,5", os: "iOS 18.0", appVersion: "1.12.0")
    )
    static let checkOut = CheckOutRequest(sessionKey: "sk_u1024_S_HQ_20250918", ts: ts("2025-09-18T17:02:45Z"), reason: .softExitExpired)
    static let heartbeat = HeartbeatRequest(sessionKey: "sk_u1024_S_HQ_20250918", ts: ts("2025-09-18T09:00:00.250Z"))

    static func raw(_ payload: RawEventPayload) -> RawEventEnvelope {
        RawEventEnvelope(
            requestId: "req_01J8ZQ6W3K", idempotencyKey: idempotencyKey, userId: "u_1024", deviceId: "d_7f3a",
            siteId: "S_HQ", appVersion: "1.12.0", gatewayInstance: "gateway-0", receivedAt: ts("2025-09-18T06:35:12.431Z"),
            payloadFingerprint: "0d6a1e4c3b2f5a7980e1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b",
            payload: payload
        )
    }

    static let decision = PolicyDecision(
        outcome: .reject,
        ruleResults: [
            RuleResult(ruleId: .beaconValidity, mode: .enforce, fired: false),
            RuleResult(ruleId: .rateLimit, mode: .enforce, fired: true, reason: "checked in 40 s ago at this gate"),
            RuleResult(ruleId: .motionGating, mode: .monitor, fired: true, reason: "12 steps in 2 min, 30 required"),
        ],
        riskScore: 0.35, action: .retryAfter, retryAfterSeconds: 20, policyVersion: 7,
        decidedAt: ts("2025-09-18T06:35:12.502Z")
    )
}
