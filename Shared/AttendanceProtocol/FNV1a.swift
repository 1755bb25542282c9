/// FNV-1a with 64 bits: the same value on every machine, process and release, where Swift's `Hasher` is
/// seeded per process. For stable buckets, lanes and digests that are stored or compared across
/// processes; never for security.
public struct FNV1a: Sendable, Hashable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    public mutating func combine(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }

    public mutating func combine(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { combine(byte) }
    }

    /// The hash of `text`'s UTF-8 bytes.
    public static func hash(_ text: String) -> UInt64 {
        var hasher = FNV1a()
        hasher.combine(text.utf8)
        return hasher.value
    }
}
