import AttendanceProtocol
import Testing

/// Buckets, lanes and digests built on it are stored and compared across processes: its values may never change.
@Suite("FNV-1a 64")
struct FNV1aTests {
    @Test func theReferenceVectors() {
        #expect(FNV1a.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a.hash("foobar") == 0x8594_4171_f739_67e8)
        var parts = FNV1a()
        parts.combine("foo".utf8)
        parts.combine(UInt8(ascii: "b"))
        parts.combine("ar".utf8)
        #expect(parts.value == FNV1a.hash("foobar"))
    }
}
