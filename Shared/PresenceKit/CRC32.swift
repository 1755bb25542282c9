/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF) — the zlib /
/// PNG / Ethernet checksum; `CRC32.checksum("123456789".utf8) == 0xCBF43926`.
///
/// Used to recognise torn or corrupt outbox records. A checksum, not a MAC: it catches partial writes
/// and bit rot, not tampering.
public enum CRC32 {
    /// The byte-at-a-time lookup table, built once.
    static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var c = UInt32(i)
        for _ in 0..<8 {
            c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1
        }
        return c
    }

    /// Continues a running checksum (start with 0).
    public static func update<S: Sequence>(_ crc: UInt32, _ bytes: S) -> UInt32 where S.Element == UInt8 {
        var c = ~crc
        table.withUnsafeBufferPointer { t in
            for b in bytes {
                c = t[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8)
            }
        }
        return ~c
    }

    public static func checksum<S: Sequence>(_ bytes: S) -> UInt32 where S.Element == UInt8 {
        update(0, bytes)
    }

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { t in
            for b in bytes {
                c = t[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8)
            }
        }
        return ~c
    }
}
