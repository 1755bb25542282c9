/// A tiny deterministic random number generator (SplitMix64).
///
/// Why our own: the state machine draws nonces and session keys from a generator stored *inside* the
/// value (8 bytes), so a machine seeded with the same value replays the same keys — tests and the fleet
/// simulator are reproducible. Production seeds it from `SystemRandomNumberGenerator`.
/// Not cryptographic; uniqueness, not secrecy, is what nonces and session keys need here.
public struct SplitMix64: RandomNumberGenerator, Sendable, Hashable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded from the system's secure generator.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// 128 random bits rendered as a version-4 UUID string, stored compactly until it is needed as text.
public struct UUIDBits: Hashable, Sendable, Codable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A random version-4 (RFC 9562) UUID.
    public static func random(using rng: inout some RandomNumberGenerator) -> UUIDBits {
        var high = rng.next() as UInt64
        var low = rng.next() as UInt64
        high = (high & ~0x0000_0000_0000_F000) | 0x0000_0000_0000_4000 // version 4
        low = (low & ~0xC000_0000_0000_0000) | 0x8000_0000_0000_0000 // RFC variant
        return UUIDBits(high: high, low: low)
    }

    /// Lowercase canonical form, e.g. `f7826da6-4fa2-4e98-8024-bc5b71e0893e`.
    public var uuidString: String {
        let h = Hex.string(high, digits: 16)
        let l = Hex.string(low, digits: 16)
        let hu = Array(h.utf8), lu = Array(l.utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        out += hu[0..<8]; out.append(0x2D)
        out += hu[8..<12]; out.append(0x2D)
        out += hu[12..<16]; out.append(0x2D)
        out += lu[0..<4]; out.append(0x2D)
        out += lu[4..<16]
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses a canonical UUID string (either case). Returns nil when malformed.
    public init?(uuidString: String) {
        var digits = [UInt8]()
        digits.reserveCapacity(32)
        let utf8 = Array(uuidString.utf8)
        guard utf8.count == 36 else { return nil }
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == 0x2D else { return nil }
                continue
            }
            guard let v = Hex.value(of: c) else { return nil }
            digits.append(v)
        }
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<16 { high = high << 4 | UInt64(digits[i]) }
        for i in 16..<32 { low = low << 4 | UInt64(digits[i]) }
        self.init(high: high, low: low)
    }
}

/// Lowercase hexadecimal helpers.
enum Hex {
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    static func string(_ value: UInt64, digits count: Int) -> String {
        var out = [UInt8](repeating: 0x30, count: count)
        var v = value
        var i = count - 1
        while i >= 0 {
            out[i] = digits[Int(v & 0xF)]
            v >>= 4
            i -= 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func string<S: Sequence>(bytes: S) -> String where S.Element == UInt8 {
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func value(of c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
