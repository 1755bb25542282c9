import Foundation
import Testing

@testable import AttendanceProtocol

/// Decoding errors are typed and name the field that is wrong.
@Suite("Typed decoding errors")
struct DecodingErrorTests {
    let seed: [UInt8]

    init() throws {
        seed = try Golden.bytes("seed-000-8.1.json")
    }

    @Test func missingNestedField() throws {
        let json = try edited(seed) { object in
            object["beacon"] = ["uuid": .string(Sample.beaconUUID), "major": 10]
        }
        let error = decodingError(AttendanceEvent.self, json)
        #expect(error == .missingField(path: "beacon.minor"))
        #expect(error?.path == "beacon.minor")
        #expect(error?.description == "missing field 'beacon.minor'")
    }

    @Test func nullForARequiredField() throws {
        let json = try edited(seed) { $0["userId"] = .null }
        #expect(decodingError(AttendanceEvent.self, json) == .missingField(path: "userId"))
    }

    @Test func wrongTypeInsideAnArray() throws {
        let json = try edited(seed) { $0["rssiSeries"] = [-75, -71, "loud", -66] }
        let error = decodingError(AttendanceEvent.self, json)
        #expect(error == .wrongType(path: "rssiSeries[2]", expected: "integer"))
        #expect(error?.description == "wrong type for field 'rssiSeries[2]': expected integer")
    }

    @Test func fractionForAnIntegerNamesTheField() throws {
        // Foundation's JSONDecoder reports this as "not valid JSON" with no path on Linux.
        let json = try edited(seed) { object in
            object["beacon"] = ["uuid": .string(Sample.beaconUUID), "major": 10.5, "minor": 3]
        }
        #expect(decodingError(AttendanceEvent.self, json) == .wrongType(path: "beacon.major", expected: "integer"))
    }

    @Test func integralNumberFormsAreIntegers() throws {
        let json = try edited(seed) { $0["txPower"] = .number(-59.0) }
        #expect(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: json).txPower == -59)
        let exponent = String(decoding: seed, as: UTF8.self).replacingOccurrences(of: "\"build\": 345", with: "\"build\": 3.45e2")
        #expect(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: exponent).app?.build == 345)
    }

    @Test func integerOutOfRange() throws {
        let json = String(decoding: seed, as: UTF8.self).replacingOccurrences(of: "\"major\": 10", with: "\"major\": 99999999999999999999")
        let error = decodingError(AttendanceEvent.self, json)
        guard case .invalidValue(let path, let reason) = error else {
            Issue.record("expected invalidValue, got \(String(describing: error))")
            return
        }
        #expect(path == "beacon.major")
        #expect(reason.contains("out of range"))
    }

    @Test func objectWhereAStringIsExpected() throws {
        let json = try edited(seed) { $0["siteId"] = ["id": "S_HQ"] }
        #expect(decodingError(AttendanceEvent.self, json) == .wrongType(path: "siteId", expected: "string"))
    }

    @Test func unknownEnumValue() throws {
        let json = try edited(seed) { $0["type"] = "arrive" }
        let error = decodingError(AttendanceEvent.self, json)
        #expect(error == .invalidValue(path: "type", reason: "\"arrive\" is not one of: checkin, checkout, heartbeat"))
    }

    @Test func badTimestamp() throws {
        for bad in ["2025-09-18 06:35:12", "2025-02-29T00:00:00Z", "2025-09-18T24:00:00Z", "2025-09-18T06:35:12", "yesterday"] {
            let json = try edited(seed) { $0["timestamp"] = .string(bad) }
            let error = decodingError(AttendanceEvent.self, json)
            #expect(error?.path == "timestamp", "\(bad)")
        }
    }

    @Test func malformedJSONSaysWhere() throws {
        let truncated = String(decoding: seed.prefix(120), as: UTF8.self)
        guard case .malformedJSON(let reason) = decodingError(AttendanceEvent.self, truncated) else {
            Issue.record("expected malformedJSON")
            return
        }
        #expect(reason.contains("line"))

        #expect(decodingError(AttendanceEvent.self, "") == .malformedJSON(reason: "empty input"))
        #expect(
            decodingError(AttendanceEvent.self, #"{"id": "a",}"#)
                == .malformedJSON(reason: "expected a quoted member name at line 1, column 12"))
        #expect(
            decodingError(AttendanceEvent.self, #"{"id": 01}"#)
                == .malformedJSON(reason: "leading zeros are not allowed in numbers at line 1, column 8"))
        #expect(
            decodingError(AttendanceEvent.self, "{} {}")
                == .malformedJSON(reason: "unexpected data after the end of the document at line 1, column 4"))
        #expect(
            decodingError(AttendanceEvent.self, "{\"id\": \"a\nb\"}")
                == .malformedJSON(reason: "unescaped control character in string at line 1, column 10"))
    }

    @Test func duplicateMembersAreRefused() throws {
        // Two parsers could read a duplicated member differently; the fingerprint must mean one thing.
        let json = #"{"type": "checkin", "type": "checkout"}"#
        #expect(decodingError(AttendanceEvent.self, json) == .malformedJSON(reason: "duplicate member name \"type\" at line 1, column 21"))
    }

    private struct Accented: Decodable {
        var value: Int
        enum CodingKeys: String, CodingKey { case value = "caf\u{E9}" }
    }

    /// JSON compares member names by code point: "é" written as one scalar and as "e" + U+0301 are
    /// two names (Swift's `==` takes them for one), in small objects and in indexed large ones.
    @Test(arguments: [0, 20])
    func memberNamesCompareByCodePoint(fillers: Int) throws {
        let filler = (0..<fillers).map { "\"f\($0)\": 0, " }.joined()
        let twoNames = "{\(filler)\"cafe\u{301}\": 2, \"caf\u{E9}\": 1}"
        #expect(try ProtocolCodec.wire.decode(Accented.self, from: twoNames).value == 1)
        let oneNameTwice = "{\(filler)\"caf\u{E9}\": 1, \"caf\u{E9}\": 2}"
        guard case .malformedJSON(let reason)? = decodingError(Accented.self, oneNameTwice) else {
            Issue.record("a repeated name was not refused")
            return
        }
        #expect(reason.hasPrefix("duplicate member name \"caf\u{E9}\""))
    }

    @Test func documentOfTheWrongShape() throws {
        #expect(decodingError(AttendanceEvent.self, "[1, 2]") == .wrongType(path: "", expected: "object"))
    }

    @Test func unsupportedSchemaVersionOfATopicMessage() throws {
        let raw = Sample.raw(.event(Sample.seedEvent))
        let json = try edited(try ProtocolCodec.wire.encode(raw)) { $0["schemaVersion"] = 2 }
        let error = decodingError(RawEventEnvelope.self, json)
        #expect(error == .unsupportedSchemaVersion(found: 2, supported: 1))
        #expect(error?.path == "schemaVersion")
        #expect(error?.description == "unsupported schema version 2 (this build reads up to 1)")
    }

    @Test func unsupportedSchemaVersionNestedInAVettedEvent() throws {
        let vetted = VettedEvent(raw: Sample.raw(.event(Sample.seedEvent)), decision: Sample.decision)
        let json = try edited(try ProtocolCodec.wire.encode(vetted)) { object in
            var raw = try #require(object["raw"]?.objectValue)
            raw["schemaVersion"] = 3
            object["raw"] = .object(raw)
        }
        #expect(decodingError(VettedEvent.self, json) == .unsupportedSchemaVersion(found: 3, supported: 1))
    }

    @Test func topicMessagesRequireTheirVersion() throws {
        let raw = Sample.raw(.heartbeat(Sample.heartbeat))
        let json = try edited(try ProtocolCodec.wire.encode(raw)) { $0["schemaVersion"] = nil }
        #expect(decodingError(RawEventEnvelope.self, json) == .missingField(path: "schemaVersion"))
        let zero = try edited(try ProtocolCodec.wire.encode(raw)) { $0["schemaVersion"] = 0 }
        #expect(decodingError(RawEventEnvelope.self, zero)?.path == "schemaVersion")
    }

    @Test func restBodiesMayStateTheirVersion() throws {
        let stated = try edited(seed) { $0["schemaVersion"] = 1 }
        #expect(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: stated) == Sample.seedEvent)
        let future = try edited(seed) { $0["schemaVersion"] = 2 }
        #expect(decodingError(AttendanceEvent.self, future) == .unsupportedSchemaVersion(found: 2, supported: 1))
        #expect(decodingError(CheckInRequest.self, #"{"schemaVersion": 9}"#) == .unsupportedSchemaVersion(found: 9, supported: 1))
    }

    @Test func unknownMembersAreIgnored() throws {
        // Adding an optional field is a compatible change: old readers skip it.
        let json = try edited(seed) { $0["batteryLevel"] = 0.8 }
        #expect(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: json) == Sample.seedEvent)
    }

    @Test func errorsInsideAnEmbeddedPayloadCarryTheFullPath() throws {
        let raw = Sample.raw(.checkIn(Sample.checkIn))
        let json = try edited(try ProtocolCodec.wire.encode(raw)) { object in
            var payload = try #require(object["payload"]?.objectValue)
            var meta = try #require(payload["deviceMeta"]?.objectValue)
            meta["appVersion"] = nil
            payload["deviceMeta"] = .object(meta)
            object["payload"] = .object(payload)
        }
        #expect(decodingError(RawEventEnvelope.self, json) == .missingField(path: "payload.deviceMeta.appVersion"))
        let unknownKind = try edited(try ProtocolCodec.wire.encode(raw)) { $0["kind"] = "check_sideways" }
        #expect(decodingError(RawEventEnvelope.self, unknownKind)?.path == "kind")
    }

    @Test func descriptionsAreOneLine() throws {
        let errors: [ProtocolDecodingError] = [
            .malformedJSON(reason: "unexpected end of input at line 3, column 1"),
            .missingField(path: "beacon.minor"),
            .wrongType(path: "rssiSeries[2]", expected: "integer"),
            .invalidValue(path: "type", reason: "\"x\" is not one of: checkin, checkout, heartbeat"),
            .unsupportedSchemaVersion(found: 2, supported: 1),
            .missingField(path: ""),
        ]
        for error in errors {
            #expect(!error.description.contains("\n"))
            #expect(!error.fieldError.reason.isEmpty)
        }
        #expect(ProtocolDecodingError.missingField(path: "").description == "missing field '(root)'")
    }

    @Test func decodingErrorBecomesAProblem() throws {
        let problem = ProblemDetails.decodingFailed(
            .wrongType(path: "rssiSeries[2]", expected: "integer"), instance: "/v1/attendance/events")
        #expect(problem.status == 400)
        #expect(problem.type == "urn:problem:attendance:validation")
        #expect(problem.errors == [FieldError(field: "rssiSeries[2]", reason: "expected integer")])
    }
}
