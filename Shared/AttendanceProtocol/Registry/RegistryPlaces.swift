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
    /// The shift of the site's local days from the last of `shiftHistory` on (of every day when there
    /// is none).
    public var shift: ShiftSettings
    /// The shifts of earlier days, oldest first: each applied to the days before its `until` (and from
    /// the one before's). Absent on the wire when empty.
    public var shiftHistory: [ShiftPeriod]
    public var createdAt: Date

    public init(
        id: String, organizationId: String, name: String, timezone: String, geofence: Geofence,
        shift: ShiftSettings, shiftHistory: [ShiftPeriod] = [], createdAt: Date
    ) {
        self.id = id
        self.organizationId = organizationId
        self.name = name
        self.timezone = timezone
        self.geofence = geofence
        self.shift = shift
        self.shiftHistory = shiftHistory
        self.createdAt = createdAt
    }

    private enum CodingKeys: String, CodingKey {
        case id, organizationId, name, timezone, geofence, shift, shiftHistory, createdAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decode(String.self, forKey: .id), organizationId: try c.decode(String.self, forKey: .organizationId),
            name: try c.decode(String.self, forKey: .name), timezone: try c.decode(String.self, forKey: .timezone),
            geofence: try c.decode(Geofence.self, forKey: .geofence), shift: try c.decode(ShiftSettings.self, forKey: .shift),
            shiftHistory: try c.decodeIfPresent([ShiftPeriod].self, forKey: .shiftHistory) ?? [],
            createdAt: try c.decode(Date.self, forKey: .createdAt))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(organizationId, forKey: .organizationId)
        try c.encode(name, forKey: .name)
        try c.encode(timezone, forKey: .timezone)
        try c.encode(geofence, forKey: .geofence)
        try c.encode(shift, forKey: .shift)
        if !shiftHistory.isEmpty { try c.encode(shiftHistory, forKey: .shiftHistory) }
        try c.encode(createdAt, forKey: .createdAt)
    }
}

/// A shift that applied to a site's local days before `until` (a later one applies from then on).
public struct ShiftPeriod: Codable, Hashable, Sendable {
    public var until: CalendarDate
    public var shift: ShiftSettings

    public init(until: CalendarDate, shift: ShiftSettings) {
        self.until = until
        self.shift = shift
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
    /// When `siteIds` last changed (absent: before the registry kept it).
    public var sitesChangedAt: Date?

    public init(id: String, name: String, siteIds: [String], createdAt: Date, sitesChangedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
        self.createdAt = createdAt
        self.sitesChangedAt = sitesChangedAt
    }
}
