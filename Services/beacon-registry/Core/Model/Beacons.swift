import AttendanceProtocol
import Foundation

/// A device reported hearing a beacon at `seenAt`.
package struct BeaconSighting: Hashable, Sendable {
    package var beacon: BeaconIdentity
    package var deviceId: String
    package var seenAt: Date

    package init(beacon: BeaconIdentity, deviceId: String, seenAt: Date) {
        self.beacon = beacon
        self.deviceId = deviceId
        self.seenAt = seenAt
    }
}

/// A beacon's GATT challenge key in plain text: what the installer writes into the beacon. Only
/// the provisioning plan (installer role) ever shows it.
package struct BeaconGattKey: Hashable, Sendable {
    package var version: Int
    package var key: [UInt8]

    package init(version: Int, key: [UInt8]) {
        self.version = version
        self.key = key
    }
}
