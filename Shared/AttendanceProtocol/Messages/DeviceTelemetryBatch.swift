import Foundation

/// A batch of device telemetry, on `device.telemetry` (key: device id).
///
/// The gateway builds it from `POST /v1/telemetry`, adding what it authenticated. Each event has
/// an `eventId` from the device, so the aggregator counts a redelivered or re-uploaded event once.
public struct DeviceTelemetryBatch: TopicMessage {
    public static let topic = Topic.deviceTelemetry
    public static let schemaVersion = 1

    /// Unique per upload (the gateway's request id).
    public var batchId: String
    public var deviceId: String
    public var userId: String?
    public var siteId: String?
    public var appVersion: String
    public var deviceModel: String
    public var osVersion: String?
    public var receivedAt: Date
    public var events: [TelemetryEvent]

    public init(
        batchId: String, deviceId: String, userId: String? = nil, siteId: String? = nil, appVersion: String,
        deviceModel: String, osVersion: String? = nil, receivedAt: Date, events: [TelemetryEvent]
    ) {
        self.batchId = batchId
        self.deviceId = deviceId
        self.userId = userId
        self.siteId = siteId
        self.appVersion = appVersion
        self.deviceModel = deviceModel
        self.osVersion = osVersion
        self.receivedAt = receivedAt
        self.events = events
    }

    public var partitionKey: PartitionKey { .deviceTelemetry(deviceId: deviceId) }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, batchId, deviceId, userId, siteId, appVersion, deviceModel, osVersion, receivedAt, events
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: true)
        batchId = try c.decode(String.self, forKey: .batchId)
        deviceId = try c.decode(String.self, forKey: .deviceId)
        userId = try c.decodeIfPresent(String.self, forKey: .userId)
        siteId = try c.decodeIfPresent(String.self, forKey: .siteId)
        appVersion = try c.decode(String.self, forKey: .appVersion)
        deviceModel = try c.decode(String.self, forKey: .deviceModel)
        osVersion = try c.decodeIfPresent(String.self, forKey: .osVersion)
        receivedAt = try c.decodeTimestamp(forKey: .receivedAt)
        events = try c.decode([TelemetryEvent].self, forKey: .events)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.schemaVersion, forKey: .schemaVersion)
        try c.encode(batchId, forKey: .batchId)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encodeIfPresent(userId, forKey: .userId)
        try c.encodeIfPresent(siteId, forKey: .siteId)
        try c.encode(appVersion, forKey: .appVersion)
        try c.encode(deviceModel, forKey: .deviceModel)
        try c.encodeIfPresent(osVersion, forKey: .osVersion)
        try c.encodeTimestamp(receivedAt, forKey: .receivedAt)
        try c.encode(events, forKey: .events)
    }
}

/// One device-side occurrence (docs/SPECIFICATION.md, "8. Telemetry and the SLO").
public struct TelemetryEvent: Codable, Hashable, Sendable {
    /// Unique per device event: the aggregator's deduplication key.
    public var eventId: String
    public var name: TelemetryEventName
    public var at: Date
    /// The measurement, when the event has one: battery level 0...1, ranging time in ms, backlog size...
    public var value: Double?
    public var attributes: [String: String]?

    public init(eventId: String, name: TelemetryEventName, at: Date, value: Double? = nil, attributes: [String: String]? = nil) {
        self.eventId = eventId
        self.name = name
        self.at = at
        self.value = value
        self.attributes = attributes
    }

    enum CodingKeys: String, CodingKey {
        case eventId, name, at, value, attributes
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        eventId = try c.decode(String.self, forKey: .eventId)
        name = try c.decode(TelemetryEventName.self, forKey: .name)
        at = try c.decodeTimestamp(forKey: .at)
        value = try c.decodeIfPresent(Double.self, forKey: .value)
        attributes = try c.decodeIfPresent([String: String].self, forKey: .attributes)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(eventId, forKey: .eventId)
        try c.encode(name, forKey: .name)
        try c.encodeTimestamp(at, forKey: .at)
        try c.encodeIfPresent(value, forKey: .value)
        try c.encodeIfPresent(attributes, forKey: .attributes)
    }
}

/// Device telemetry event names: the specified list plus the outcomes the no-loss contract adds.
/// Open: a newer app's event is kept and counted under its own name, never refused.
public enum TelemetryEventName: OpenWireEnum {
    case regionEnter, regionExit, rangingStart, rangingStop, motionQuery, gattOk, gattFail
    case api201, api200, api409, bgTimeout, offlineEnqueue, outboxSent, battery
    /// Outcomes beyond the specified list: queued, refused input, payload mismatch, throttled,
    /// server error, no answer.
    case api202, api400, api422, api429, api5xx, apiTimeout
    case unrecognized(String)

    public static let knownValues: [TelemetryEventName] = [
        .regionEnter, .regionExit, .rangingStart, .rangingStop, .motionQuery, .gattOk, .gattFail,
        .api201, .api200, .api409, .bgTimeout, .offlineEnqueue, .outboxSent, .battery,
        .api202, .api400, .api422, .api429, .api5xx, .apiTimeout,
    ]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    /// The values a known event may carry, and that rule in words: a battery level 0...1; a time in ms
    /// or an outbox backlog, 0 or more. nil: any value within the magnitude bound.
    public var valueRule: (range: ClosedRange<Double>, words: String)? {
        switch self {
        case .battery: return (0...1, "must be a battery level between 0 and 1")
        case .rangingStop, .gattOk, .gattFail: return (0...Double.greatestFiniteMagnitude, "must be a time in ms, 0 or more")
        case .offlineEnqueue, .outboxSent: return (0...Double.greatestFiniteMagnitude, "must be an outbox backlog, 0 or more")
        default: return nil
        }
    }

    public var rawValue: String {
        switch self {
        case .regionEnter: return "region_enter"
        case .regionExit: return "region_exit"
        case .rangingStart: return "ranging_start"
        case .rangingStop: return "ranging_stop"
        case .motionQuery: return "motion_query"
        case .gattOk: return "gatt_ok"
        case .gattFail: return "gatt_fail"
        case .api201: return "api_201"
        case .api200: return "api_200"
        case .api409: return "api_409"
        case .bgTimeout: return "bg_timeout"
        case .offlineEnqueue: return "offline_enqueue"
        case .outboxSent: return "outbox_sent"
        case .battery: return "battery"
        case .api202: return "api_202"
        case .api400: return "api_400"
        case .api422: return "api_422"
        case .api429: return "api_429"
        case .api5xx: return "api_5xx"
        case .apiTimeout: return "api_timeout"
        case .unrecognized(let raw): return raw
        }
    }
}

// MARK: Beacon attributes

extension TelemetryEvent {
    /// The attribute names that say which beacon an event is about (region enter/exit, ranging,
    /// GATT): `beaconUuid`, `beaconMajor`, `beaconMinor`. The registry counts such an event as a
    /// sighting of that beacon by the device (broadcast verification).
    public enum BeaconAttribute {
        public static let uuid = "beaconUuid"
        public static let major = "beaconMajor"
        public static let minor = "beaconMinor"
    }

    /// The beacon named by the event's attributes, when all three are present and well formed.
    public var beacon: BeaconIdentity? {
        guard let attributes,
            let uuid = attributes[BeaconAttribute.uuid], UUID(uuidString: uuid) != nil,
            let major = attributes[BeaconAttribute.major].flatMap({ Int($0) }), (0...65_535).contains(major),
            let minor = attributes[BeaconAttribute.minor].flatMap({ Int($0) }), (0...65_535).contains(minor)
        else { return nil }
        return BeaconIdentity(uuid: uuid, major: major, minor: minor)
    }

    /// Attributes naming `beacon`, to merge into an event's attributes.
    public static func attributes(for beacon: BeaconIdentity) -> [String: String] {
        [BeaconAttribute.uuid: beacon.uuid, BeaconAttribute.major: String(beacon.major), BeaconAttribute.minor: String(beacon.minor)]
    }
}
