/// Header names of the device API (docs/SPECIFICATION.md, "3. Device API"; IETF idempotency-key draft).
public enum HTTPHeader {
    public static let idempotencyKey = "Idempotency-Key"
    public static let deviceId = "X-Device-Id"
    public static let appVersion = "X-App-Version"
    /// The remote-config schema the app reads (`GET /v1/devices/config`; PresenceKit's `RemoteConfig.schemaVersion`).
    public static let configSchema = "X-Config-Schema"
    /// `true` on a 200 that replays an earlier outcome for the same key.
    public static let idempotentReplayed = "Idempotent-Replayed"
    public static let retryAfter = "Retry-After"
    public static let requestId = "X-Request-Id"
}

public enum MediaType {
    public static let json = "application/json"
    public static let problemJSON = ProblemDetails.mediaType
}

/// The device API's paths. The version in the path is the REST schema version.
public enum APIPath {
    public static let events = "/v1/attendance/events"
    public static let eventsBatch = "/v1/attendance/events/batch"
    public static let checkIn = "/v1/attendance/check-in"
    public static let checkOut = "/v1/attendance/check-out"
    public static let heartbeat = "/v1/attendance/heartbeat"
    /// `?since=<RFC 3339 timestamp>`.
    public static let pending = "/v1/attendance/pending"
    /// `?beacon=<UUID:major:minor>`.
    public static let challenge = "/v1/attendance/challenge"
    public static let telemetry = "/v1/telemetry"

    /// `GET` the outcome of the request with this idempotency key (the 202's `statusUrl`).
    public static func event(idempotencyKey: String) -> String { "\(events)/\(idempotencyKey)" }
}
