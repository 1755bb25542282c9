import Crypto
import Foundation

/// Random secrets, their hashes and their text forms: the few primitives credentials are made of.
public enum Secrets {
    /// `count` bytes from the system's cryptographically secure generator (getrandom on Linux).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Lower-case hex of SHA-256 over the UTF-8 of `text`.
    public static func sha256Hex(_ text: String) -> String {
        hex(Array(SHA256.hash(data: Array(text.utf8))))
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Compares in time that depends only on the lengths, so a caller probing stored hashes learns
    /// nothing from how long a mismatch took.
    public static func constantTimeEquals(_ a: some Sequence<UInt8>, _ b: some Sequence<UInt8>) -> Bool {
        let a = Array(a), b = Array(b)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// RFC 4648 sec. 5 base64url without padding: the alphabet of tokens that travel in headers.
public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// `nil` for anything but the canonical unpadded base64url of some bytes. Non-canonical
    /// spellings (stray low bits in the last character) are refused so that a token has exactly one
    /// text form.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.allSatisfy({ isAlphabet($0) }), text.utf8.count % 4 != 1 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let bytes = Data(base64Encoded: base64).map(Array.init), encode(bytes) == String(text) else { return nil }
        return bytes
    }

    private static func isAlphabet(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
    }
}
