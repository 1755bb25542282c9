import AttendanceProtocol
import Foundation

/// A customer: owns sites and one business namespace.
package struct Organization: Codable, Hashable, Sendable {
    package var id: String
    package var name: String
    package var createdAt: Date

    package init(id: String, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}

/// A place where attendance is taken: its time zone, its geofence and its shift.
package struct Site: Codable, Hashable, Sendable {
    package var id: String
    package var organizationId: String
    package var name: String
    /// IANA zone name, e.g. `Asia/Ho_Chi_Minh`: shift times are local to it.
    package var timezone: String
    package var geofence: Geofence
    package var shift: ShiftSettings
    package var createdAt: Date

    package init(
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
package struct Geofence: Codable, Hashable, Sendable {
    package static let radiusRange: ClosedRange<Double> = 10...5_000

    package var latitude: Double
    package var longitude: Double
    /// Metres; 150-300 is typical.
    package var radiusMeters: Double

    package init(latitude: Double, longitude: Double, radiusMeters: Double) {
        self.latitude = latitude
        self.longitude = longitude
        self.radiusMeters = radiusMeters
    }
}

/// A gate / service point of a site: an entrance, a desk, a room. Its beacons carry minors
/// allocated to it.
package struct Gate: Codable, Hashable, Sendable {
    package var id: String
    package var siteId: String
    package var name: String
    package var createdAt: Date

    package init(id: String, siteId: String, name: String, createdAt: Date) {
        self.id = id
        self.siteId = siteId
        self.name = name
        self.createdAt = createdAt
    }
}

/// A person whose attendance is taken, and the sites they work at.
package struct User: Codable, Hashable, Sendable {
    package var id: String
    package var name: String
    package var siteIds: [String]
    package var createdAt: Date

    package init(id: String, name: String, siteIds: [String], createdAt: Date) {
        self.id = id
        self.name = name
        self.siteIds = siteIds
        self.createdAt = createdAt
    }
}
