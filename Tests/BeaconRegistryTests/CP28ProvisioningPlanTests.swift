import Foundation
import Testing

@testable import AttendanceProtocol
@testable import BeaconRegistryCore

@Suite("DX-Smart CP28 provisioning plan")
struct CP28ProvisioningPlanTests {
    static let settings = CP28BeaconSettings(
        deviceName: "GATE-A1", uuid: "9A7C1456-8566-4BE7-B6E2-58688C1CFF71", major: 0x1234, minor: 0xABCD,
        measuredPower: -59, advertisingIntervalUnits: 10, txPowerIndex: 5
    )

    /// Every frame written out by hand: header 4E 4F, command, length, data, then the XOR of
    /// command, length and data. E.g. Major: 75 ⊕ 02 ⊕ 12 ⊕ 34 = 51; RSSI -59 = C5: 77 ⊕ 01 ⊕ C5 = B3.
    static let golden: [(index: Int, name: String, hex: String)] = [
        (1, "DeviceName", "4E 4F 71 07 47 41 54 45 2D 41 31 3C"),
        (2, "Frame1Select", "4E 4F 11 00 11"),
        (3, "Frame1DeviceInfo", "4E 4F 61 00 61"),
        (4, "Frame1RSSI", "4E 4F 77 01 C5 B3"),
        (5, "Frame1AdvInterval", "4E 4F 78 01 0A 73"),
        (6, "Frame1TxPower", "4E 4F 79 01 05 7D"),
        (7, "Frame2Select", "4E 4F 12 00 12"),
        (8, "Frame2IBeacon", "4E 4F 62 00 62"),
        (9, "UUID", "4E 4F 74 10 9A 7C 14 56 85 66 4B E7 B6 E2 58 68 8C 1C FF 71 F5"),
        (10, "Major", "4E 4F 75 02 12 34 51"),
        (11, "Minor", "4E 4F 76 02 AB CD 12"),
        (12, "Frame2RSSI", "4E 4F 77 01 C5 B3"),
        (13, "Frame2AdvInterval", "4E 4F 78 01 0A 73"),
        (14, "Frame2TxPower", "4E 4F 79 01 05 7D"),
        (15, "TriggerOff", "4E 4F A0 00 A0"),
        (16, "Frame3Select", "4E 4F 13 00 13"),
        (17, "Frame3Disable", "4E 4F FF 00 FF"),
        (18, "Frame4Select", "4E 4F 14 00 14"),
        (19, "Frame4Disable", "4E 4F FF 00 FF"),
        (20, "Frame5Select", "4E 4F 15 00 15"),
        (21, "Frame5Disable", "4E 4F FF 00 FF"),
        (22, "Frame6Select", "4E 4F 16 00 16"),
        (23, "Frame6Disable", "4E 4F FF 00 FF"),
        (24, "SaveConfig", "4E 4F 60 00 60"),
    ]

    @Test func everyFrameMatchesTheHandComputedGolden() throws {
        let plan = try CP28ProvisioningPlan(Self.settings)
        try #require(plan.steps.count == Self.golden.count)
        #expect(plan.steps.count == 24)
        #expect(CP28ProvisioningPlan.stepCount == 24)
        for (step, expected) in zip(plan.steps, Self.golden) {
            #expect(step.index == expected.index)
            #expect(step.name == expected.name)
            #expect(step.hex == expected.hex, "step \(expected.index) \(expected.name)")
            #expect(step.characteristic == .command)
            #expect(step.characteristic.rawValue == "FFE2")
            try #require(step.bytes.count > 2)
            #expect(step.command == step.bytes[2])
        }
    }

    @Test func commandsFollowTheSeedOrder() throws {
        let plan = try CP28ProvisioningPlan(Self.settings)
        #expect(
            plan.steps.map(\.command) == [
                0x71, 0x11, 0x61, 0x77, 0x78, 0x79, 0x12, 0x62, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0xA0,
                0x13, 0xFF, 0x14, 0xFF, 0x15, 0xFF, 0x16, 0xFF, 0x60,
            ])
    }

    @Test func checksumIsXorOfCommandLengthAndData() {
        #expect(CP28Packet.checksum(command: 0x11, data: []) == 0x11)
        #expect(CP28Packet.checksum(command: 0xFF, data: []) == 0xFF)
        // 75 ⊕ 02 = 77, ⊕ 00 = 77, ⊕ 01 = 76.
        #expect(CP28Packet.checksum(command: 0x75, data: [0x00, 0x01]) == 0x76)
        // 78 ⊕ 01 = 79, ⊕ 64 = 1D.
        #expect(CP28Packet(.advertisingInterval, data: [100]).hex == "4E 4F 78 01 64 1D")
        // Data that cancels out: 77 ⊕ 01 ⊕ 76 = 00.
        #expect(CP28Packet(command: 0x77, data: [0x76]).checksum == 0x00)
        #expect(CP28Packet(.selectFrame1).bytes == [0x4E, 0x4F, 0x11, 0x00, 0x11])
    }

    @Test func uuidWithoutDashesInLowerCaseGivesTheSameFrame() throws {
        var settings = Self.settings
        settings.uuid = "9a7c14568566 4be7b6e258688c1cff71".replacingOccurrences(of: " ", with: "")
        let steps = try CP28ProvisioningPlan(settings).steps
        try #require(steps.count > 8)
        #expect(steps[8].hex == Self.golden[8].hex)
    }

    @Test func extremesEncodeAsSignedAndBigEndianBytes() throws {
        let settings = CP28BeaconSettings(
            deviceName: String(repeating: "Z", count: 20), uuid: "9A7C1456-8566-4BE7-B6E2-58688C1CFF71",
            major: 65_535, minor: 0, measuredPower: -127, advertisingIntervalUnits: 1, txPowerIndex: 0
        )
        let steps = try CP28ProvisioningPlan(settings).steps
        try #require(steps.count == 24)
        #expect(steps[0].bytes.count == 4 + 20 + 1)
        #expect(steps[3].hex == "4E 4F 77 01 81 F7") // -127 = 0x81; 77 ⊕ 01 ⊕ 81 = F7
        #expect(steps[9].hex == "4E 4F 75 02 FF FF 77") // 75 ⊕ 02 ⊕ FF ⊕ FF = 77
        #expect(steps[10].hex == "4E 4F 76 02 00 00 74")
        #expect(steps[4].hex == "4E 4F 78 01 01 78")
        #expect(steps[5].hex == "4E 4F 79 01 00 78")
    }

    @Test func authenticationTriesTheFactoryPasswordsOnFFE3() throws {
        let auth = try CP28ProvisioningPlan(Self.settings).authentication
        #expect(auth.passwords == ["555555", "dx1234", "000000"])
        #expect(auth.characteristic == .password)
        #expect(auth.characteristic.uuid == "0000FFE3-0000-1000-8000-00805F9B34FB")
        #expect(auth.serviceUUID == "0000FFE0-0000-1000-8000-00805F9B34FB")
        #expect(auth.writeWithResponse)
    }

    static func with(_ change: (inout CP28BeaconSettings) -> Void) -> CP28BeaconSettings {
        var settings = settings
        change(&settings)
        return settings
    }

    @Test(arguments: [
        (with { $0.deviceName = "" }, CP28PlanError.deviceNameEmpty),
        (with { $0.deviceName = "ABCDEFGHIJKLMNOPQRSTU" }, .deviceNameTooLong(length: 21)),
        (with { $0.deviceName = "Cổng 1" }, .deviceNameNotASCII),
        (with { $0.deviceName = "tab\there" }, .deviceNameNotASCII),
        (with { $0.uuid = "not-a-uuid" }, .invalidUUID("not-a-uuid")),
        (
            with { $0.uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" },
            .bannedUUID(BannedUUID(prefix: "E2C56DB5", vendor: "Apple AirLocate sample"))
        ),
        (with { $0.major = 65_536 }, .majorOutOfRange(65_536)),
        (with { $0.minor = -1 }, .minorOutOfRange(-1)),
        (with { $0.measuredPower = 1 }, .measuredPowerOutOfRange(1)),
        (with { $0.measuredPower = -128 }, .measuredPowerOutOfRange(-128)),
        (with { $0.advertisingIntervalUnits = 0 }, .advertisingIntervalOutOfRange(0)),
        (with { $0.advertisingIntervalUnits = 101 }, .advertisingIntervalOutOfRange(101)),
        (with { $0.txPowerIndex = 8 }, .txPowerIndexOutOfRange(8)),
        (with { $0.txPowerIndex = -1 }, .txPowerIndexOutOfRange(-1)),
    ])
    func invalidSettingsAreRefusedWithTypedErrors(settings: CP28BeaconSettings, expected: CP28PlanError) {
        #expect(throws: expected) { try CP28ProvisioningPlan(settings) }
        #expect(expected.fieldError.reason == expected.description)
    }
}
