import Foundation

/// A customer: owns sites and one business namespace.
public struct Organization: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var createdAt: Date

    public init(id: String, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}

/// A place where attendance is taken: its time zone, its geofence and its shift.
public struct Site: Codable, Hashable, Sendable {
    public var id: String
    public var organizationId: String
    public var name: String
    /// IANA zone name, e.g. `Asia/Ho_Chi_Minh`: shift times are local to it.
    public var timezone: String
    public var geofence: Geofence
    public var shift: ShiftSettings
    public var createdAt: Date

    public init(
        id: String, organizationId: String, name: String, timezone: String, geofence: Geofence,
        shift: ShiftSettings, createdAt: Date
    ) {
        self.id = id
        self.organizationId = organizationId
        self.name = name
        self.timezone = timezone
        self.geofence = geofence
        self.shift = shift
        self.createdAt = createdAt
    }
}

/// A circle around the site: the co-location rule wants the phone inside it when a beacon is heard.
public struct Geofence: Codable, Hashable, Sendable {
    public static let radiusRange: ClosedRange<Double> = 10...5_000

    public var latitude: Double
    public var longitude: Double
    /// Metres; 150-300 is typical.
    public var radiusMeters: Double

    public init(latitude: Double, longitude: Double, radiusMeters: Double) {
        self.latitude = latitude
        self.longitude = longitude
        self.radiusMeters = radiusMeters
    }
}

/// A gate / service point of a site: an entrance, a desk, a room. Its beacons carry minors
/// allocated to it.
public struct Gate: Codable, Hashable, Sendable {
    public var id: String
    public var siteId: String
    public var name: String
    public var createdAt: Date

    public init(id: String, siteId: String, name: String, createdAt: Date) {
        self.id = id
        self.siteId = siteId
        self.name = name
        self.createdAt = createdAt
    }
}

/// A person whose attendance is taken, and the sites they work at.
public struct User: Codable, Hashable, Sendable {
    public var id: String
    public var name: String
    public var siteIds: [String]
    public var createdAt: Date

    public init(id: String, name: String, siteIds: [String], createdAt: Date) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
        self.createdAt = createdAt
    }
}
