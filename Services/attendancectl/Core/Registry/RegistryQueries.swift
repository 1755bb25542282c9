import AccessControl
import ArgumentParser
import AttendanceProtocol
import Foundation

// What the registry client sends and reads besides the protocol module's registry types: query
// parameters, the bodyless `202` and the health answer.

/// `?limit=` (1...200) and `?cursor=` (a previous page's `nextCursor`).
package struct PageQuery: Sendable, Hashable {
    package var limit: Int?
    package var cursor: String?

    package init(limit: Int? = nil, cursor: String? = nil) {
        self.limit = limit
        self.cursor = cursor
    }

    var query: [String: String] {
        var query: [String: String] = [:]
        if let limit { query["limit"] = String(limit) }
        if let cursor { query["cursor"] = cursor }
        return query
    }
}

/// The provisioning plan's settings; `nil` leaves the registry's default.
package struct ProvisioningPlanQuery: Sendable, Hashable {
    package var deviceName: String?
    package var measuredPower: Int?
    package var advertisingIntervalUnits: Int?
    package var txPowerIndex: Int?

    package init(deviceName: String? = nil, measuredPower: Int? = nil, advertisingIntervalUnits: Int? = nil, txPowerIndex: Int? = nil) {
        self.deviceName = deviceName
        self.measuredPower = measuredPower
        self.advertisingIntervalUnits = advertisingIntervalUnits
        self.txPowerIndex = txPowerIndex
    }

    var query: [String: String] {
        var query: [String: String] = [:]
        if let deviceName { query["deviceName"] = deviceName }
        if let measuredPower { query["measuredPower"] = String(measuredPower) }
        if let advertisingIntervalUnits { query["advertisingIntervalUnits"] = String(advertisingIntervalUnits) }
        if let txPowerIndex { query["txPowerIndex"] = String(txPowerIndex) }
        return query
    }
}

/// An answer without a body (`202 Accepted`).
package struct Accepted: Sendable {
    package var status: Int
}

package struct HealthBody: Decodable, Sendable {
    package var status: String
    package var service: String?
    package var checks: [String: String]?
}

extension TimeOfDay: ExpressibleByArgument {
    /// `HH:MM`.
    public init?(argument: String) { self.init(argument) }
}

extension CalendarDate: ExpressibleByArgument {
    /// `YYYY-MM-DD`.
    public init?(argument: String) { self.init(argument) }
}
