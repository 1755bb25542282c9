import Foundation
import Testing

@testable import AttendanceProtocol

@Suite("Wire timestamps")
struct WireTimestampTests {
    @Test func wholeSecondsHaveNoFraction() {
        let date = Date(timeIntervalSince1970: 1_758_177_312)
        #expect(WireTimestamp.string(from: date) == "2025-09-18T06:35:12Z")
        #expect(WireTimestamp.date(from: "2025-09-18T06:35:12Z") == date)
    }

    @Test func millisecondsWhenNonZero() {
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: 1_758_177_312.5)) == "2025-09-18T06:35:12.500Z")
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: 1_758_177_312.007)) == "2025-09-18T06:35:12.007Z")
        // Finer precision rounds to the millisecond, on both sides.
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: 1_758_177_312.0004)) == "2025-09-18T06:35:12Z")
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: 1_758_177_312.9996)) == "2025-09-18T06:35:13Z")
        #expect(WireTimestamp.date(from: "2025-09-18T06:35:12.123456789Z") == WireTimestamp.date(from: "2025-09-18T06:35:12.123Z"))
    }

    @Test func roundTripIsStable() throws {
        for text in [
            "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z", "2000-02-29T12:00:00.001Z", "2024-02-29T23:59:59Z",
            "2099-12-31T23:59:59.999Z",
        ] {
            let date = try #require(WireTimestamp.date(from: text))
            #expect(WireTimestamp.string(from: date) == text)
        }
        let now = Date()
        let rounded = WireTimestamp.truncatedToWirePrecision(now)
        #expect(WireTimestamp.date(from: WireTimestamp.string(from: now)) == rounded)
    }

    @Test func yearsArePaddedToFourDigitsAndMayHaveMore() {
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00Z")
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: -59_042_995_199.05)) == "0099-01-01T00:00:00.950Z")
        #expect(WireTimestamp.string(from: Date(timeIntervalSince1970: 253_402_300_800)) == "10000-01-01T00:00:00Z")
    }

    @Test func offsetsAreNormalisedToUTC() {
        #expect(WireTimestamp.date(from: "2025-09-18T13:35:12+07:00") == WireTimestamp.date(from: "2025-09-18T06:35:12Z"))
        #expect(WireTimestamp.date(from: "2025-09-18T01:05:12-05:30") == WireTimestamp.date(from: "2025-09-18T06:35:12Z"))
        #expect(WireTimestamp.date(from: "2025-09-18t06:35:12z") == WireTimestamp.date(from: "2025-09-18T06:35:12Z"))
    }

    @Test func invalidTimestamps() {
        for text in [
            "", "2025-09-18", "2025-09-18T06:35Z", "2025-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
            "2025-09-18T06:35:60Z", "2025-09-18T06:35:12.Z", "2025-09-18T06:35:12+7:00", "2025-09-18T06:35:12Zjunk",
        ] {
            #expect(WireTimestamp.date(from: text) == nil, "\(text)")
        }
    }

    @Test func datesInAnyEncodableUseTheWireFormat() throws {
        struct Stamp: Codable, Equatable { var at: Date }
        let stamp = Stamp(at: ts("2025-09-18T06:35:12.250Z"))
        #expect(try ProtocolCodec.wire.encodeToString(stamp) == #"{"at":"2025-09-18T06:35:12.250Z"}"#)
        #expect(try ProtocolCodec.wire.decode(Stamp.self, from: #"{"at":"2025-09-18T06:35:12.250Z"}"#) == stamp)
    }
}

@Suite("Codec")
struct CodecTests {
    @Test func stringsEscapeOnlyWhatJSONRequires() throws {
        let text = "quote \" backslash \\ slash / tab \t newline \n bell \u{07} Tiếng Việt 日本語 🚪"
        let encoded = try ProtocolCodec.wire.encodeToString([text])
        #expect(encoded == #"["quote \" backslash \\ slash / tab \t newline \n bell \u0007 Tiếng Việt 日本語 🚪"]"#)
        #expect(try ProtocolCodec.wire.decode([String].self, from: encoded) == [text])
        #expect(try ProtocolCodec.wire.decode(String.self, from: #""\ud83d\udeaa \u00e9 \/""#) == "🚪 é /")
        #expect(throws: ProtocolDecodingError.self) { try ProtocolCodec.wire.decode(String.self, from: #""\ud83d""#) }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: ProtocolDecodingError.self) {
            try ProtocolCodec.wire.decode(String.self, from: [0x22, 0xC3, 0x28, 0x22])
        }
    }

    @Test func numbers() throws {
        struct Numbers: Codable, Equatable { var a: Double; var b: Double; var c: Double; var d: Int64; var e: UInt8 }
        let value = Numbers(a: 200, b: 0.1, c: -1.5e-7, d: Int64.min, e: 255)
        let encoded = try ProtocolCodec.wire.encodeToString(value)
        #expect(encoded == #"{"a":200,"b":0.1,"c":-1.5e-07,"d":-9223372036854775808,"e":255}"#)
        #expect(try ProtocolCodec.wire.decode(Numbers.self, from: encoded) == value)
        #expect(throws: ProtocolDecodingError.invalidValue(path: "e", reason: "256 is out of range for a 8-bit unsigned integer")) {
            try ProtocolCodec.wire.decode(Numbers.self, from: #"{"a":1,"b":1,"c":1,"d":1,"e":256}"#)
        }
        #expect(throws: ProtocolEncodingError.self) { try ProtocolCodec.wire.encode([Double.nan]) }
        #expect(throws: ProtocolEncodingError.self) { try ProtocolCodec.wire.encode(["x": Double.infinity]) }
    }

    @Test func nonFiniteNumbersNameTheField() {
        var event = Sample.seedEvent
        event.location = .init(lat: .infinity, lon: 0)
        #expect(throws: ProtocolEncodingError(path: "location.lat", reason: "inf cannot be represented in JSON")) {
            try ProtocolCodec.wire.encode(event)
        }
    }

    @Test func dictionariesEncodeSortedSoBytesAreStable() throws {
        let attributes = Dictionary(uniqueKeysWithValues: (0..<50).map { ("k\($0)", "v\($0)") })
        let first = try ProtocolCodec.wire.encodeToString(attributes)
        #expect(first.hasPrefix(#"{"k0":"v0","k1":"v1","k10":"v10","#))
        #expect(try ProtocolCodec.wire.decode([String: String].self, from: first) == attributes)
    }

    @Test func canonicalSortsEveryLevel() throws {
        let canonical = try ProtocolCodec.canonical.encodeToString(Sample.seedEvent)
        #expect(canonical.hasPrefix(#"{"app":{"build":345,"version":"1.12.0"},"beacon":{"major":10,"minor":3,"uuid":"#))
        // The same logical payload in another member order has the same canonical bytes.
        let shuffled = try ProtocolCodec.canonical.encode(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: canonical))
        #expect(String(decoding: shuffled, as: UTF8.self) == canonical)
    }

    @Test(arguments: [
        RawEventPayload.event(Sample.seedEvent), .checkIn(Sample.checkIn), .checkOut(Sample.checkOut), .heartbeat(Sample.heartbeat),
    ])
    func aPayloadEncodedOnceGivesTheBytesOfEncodingItAgain(_ payload: RawEventPayload) throws {
        let encoded = try PreEncoded(payload)
        for codec in [ProtocolCodec.wire, .pretty, .canonical] {
            #expect(encoded.bytes(codec) == (try codec.encode(payload)))
        }
        // Nested in its envelope, the kept encoding is written where the payload would be encoded.
        let envelope = Sample.raw(payload)
        #expect(try envelope.wireBytes(payload: encoded) == ProtocolCodec.wire.encode(envelope))
        // Outside the codec (Foundation's encoder), the value encodes itself.
        let foundation = JSONEncoder()
        foundation.outputFormatting = .sortedKeys
        #expect(try foundation.encode(encoded) == foundation.encode(payload))
    }

    @Test func prettyLayout() throws {
        struct Doc: Encodable { var empty: [Int] = []; var nested: [[Int]] = [[1], []]; var object: [String: Int] = [:] }
        #expect(
            try ProtocolCodec.pretty.encodeToString(Doc()) == """
                {
                  "empty": [],
                  "nested": [
                    [1],
                    []
                  ],
                  "object": {}
                }

                """)
    }

    @Test func jsonValueRoundTrip() throws {
        let value: JSONValue = [
            "name": "HQ", "major": 10, "ratio": 0.25, "big": .integer(9_007_199_254_740_993), "tags": ["a", nil, true], "geo": ["r": 200],
        ]
        let encoded = try ProtocolCodec.wire.encodeToString(value)
        #expect(encoded == #"{"big":9007199254740993,"geo":{"r":200},"major":10,"name":"HQ","ratio":0.25,"tags":["a",null,true]}"#)
        #expect(try ProtocolCodec.wire.decode(JSONValue.self, from: encoded) == value)
        #expect(value["major"]?.int64Value == 10)
        #expect(value["name"]?.stringValue == "HQ")
        // Through Foundation's coders too (how JSON5 input is read).
        let foundation = try JSONDecoder().decode(JSONValue.self, from: Data(encoded.utf8))
        #expect(foundation == value)
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: ProtocolDecodingError.malformedJSON(reason: "nesting deeper than 128 levels at line 1, column 129")) {
            try ProtocolCodec.wire.decode(JSONValue.self, from: deep)
        }
    }

    @Test func typesAlsoWorkWithFoundationCoders() throws {
        // Hummingbird's default coders: the wire format does not depend on their date strategies.
        let fixture = try Golden.bytes("seed-000-8.1.json")
        let event = try JSONDecoder().decode(AttendanceEvent.self, from: Data(fixture))
        #expect(event == Sample.seedEvent)
        let data = try JSONEncoder().encode(Sample.extendedEvent)
        #expect(String(decoding: data, as: UTF8.self).contains(#""tEnd":"2025-09-18T06:35:19.500Z""#))
        #expect(try ProtocolCodec.wire.decode(AttendanceEvent.self, from: data) == Sample.extendedEvent)
    }
}

@Suite("Codec: a member's source bytes")
struct MemberSourceTests {
    @Test func theRawEnvelopeOfAVettedEventComesBackAsItArrived() throws {
        let vetted = VettedEvent(raw: Sample.raw(.event(Sample.seedEvent)), decision: Sample.decision)
        let bytes = try ProtocolCodec.wire.encode(vetted)
        let (decoded, source) = try ProtocolCodec.wire.decode(VettedEvent.self, from: bytes, keepingSourceOf: "raw")
        #expect(decoded == vetted)
        let raw = try #require(source)
        #expect(Array(raw) == (try ProtocolCodec.wire.encode(vetted.raw)))
        #expect(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: Array(raw)) == vetted.raw)
    }

    /// What a store decodes of a vetted event is what the full decoding says, for every payload kind,
    /// and the source bytes it keeps are the whole envelope.
    @Test(arguments: [
        RawEventPayload.event(Sample.seedEvent), .event(Sample.extendedEvent), .checkIn(Sample.checkIn), .checkOut(Sample.checkOut),
        .heartbeat(Sample.heartbeat),
    ])
    func aVettedEventRecordIsTheFullEventLessThePayloadsDetails(payload: RawEventPayload) throws {
        let vetted = VettedEvent(raw: Sample.raw(payload), decision: Sample.decision)
        let bytes = try ProtocolCodec.wire.encode(vetted)
        let (record, source) = try ProtocolCodec.wire.decode(VettedEventRecord.self, from: bytes, keepingSourceOf: "raw")
        #expect(record == VettedEventRecord(vetted))
        #expect(record.raw.payload.eventTime == payload.eventTime && record.raw.payload.eventType == payload.eventType)
        #expect(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: Array(try #require(source))) == vetted.raw)
    }

    @Test func onlyTheTopLevelMemberCountsAndStringsDoNotConfuseTheScan() throws {
        struct Doc: Decodable { var inner: [String: String]; var raw: [String: String] }
        let text = #" { "inner" : {"raw":"not this}"} , "raw" :  {"a":"}\"{","b":"x"}  } "#
        let (doc, source) = try ProtocolCodec.wire.decode(Doc.self, from: Array(text.utf8), keepingSourceOf: "raw")
        #expect(doc.raw == ["a": "}\"{", "b": "x"])
        #expect(source.map { String(decoding: $0, as: UTF8.self) } == #"{"a":"}\"{","b":"x"}"#)
    }

    @Test func anAbsentMemberHasNoSourceAndMalformedInputStillFails() throws {
        let (value, source) = try ProtocolCodec.wire.decode([String: Int].self, from: Array(#"{"a":1}"#.utf8), keepingSourceOf: "raw")
        #expect(value == ["a": 1])
        #expect(source == nil)
        #expect(throws: ProtocolDecodingError.self) {
            try ProtocolCodec.wire.decode([String: Int].self, from: Array(#"{"raw":1,}"#.utf8), keepingSourceOf: "raw")
        }
    }
}

@Suite("Codec: optional members")
struct OptionalMemberTests {
    struct Doc: Decodable, Equatable {
        var s: String?; var i: Int?; var d: Double?; var b: Bool?; var n: Int64?; var date: Date?; var list: [String]?
    }

    @Test func absentAndNullAreNilAndPresentValuesDecode() throws {
        #expect(try ProtocolCodec.wire.decode(Doc.self, from: "{}") == Doc())
        #expect(
            try ProtocolCodec.wire.decode(Doc.self, from: #"{"s":null,"i":null,"d":null,"b":null,"n":null,"date":null,"list":null}"#)
                == Doc())
        let full = try ProtocolCodec.wire.decode(
            Doc.self, from: #"{"s":"x","i":3,"d":1.5,"b":true,"n":-7,"date":"2025-09-18T06:35:12Z","list":["a"]}"#)
        #expect(full == Doc(s: "x", i: 3, d: 1.5, b: true, n: -7, date: WireTimestamp.date(from: "2025-09-18T06:35:12Z"), list: ["a"]))
    }

    @Test func aPresentValueOfTheWrongTypeIsStillAnErrorNamingTheField() {
        #expect(throws: ProtocolDecodingError.self) { try ProtocolCodec.wire.decode(Doc.self, from: #"{"i":"3"}"#) }
        #expect(throws: ProtocolDecodingError.self) { try ProtocolCodec.wire.decode(Doc.self, from: #"{"i":1.5}"#) }
        #expect(throws: ProtocolDecodingError.self) { try ProtocolCodec.wire.decode(Doc.self, from: #"{"date":"yesterday"}"#) }
        do {
            _ = try ProtocolCodec.wire.decode(Doc.self, from: #"{"list":[1]}"#)
            Issue.record("decoded a list of numbers as strings")
        } catch {
            #expect(error.path == "list[0]")
        }
    }
}
