import Foundation
import Testing

@testable import AttendanceProtocol

@Suite("Ban list of factory-default UUID prefixes")
struct BanListTests {
    static let expected: [(prefix: String, vendor: String)] = [
        ("E2C56DB5", "Apple AirLocate sample"),
        ("B9407F30", "Estimote"),
        ("FDA50693", "generic Chinese bulk"),
        ("F7826DA6", "Kontakt.io"),
        ("74278BDA", "generic bulk"),
        ("00000000", "unconfigured hardware (all zeros)"),
        ("FFFFFFFF", "unconfigured hardware (all ones)"),
    ]

    @Test func everyPrefixIsRefusedNamingItsVendorInEverySpelling() {
        #expect(BanList.entries.count == Self.expected.count)
        for (prefix, vendor) in Self.expected {
            let dashed = "\(prefix)-1234-4ABC-8DEF-0123456789AB"
            for spelling in [
                dashed, dashed.lowercased(), dashed.replacingOccurrences(of: "-", with: ""),
                dashed.lowercased().replacingOccurrences(of: "-", with: ""),
            ] {
                #expect(BanList.check(spelling) == BannedUUID(prefix: prefix, vendor: vendor), "\(spelling)")
            }
            #expect(BanList.check(UUID(uuidString: dashed)!)?.vendor == vendor)
        }
    }

    @Test func otherUUIDsAreAllowed() {
        #expect(BanList.check("9A7C1456-8566-4BE7-B6E2-58688C1CFF71") == nil)
        // A banned prefix elsewhere than at the start does not count.
        #expect(BanList.check("12345678-E2C5-6DB5-B940-7F30FDA50693") == nil)
        #expect(BanList.check("E2C56DB") == nil)
        #expect(BanList.check("") == nil)
    }

    @Test func descriptionNamesPrefixAndVendor() {
        #expect(
            BanList.check("B9407F30-F5F8-466E-AFF9-25556B57FE6D")?.description == "UUID prefix B9407F30 is the Estimote factory default")
    }
}
