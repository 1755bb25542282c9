import Foundation
import Testing

@testable import AttendanceProtocol

/// The device payload, as the specification writes its example (docs/SPECIFICATION.md, "3. Device API").
@Suite("Specified device payload")
struct SeedPayloadTests {
    static let json5 = ProtocolCodec(allowsJSON5: true)

    @Test("the verbatim fixture is the specified example block byte for byte")
    func verbatimFixtureIsTheSeedBlock() throws {
        let fixture = try Golden.text("seed-000-8.1-verbatim.json")
        #expect(fixture.hasPrefix("{\n  \"id\": \"uuid-v4\",                         // local event id\n"))
        #expect(fixture.contains("\"type\": \"checkin|checkout\","))
        #expect(fixture.hasSuffix("\"device\": {\"model\": \"iPhone14,5\", \"os\": \"iOS 18.0\"}\n}\n"))
    }

    @Test("with JSON5 allowed, the only complaint about the verbatim block is the placeholder type")
    func verbatimPlaceholderTypeIsTheOnlyError() throws {
        let verbatim = try Golden.bytes("seed-000-8.1-verbatim.json")
        let error = try #require(decodingError(AttendanceEvent.self, String(decoding: verbatim, as: UTF8.self), codec: Self.json5))
        guard case .invalidValue(let path, let reason) = error else {
            Issue.record("expected invalidValue, got \(error)")
            return
        }
        #expect(path == "type")
        #expect(reason.contains("checkin|checkout"))
        #expect(reason.contains("checkin, checkout, heartbeat"))

        // With the placeholder resolved, the example block decodes and every specified field is read.
        let resolved = String(decoding: verbatim, as: UTF8.self).replacingOccurrences(of: "\"checkin|checkout\"", with: "\"checkin\"")
        let event = try Self.json5.decode(AttendanceEvent.self, from: resolved)
        #expect(event.id == "uuid-v4")
        #expect(event.idempotencyKey == "hash")
        #expect(event.userId == "u_...")
        #expect(event.deviceId == "d_...")
        #expect(event.timestamp == ts("2025-09-18T06:35:12Z"))
        #expect(event.type == .checkin)
        #expect(event.siteId == "S_HQ")
        #expect(event.beacon == BeaconIdentity(uuid: "...", major: 10, minor: 3))
        #expect(event.rssiSeries == [-75, -71, -68, -66])
        #expect(event.txPower == -59)
        #expect(event.motion == .init(state: .walking, steps2min: 42))
        #expect(event.geofence == .init(inside: true, radius: 200))
        #expect(event.handshake == .init(ok: true, rt: 180))
        #expect(event.network == .init(online: true, latencyMs: 210))
        #expect(event.app == .init(version: "1.12.0", build: 345))
        #expect(event.device == .init(model: "iPhone14,5", os: "iOS 18.0"))

        // And the placeholders the example leaves are exactly what validation reports.
        let problems = Set(event.validate(now: event.timestamp).map(\.field))
        #expect(problems == ["idempotencyKey", "beacon.uuid"])
    }

    @Test("the specified field names are exactly the ones the type declares, in the same order")
    func seedFieldNamesAreUnderstood() throws {
        let verbatim = try Golden.bytes("seed-000-8.1-verbatim.json")
        let object = try #require(try Self.json5.decode(JSONValue.self, from: verbatim).objectValue)
        #expect(Set(object.keys) == Set(AttendanceEvent.CodingKeys.seedFields.map(\.rawValue)))
        #expect(Set(try #require(object["beacon"]?.objectValue).keys) == ["uuid", "major", "minor"])
        #expect(Set(try #require(object["motion"]?.objectValue).keys) == ["state", "steps2min"])
        #expect(Set(try #require(object["geofence"]?.objectValue).keys) == ["inside", "radius"])
        #expect(Set(try #require(object["handshake"]?.objectValue).keys) == ["ok", "rt"])
        #expect(Set(try #require(object["network"]?.objectValue).keys) == ["online", "latencyMs"])
        #expect(Set(try #require(object["app"]?.objectValue).keys) == ["version", "build"])
        #expect(Set(try #require(object["device"]?.objectValue).keys) == ["model", "os"])

        // Order: the specified keys appear in the verbatim text in the order the encoder writes them.
        let text = String(decoding: verbatim, as: UTF8.self)
        let positions = try AttendanceEvent.CodingKeys.seedFields.map { field in
            try #require(text.range(of: "\"\(field.rawValue)\":"), "\(field.rawValue) is missing").lowerBound
        }
        #expect(positions == positions.sorted())
    }

    @Test("strict JSON refuses the verbatim block at its comment, naming the line")
    func strictJSONRefusesTheComment() throws {
        let verbatim = try Golden.text("seed-000-8.1-verbatim.json")
        let error = try #require(decodingError(AttendanceEvent.self, verbatim))
        guard case .malformedJSON(let reason) = error else {
            Issue.record("expected malformedJSON, got \(error)")
            return
        }
        #expect(reason.contains("line 2"))
    }

    @Test("the concrete example payload decodes and re-encodes byte for byte")
    func strictSeedPayloadRoundTripsByteForByte() throws {
        let fixture = try Golden.bytes("seed-000-8.1.json")
        let event = try ProtocolCodec.wire.decode(AttendanceEvent.self, from: fixture)
        #expect(event == Sample.seedEvent)
        let reencoded = try ProtocolCodec.pretty.encode(event)
        #expect(reencoded == fixture, "\(String(decoding: reencoded, as: UTF8.self))")
        #expect(event.validate(now: event.timestamp).isEmpty)
    }

    @Test("compact encoding keeps the specified field order")
    func compactEncodingKeepsSeedOrder() throws {
        let compact = try ProtocolCodec.wire.encodeToString(Sample.seedEvent)
        #expect(compact.hasPrefix(#"{"id":"6f1c2b9e-4d3a-4e8b-9c5d-2a7e1f0b3c4d","idempotencyKey":""#))
        #expect(
            compact.contains(
                #""beacon":{"uuid":"8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34","major":10,"minor":3},"rssiSeries":[-75,-71,-68,-66],"txPower":-59,"#
            ))
        #expect(compact.hasSuffix(#""device":{"model":"iPhone14,5","os":"iOS 18.0"}}"#))
        // Encoding is deterministic within and across processes (no hash-ordered keys).
        #expect(try ProtocolCodec.wire.encodeToString(Sample.seedEvent) == compact)
    }

    @Test("optional specified members may be omitted; required ones may not")
    func optionalAndRequiredMembers() throws {
        let fixture = try Golden.bytes("seed-000-8.1.json")
        let minimal = try edited(fixture) { object in
            for key in ["rssiSeries", "txPower", "motion", "geofence", "handshake", "network", "app", "device"] {
                object[key] = nil
            }
        }
        let event = try ProtocolCodec.wire.decode(AttendanceEvent.self, from: minimal)
        #expect(event.motion == nil && event.rssiSeries == nil && event.device == nil)

        for required in ["id", "idempotencyKey", "userId", "deviceId", "timestamp", "type", "siteId", "beacon"] {
            let json = try edited(fixture) { $0[required] = nil }
            #expect(decodingError(AttendanceEvent.self, json) == .missingField(path: required))
        }
    }

    @Test("the extensions round-trip and the specified payload stays valid without them")
    func extensionsRoundTrip() throws {
        try expectGolden(Sample.extendedEvent, "attendance-event-extended.json")
    }
}
