import AttendanceProtocol
import Crypto
import Foundation

/// Random secrets, their hashes and their text forms: the few primitives credentials are made of.
public enum Secrets {
    /// Writes `text` to `path` readable by its owner only from the first byte (created 600, and set to
    /// 600 if the file was there with a wider mode): a secret is never world-readable, not even while
    /// it is being written. False when it cannot be written.
    public static func writePrivately(_ text: String, to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { return false }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            written += n
        }
        return fsync(fd) == 0
    }

    /// `count` bytes from the system's cryptographically secure generator (getrandom on Linux).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Lower-case hex of SHA-256 over the UTF-8 of `text`.
    public static func sha256Hex(_ text: String) -> String {
        hex(Array(SHA256.hash(data: Array(text.utf8))))
    }

    /// Lower-case hex (`Hex.encode`).
    public static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

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
    // A byte-level codec: Foundation's base64 plus string replacing cost more than the HMAC of a
    // device token, on every request the gateway authenticates.
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, c) in alphabet.enumerated() { table[Int(c)] = UInt8(index) }
        return table
    }()

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let input = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((input.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= input.count {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        switch input.count - i {
        case 1:
            let n = UInt32(input[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
        case 2:
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `nil` for anything but the canonical unpadded base64url of some bytes. Non-canonical
    /// spellings (stray low bits in the last character) are refused so that a token has exactly one
    /// text form.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let count = text.utf8.count
        guard count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            let value = values[Int(c)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits must be zero: otherwise two spellings would decode to the same bytes.
        guard accumulator == 0 else { return nil }
        return out
    }
}
