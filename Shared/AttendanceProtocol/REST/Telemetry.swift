/// `POST /v1/telemetry`: a batch of device telemetry. The gateway adds the authenticated device
/// and user and produces a `DeviceTelemetryBatch`.
public struct TelemetryUploadRequest: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var appVersion: String
    public var deviceModel: String
    public var osVersion: String?
    /// The site the device is at, when it knows.
    public var siteId: String?
    public var events: [TelemetryEvent]

    public init(appVersion: String, deviceModel: String, osVersion: String? = nil, siteId: String? = nil, events: [TelemetryEvent]) {
        self.appVersion = appVersion
        self.deviceModel = deviceModel
        self.osVersion = osVersion
        self.siteId = siteId
        self.events = events
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, appVersion, deviceModel, osVersion, siteId, events
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        appVersion = try c.decode(String.self, forKey: .appVersion)
        deviceModel = try c.decode(String.self, forKey: .deviceModel)
        osVersion = try c.decodeIfPresent(String.self, forKey: .osVersion)
        siteId = try c.decodeIfPresent(String.self, forKey: .siteId)
        events = try c.decode([TelemetryEvent].self, forKey: .events)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(appVersion, forKey: .appVersion)
        try c.encode(deviceModel, forKey: .deviceModel)
        try c.encodeIfPresent(osVersion, forKey: .osVersion)
        try c.encodeIfPresent(siteId, forKey: .siteId)
        try c.encode(events, forKey: .events)
    }
}

/// 202 for a telemetry upload: how many events were queued.
public struct TelemetryUploadResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var accepted: Int

    public init(accepted: Int) {
        self.accepted = accepted
    }
}
