import AttendanceProtocol
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

/// When a shift runs and how much slack check-in and check-out get (as Frappe HRMS models it).
public struct ShiftSettings: Codable, Hashable, Sendable {
    /// Every window and grace is bounded by one day.
    public static let minutesRange: ClosedRange<Int> = 0...1_440

    /// Local to the site. An end before the start is an overnight shift; an end equal to the start a
    /// 24-hour one (round the clock).
    public var start: TimeOfDay
    public var end: TimeOfDay
    /// A check-in counts from this many minutes before `start`.
    public var checkInBeforeStartMinutes: Int
    /// A check-out counts until this many minutes after `end`.
    public var checkOutAfterEndMinutes: Int
    /// Arriving up to this many minutes after `start` is not late.
    public var lateEntryGraceMinutes: Int
    /// Leaving up to this many minutes before `end` is not early.
    public var earlyExitGraceMinutes: Int

    public init(
        start: TimeOfDay, end: TimeOfDay, checkInBeforeStartMinutes: Int, checkOutAfterEndMinutes: Int,
        lateEntryGraceMinutes: Int, earlyExitGraceMinutes: Int
    ) {
        self.start = start
        self.end = end
        self.checkInBeforeStartMinutes = checkInBeforeStartMinutes
        self.checkOutAfterEndMinutes = checkOutAfterEndMinutes
        self.lateEntryGraceMinutes = lateEntryGraceMinutes
        self.earlyExitGraceMinutes = earlyExitGraceMinutes
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
