import AttendanceProtocol
import Foundation

// What the registry client sends and reads besides the protocol module's registry types: query
// parameters, the bodyless `202` and the health answer.

/// `?limit=` (1...200) and `?cursor=` (a previous page's `nextCursor`).
public struct PageQuery: Sendable, Hashable {
    public var limit: Int?
    public var cursor: String?

    public init(limit: Int? = nil, cursor: String? = nil) {
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
public struct ProvisioningPlanQuery: Sendable, Hashable {
    public var deviceName: String?
    public var measuredPower: Int?
    public var advertisingIntervalUnits: Int?
    public var txPowerIndex: Int?

    public init(deviceName: String? = nil, measuredPower: Int? = nil, advertisingIntervalUnits: Int? = nil, txPowerIndex: Int? = nil) {
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
public struct Accepted: Sendable {
    public var status: Int
}

public struct HealthBody: Decodable, Sendable {
    public var status: String
    public var service: String?
    public var checks: [String: String]?
}
