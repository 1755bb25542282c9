import Foundation
import Testing

import struct PresenceKit.SplitMix64

@testable import AttendanceProtocol

/// Whatever bytes arrive (a truncated upload, a flipped bit, a hostile client), decoding either
/// succeeds or throws a typed `ProtocolDecodingError`: never a crash, a hang or an untyped error.
@Suite("Hostile input")
struct HostileInputTests {
    func decodeOutcome(_ bytes: [UInt8]) -> String {
        do {
            _ = try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: bytes)
            return "ok"
        } catch {
            return error.description.isEmpty ? "empty error" : "typed"
        }
    }

    @Test func everyTruncationIsATypedError() throws {
        let golden = try Golden.bytes("raw-event.json")
        // Cut anywhere before the closing brace (the file's trailing newline is not part of the JSON).
        let end = try #require(golden.lastIndex(of: UInt8(ascii: "}")))
        for length in 0...end {
            #expect(decodeOutcome(Array(golden.prefix(length))) == "typed", "prefix of \(length) bytes")
        }
    }

    @Test func randomMutationsNeverCrash() throws {
        let golden = try Golden.bytes("raw-event.json")
        var rng = SplitMix64(seed: 0x5EED)
        let interesting: [UInt8] = Array("{}[]\",:\\0123456789-.eEtrufalsn ".utf8) + [0x00, 0x7F, 0xC3, 0xFF]
        for _ in 0..<3_000 {
            var bytes = golden
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let index = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes[index] = interesting.randomElement(using: &rng)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(interesting.randomElement(using: &rng)!, at: index)
                }
            }
            #expect(["ok", "typed"].contains(decodeOutcome(bytes)))
        }
    }

    @Test func deepNestingIsRefusedNotAStackOverflow() {
        let deep = Array(repeating: UInt8(ascii: "["), count: 100_000) + Array(repeating: UInt8(ascii: "]"), count: 100_000)
        #expect(decodeOutcome(deep) == "typed")
        let deepObject = Array(String(repeating: #"{"a":"#, count: 50_000).utf8)
        #expect(decodeOutcome(deepObject) == "typed")
    }

    @Test func hugeNumbersAndLongStringsAreTypedErrors() {
        let bigNumber = Array(#"{"schemaVersion": 1e999999}"#.utf8)
        #expect(decodeOutcome(bigNumber) == "typed")
        let longString = Array(("{\"requestId\": \"" + String(repeating: "x", count: 1_000_000) + "\"}").utf8)
        #expect(decodeOutcome(longString) == "typed")
    }
}
