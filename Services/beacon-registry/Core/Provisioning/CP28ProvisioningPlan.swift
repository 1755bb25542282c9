import AttendanceProtocol
import Foundation

/// What to write into a DX-Smart CP28 beacon: the settings the provisioning plan answer shows.
package typealias CP28BeaconSettings = ProvisioningPlanResponse.Settings

/// Why settings cannot be written to a CP28.
package enum CP28PlanError: Error, Hashable, Sendable, CustomStringConvertible {
    case deviceNameEmpty
    case deviceNameTooLong(length: Int)
    case deviceNameNotASCII
    case invalidUUID(String)
    case bannedUUID(BannedUUID)
    case majorOutOfRange(Int)
    case minorOutOfRange(Int)
    case measuredPowerOutOfRange(Int)
    case advertisingIntervalOutOfRange(Int)
    case txPowerIndexOutOfRange(Int)

    package var description: String {
        switch self {
        case .deviceNameEmpty: return "device name is empty"
        case .deviceNameTooLong(let length): return "device name has \(length) characters; the CP28 takes at most 20"
        case .deviceNameNotASCII: return "device name must be printable ASCII"
        case .invalidUUID(let text): return "\"\(text)\" is not a UUID"
        case .bannedUUID(let banned): return "refused: \(banned.description)"
        case .majorOutOfRange(let value): return "major \(value) is outside 0...65535"
        case .minorOutOfRange(let value): return "minor \(value) is outside 0...65535"
        case .measuredPowerOutOfRange(let value): return "measured power \(value) dBm is outside -127...0"
        case .advertisingIntervalOutOfRange(let value): return "advertising interval \(value) × 100 ms is outside 1...100"
        case .txPowerIndexOutOfRange(let value): return "TX power index \(value) is outside 0...7"
        }
    }

    /// The input field at fault (for a 400 problem+json).
    package var fieldError: FieldError {
        let field: String
        switch self {
        case .deviceNameEmpty, .deviceNameTooLong, .deviceNameNotASCII: field = "deviceName"
        case .invalidUUID, .bannedUUID: field = "uuid"
        case .majorOutOfRange: field = "major"
        case .minorOutOfRange: field = "minor"
        case .measuredPowerOutOfRange: field = "measuredPower"
        case .advertisingIntervalOutOfRange: field = "advertisingIntervalUnits"
        case .txPowerIndexOutOfRange: field = "txPowerIndex"
        }
        return FieldError(field: field, reason: description)
    }
}

/// One write of the sequence.
package struct CP28Step: Hashable, Sendable, Codable {
    /// 1-based position in the sequence.
    package var index: Int
    package var name: String
    package var command: UInt8
    package var characteristic: CP28Characteristic
    package var bytes: [UInt8]
    /// `4E 4F 11 00 11`.
    package var hex: String

    init(index: Int, name: String, packet: CP28Packet) {
        self.index = index
        self.name = name
        self.command = packet.command
        self.characteristic = .command
        self.bytes = packet.bytes
        self.hex = packet.hex
    }
}

/// How to unlock the beacon before the writes: try each factory password in order, written as
/// ASCII to FFE3 with response; the first one accepted unlocks.
package struct CP28Authentication: Hashable, Sendable, Codable {
    package static let factoryPasswords = ["555555", "dx1234", "000000"]

    package var serviceUUID: String
    package var characteristic: CP28Characteristic
    package var writeWithResponse: Bool
    package var passwords: [String]

    package static let standard = CP28Authentication(
        serviceUUID: CP28GATT.serviceUUID, characteristic: .password, writeWithResponse: true, passwords: factoryPasswords
    )
}

/// The DX-Smart CP28 write sequence for one beacon: frame 1 as device info, frame 2 as
/// the iBeacon, trigger off, frames 3-6 disabled, save: 24 packets to FFE2, in this order.
///
/// Frames 3-6 are disabled explicitly so that only the two configured frames broadcast, whatever
/// the beacon held before.
package struct CP28ProvisioningPlan: Hashable, Sendable, Codable {
    package static let stepCount = 24

    package var authentication: CP28Authentication
    package var steps: [CP28Step]

    package init(_ settings: CP28BeaconSettings) throws(CP28PlanError) {
        let name = try Self.nameBytes(settings.deviceName)
        guard let uuid = BeaconUUID.parse(settings.uuid) else { throw .invalidUUID(settings.uuid) }
        if let banned = BanList.check(uuid) { throw .bannedUUID(banned) }
        guard (0...65_535).contains(settings.major) else { throw .majorOutOfRange(settings.major) }
        guard (0...65_535).contains(settings.minor) else { throw .minorOutOfRange(settings.minor) }
        guard (-127...0).contains(settings.measuredPower) else { throw .measuredPowerOutOfRange(settings.measuredPower) }
        guard (1...100).contains(settings.advertisingIntervalUnits) else {
            throw .advertisingIntervalOutOfRange(settings.advertisingIntervalUnits)
        }
        guard (0...7).contains(settings.txPowerIndex) else { throw .txPowerIndexOutOfRange(settings.txPowerIndex) }

        let rssi = UInt8(bitPattern: Int8(settings.measuredPower))
        let interval = UInt8(settings.advertisingIntervalUnits)
        let power = UInt8(settings.txPowerIndex)
        let u = uuid.uuid
        let uuidBytes: [UInt8] = [
            u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15,
        ]

        var packets: [(String, CP28Packet)] = [
            ("DeviceName", CP28Packet(.deviceName, data: name)),
            ("Frame1Select", CP28Packet(.selectFrame1)),
            ("Frame1DeviceInfo", CP28Packet(.setDeviceInfoFrame)),
            ("Frame1RSSI", CP28Packet(.rssiAt1m, data: [rssi])),
            ("Frame1AdvInterval", CP28Packet(.advertisingInterval, data: [interval])),
            ("Frame1TxPower", CP28Packet(.txPower, data: [power])),
            ("Frame2Select", CP28Packet(.selectFrame2)),
            ("Frame2IBeacon", CP28Packet(.setIBeaconFrame)),
            ("UUID", CP28Packet(.uuid, data: uuidBytes)),
            ("Major", CP28Packet(.major, data: Self.bigEndian(settings.major))),
            ("Minor", CP28Packet(.minor, data: Self.bigEndian(settings.minor))),
            ("Frame2RSSI", CP28Packet(.rssiAt1m, data: [rssi])),
            ("Frame2AdvInterval", CP28Packet(.advertisingInterval, data: [interval])),
            ("Frame2TxPower", CP28Packet(.txPower, data: [power])),
            ("TriggerOff", CP28Packet(.triggerOff)),
        ]
        for frame in 3...6 {
            packets.append(("Frame\(frame)Select", CP28Packet(CP28Command.selectFrame(frame))))
            packets.append(("Frame\(frame)Disable", CP28Packet(.disableFrame)))
        }
        packets.append(("SaveConfig", CP28Packet(.saveConfig)))

        authentication = .standard
        steps = packets.enumerated().map { CP28Step(index: $0.offset + 1, name: $0.element.0, packet: $0.element.1) }
    }

    private static func nameBytes(_ name: String) throws(CP28PlanError) -> [UInt8] {
        guard !name.isEmpty else { throw .deviceNameEmpty }
        let scalars = name.unicodeScalars
        guard scalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) else { throw .deviceNameNotASCII }
        guard scalars.count <= 20 else { throw .deviceNameTooLong(length: scalars.count) }
        return Array(name.utf8)
    }

    private static func bigEndian(_ value: Int) -> [UInt8] {
        [UInt8(value >> 8), UInt8(value & 0xFF)]
    }
}
