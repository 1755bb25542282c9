import AccessControl
import AttendanceProtocol
import Foundation
import Testing

@Suite("Base64URL: RFC 4648 sec. 5 without padding, one spelling per byte string")
struct Base64URLTests {
    @Test func matchesFoundationsBase64ForEveryLengthAndByte() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.decode(expected) == bytes)
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64URL.decode(Base64URL.encode(all)) == all)
    }

    @Test(arguments: [
        "a", // a length of 4k+1 cannot be base64
        "ab=", // padding is not part of the alphabet
        "a+/b", // standard base64's alphabet
        "ab c", // whitespace
        "AB", // stray low bits: "AA" is the one spelling of [0x00]
        "AAB", // the same for two bytes
        "é", // non-ASCII
    ])
    func refusesWhatIsNotTheCanonicalSpelling(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func decodesTheCanonicalSpellingsOfShortInputs() {
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("AAA") == [0, 0])
        #expect(Base64URL.decode("_-8") == [0xFF, 0xEF])
    }
}
