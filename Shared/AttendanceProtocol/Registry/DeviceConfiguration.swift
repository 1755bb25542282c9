import Foundation

/// A site's detection settings as the registry keeps them: a remote-config document of PresenceKit's
/// keys (docs/SPECIFICATION.md, "1.8 Remote configuration and switches"). An administrator sets it
/// (`PUT /v1/admin/sites/{id}/detection-config`); every device of the site receives it with its
/// configuration (`GET /v1/devices/config`) and applies it on top of the library's defaults.
public struct SiteDetectionConfig: Codable, Hashable, Sendable {
    public var siteId: String
    /// Grows by one with every accepted document; 0 for a site that never had one.
    public var version: Int
    /// When the document was last set, and the id of the API key that set it; absent for version 0.
    public var updatedAt: Date?
    public var updatedBy: String?
    /// The document: a JSON object, `{}` to keep every default. The registry accepted it with the
    /// same strict reader the phone uses, so every key is one the library knows, in range.
    public var document: JSONValue

    public init(siteId: String, version: Int, updatedAt: Date?, updatedBy: String? = nil, document: JSONValue) {
        self.siteId = siteId
        self.version = version
        self.updatedAt = updatedAt
        self.updatedBy = updatedBy
        self.document = document
    }
}

/// What a device fetches after enrolling and whenever the app starts (`GET /v1/devices/config`,
/// with its device token): every site its user is assigned to.
public struct DeviceConfiguration: Codable, Hashable, Sendable {
    public var deviceId: String
    public var userId: String
    /// Ordered by site id.
    public var sites: [DeviceSite]

    public init(deviceId: String, userId: String, sites: [DeviceSite]) {
        self.deviceId = deviceId
        self.userId = userId
        self.sites = sites
    }
}

/// One site of a device's configuration: the site (geofence, time zone, shift), the beacon region the
/// phone monitors, the site's check-in points, and the detection settings it applies there.
public struct DeviceSite: Codable, Hashable, Sendable {
    public var site: Site
    /// The organization's (shard UUID, major), the region the phone monitors; absent until allocated.
    public var namespace: BusinessNamespace?
    /// The active beacons of the site's gates, ordered by major and minor: which beacon of the region
    /// is a check-in point of this site (the organization's sites share its namespace).
    public var beacons: [DeviceBeacon]
    public var detectionConfig: SiteDetectionConfig

    public init(site: Site, namespace: BusinessNamespace?, beacons: [DeviceBeacon], detectionConfig: SiteDetectionConfig) {
        self.site = site
        self.namespace = namespace
        self.beacons = beacons
        self.detectionConfig = detectionConfig
    }
}

/// A check-in point as a phone matches it: the beacon's identity and its gate.
public struct DeviceBeacon: Codable, Hashable, Sendable {
    public var uuid: UUID
    public var major: Int
    public var minor: Int
    public var gateId: String

    public init(uuid: UUID, major: Int, minor: Int, gateId: String) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.gateId = gateId
    }
}
