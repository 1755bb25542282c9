import Foundation

/// The DX-Smart CP28 GATT service (docs/SPECIFICATION.md, "7. Registry, provisioning and enrollment").
package enum CP28GATT {
    package static let serviceUUID = "0000FFE0-0000-1000-8000-00805F9B34FB"
}

/// The CP28's characteristics. Commands go to FFE2, passwords to FFE3, replies arrive on FFE1.
package enum CP28Characteristic: String, Codable, Hashable, Sendable, CaseIterable {
    /// Notifications: the beacon's replies (RX).
    case notify = "FFE1"
    /// Command packets (TX).
    case command = "FFE2"
    /// Password authentication.
    case password = "FFE3"

    /// The full 128-bit UUID (Bluetooth base UUID with this 16-bit id).
    package var uuid: String { "0000\(rawValue)-0000-1000-8000-00805F9B34FB" }
}

/// CP28 command codes.
package enum CP28Command: UInt8, Codable, Hashable, Sendable {
    case selectFrame1 = 0x11, selectFrame2 = 0x12, selectFrame3 = 0x13
    case selectFrame4 = 0x14, selectFrame5 = 0x15, selectFrame6 = 0x16
    case saveConfig = 0x60
    case setDeviceInfoFrame = 0x61
    case setIBeaconFrame = 0x62
    /// Up to 20 ASCII characters.
    case deviceName = 0x71
    /// 16 bytes, big-endian (the UUID's text order).
    case uuid = 0x74
    /// 2 bytes, big-endian.
    case major = 0x75
    /// 2 bytes, big-endian.
    case minor = 0x76
    /// RSSI at 1 m: 1 signed byte (two's complement).
    case rssiAt1m = 0x77
    /// 1 byte, in units of 100 ms.
    case advertisingInterval = 0x78
    /// 1 byte, a power level index 0-7.
    case txPower = 0x79
    case triggerOff = 0xA0
    /// Turns the selected frame off (no data).
    case disableFrame = 0xFF

    /// The select command of frame 1...6.
    static func selectFrame(_ frame: Int) -> CP28Command {
        CP28Command(rawValue: 0x10 + UInt8(frame))!
    }
}

/// One CP28 command packet: `4E 4F CMD LEN DATA… XOR`.
///
/// `LEN` is the number of data bytes; `XOR` is CMD ⊕ LEN ⊕ every data byte (the two header bytes
/// are not part of it).
package struct CP28Packet: Hashable, Sendable {
    package static let header: [UInt8] = [0x4E, 0x4F]

    package let command: UInt8
    package let data: [UInt8]

    /// `data` longer than 255 bytes cannot be framed; the plan never builds one (names are ≤ 20).
    package init(command: UInt8, data: [UInt8] = []) {
        precondition(data.count <= 255, "a CP28 packet carries at most 255 data bytes")
        self.command = command
        self.data = data
    }

    package init(_ command: CP28Command, data: [UInt8] = []) {
        self.init(command: command.rawValue, data: data)
    }

    package static func checksum(command: UInt8, data: [UInt8]) -> UInt8 {
        data.reduce(command ^ UInt8(data.count), ^)
    }

    package var checksum: UInt8 { Self.checksum(command: command, data: data) }

    /// The bytes written to the command characteristic.
    package var bytes: [UInt8] { Self.header + [command, UInt8(data.count)] + data + [checksum] }

    /// Upper-case hex bytes separated by spaces: `4E 4F 11 00 11`.
    package var hex: String { Self.hex(bytes) }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return byte < 0x10 ? "0" + digits : digits
        }.joined(separator: " ")
    }
}
