#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The remote configuration (docs/SPECIFICATION.md, "1. Detection on the device"), decoded from JSON and
/// validated.
///
///     {
///       "ranging_window_ms": 8000,                 // 5000...10000
///       "geofence_radius": 200,                    // meters, 150...300
///       "min_steps_window": {"steps": 30, "window_ms": 120000},   // or just 30 (steps, 2-minute window)
///       "gatt_challenge": false,                   // or {"enabled": true, "timeout_ms": 3000, "retry_cooldown_ms": 30000}
///       "checkout_trigger": "geofence_exit",       // or "beacon_loss"
///       "thresholds": {
///         "enter_rssi": -65, "leave_rssi": -75, "max_stddev_db": 12, "min_readings": 3,
///         "dwell_enter_rssi": -85, "dwell_window_ms": 120000,   // 0 turns dwell confirmation off
///         "enter_hold_ms": 0,                      // 0...10000: strong evidence held this long first
///         "enter_at_once_rssi": 0,                 // with a hold, strong evidence this strong is not held (0: all is)
///         "smoothing_window": 5, "smoothing": "median",   // "ema" (+ "ema_alpha") or "kalman"
///         "ema_alpha": 0.3, "kalman_process_noise": 0.5, "kalman_measurement_noise": 16,
///         "ranging_extensions": 2, "signal_loss_ms": 10000, "soft_exit_grace_ms": 180000, "exit_confirmation_ms": 10000,
///         "heartbeat_interval_ms": 300000, "motion_recent_ms": 180000, "geofence_exit_margin_m": 50,
///         "session_resume_limit_ms": 39600000     // schema 2: a restored session older than this ends
///       },
///       "feature_flags": {"motion_gating": true, "require_geofence": true, "continuous_scan": true,
///                         "use_healthkit": false, "kill_switch": false}
///     }
///
/// Every key is optional: absent keys keep the base configuration's value. An unknown key is an error
/// naming it (a misspelled `max_stdev_db` must not run silently with the default), as are type and
/// range errors: all of them are collected, each naming its key, into a `ConfigValidationError`, and
/// nothing of a refused document applies (`PresenceStateMachine.apply(config:at:)` keeps the last good
/// configuration). The one open set is `feature_flags`: a flag this version does not know is kept in
/// `FeatureFlags.other` for the app, so a server can switch on a newer app's feature without breaking
/// older ones. A key a newer server sends to an older app would be refused, so the host sends the schema
/// it reads (`schemaVersion`, as `X-Config-Schema` when it fetches its configuration) and the registry
/// leaves out the keys of later schemas (`keySchemaVersions`).
public struct RemoteConfig: Sendable, Hashable {
    public var presence: PresenceConfig
    /// `schema_version` / `version` if present.
    public var version: Int?

    /// The remote-config schema this library reads. A library that reads a new key lists it in
    /// `keySchemaVersions` under the next schema, and raises this to it.
    public static let schemaVersion = 2

    /// The schema that introduced each key the reader knows, by path (`thresholds.enter_rssi`). The reader
    /// refuses a key missing here, so a key cannot be added without its schema. `feature_flags` is open: a
    /// flag of a later app is kept (`FeatureFlags.other`), never refused, so its flags are not listed.
    public static let keySchemaVersions: [String: Int] = {
        let first = [
            "schema_version", "version", "ranging_window_ms", "geofence_radius", "min_steps_window", "gatt_challenge",
            "checkout_trigger", "thresholds", "feature_flags", "min_steps_window.steps", "min_steps_window.min_steps",
            "min_steps_window.window_ms", "gatt_challenge.enabled", "gatt_challenge.timeout_ms", "gatt_challenge.retry_cooldown_ms",
        ]
        let thresholds = [
            "enter_rssi", "leave_rssi", "max_stddev_db", "min_readings", "dwell_enter_rssi", "dwell_window_ms", "enter_hold_ms",
            "enter_at_once_rssi", "smoothing_window", "smoothing", "ema_alpha", "kalman_process_noise", "kalman_measurement_noise",
            "ranging_extensions", "signal_loss_ms", "soft_exit_grace_ms", "debounce_ms", "exit_confirmation_ms",
            "heartbeat_interval_ms", "motion_recent_ms", "geofence_exit_margin_m",
        ]
        // Schema 2: how long after its last presence a restored session may resume.
        let second = ["thresholds.session_resume_limit_ms"]
        return Dictionary(
            uniqueKeysWithValues: (first + thresholds.map { "thresholds." + $0 }).map { ($0, 1) } + second.map { ($0, 2) })
    }()

    public static func decode(_ json: String, base: PresenceConfig = PresenceConfig()) throws(ConfigValidationError) -> RemoteConfig {
        try decode(Array(json.utf8), base: base)
    }

    public static func decode(_ json: [UInt8], base: PresenceConfig = PresenceConfig()) throws(ConfigValidationError) -> RemoteConfig {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: Data(json))
        } catch {
            throw ConfigValidationError(issues: [ConfigIssue(key: "(document)", message: "is not valid JSON: \(error)")])
        }
        guard case .object(let top) = root else {
            throw ConfigValidationError(issues: [ConfigIssue(key: "(document)", message: "must be a JSON object, got \(root.kindName)")])
        }
        var parser = Parser(config: base)
        parser.parse(top)
        if !parser.issues.isEmpty { throw ConfigValidationError(issues: parser.issues) }
        let issues = parser.config.validationIssues()
        if !issues.isEmpty { throw ConfigValidationError(issues: issues) }
        return RemoteConfig(presence: parser.config, version: parser.version)
    }

    struct Parser {
        var config: PresenceConfig
        var version: Int?
        var issues: [ConfigIssue] = []

        mutating func unknown(_ path: String) {
            issues.append(ConfigIssue(key: path, message: "is not a remote-config key of this app"))
        }

        /// Whether `path` is a key of this library's schema (`keySchemaVersions`); records it as unknown if not.
        mutating func known(_ path: String) -> Bool {
            guard let since = RemoteConfig.keySchemaVersions[path], since <= RemoteConfig.schemaVersion else {
                unknown(path)
                return false
            }
            return true
        }

        mutating func parse(_ top: [String: JSONValue]) {
            for key in top.keys.sorted() where known(key) {
                let value = top[key]!
                switch key {
                case "schema_version", "version":
                    if let v = int(value, key) { version = v }
                case "ranging_window_ms":
                    if let v = int(value, key) { config.rangingWindowMs = Int64(v) }
                case "geofence_radius":
                    if let v = number(value, key) { config.geofenceRadiusMeters = v }
                case "min_steps_window":
                    parseSteps(value)
                case "gatt_challenge":
                    parseGatt(value)
                case "checkout_trigger":
                    if let s = string(value, key) {
                        if let t = CheckOutTrigger(rawValue: s) {
                            config.checkOutTrigger = t
                        } else {
                            issue(
                                key,
                                "must be one of \(CheckOutTrigger.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), got \"\(s)\""
                            )
                        }
                    }
                case "thresholds":
                    if let o = object(value, key) { parseThresholds(o) }
                case "feature_flags":
                    if let o = object(value, key) { parseFlags(o) }
                default:
                    unknown(key)
                }
            }
        }

        mutating func parseSteps(_ value: JSONValue) {
            let key = "min_steps_window"
            if case .object(let o) = value {
                for k in o.keys.sorted() where known("\(key).\(k)") {
                    let path = "\(key).\(k)"
                    switch k {
                    case "steps", "min_steps": if let v = int(o[k]!, path) { config.motion.minSteps = v }
                    case "window_ms": if let v = int(o[k]!, path) { config.motion.stepsWindowMs = Int64(v) }
                    default: unknown(path)
                    }
                }
            } else if let v = int(value, key, expected: "an integer (steps) or an object {\"steps\", \"window_ms\"}") {
                config.motion.minSteps = v
            }
        }

        mutating func parseGatt(_ value: JSONValue) {
            let key = "gatt_challenge"
            if case .object(let o) = value {
                for k in o.keys.sorted() where known("\(key).\(k)") {
                    let path = "\(key).\(k)"
                    switch k {
                    case "enabled": if let v = bool(o[k]!, path) { config.flags.gattChallenge = v }
                    case "timeout_ms": if let v = int(o[k]!, path) { config.gattTimeoutMs = Int64(v) }
                    case "retry_cooldown_ms": if let v = int(o[k]!, path) { config.gattRetryCooldownMs = Int64(v) }
                    default: unknown(path)
                    }
                }
            } else if let v = bool(value, key, expected: "a boolean or an object {\"enabled\", \"timeout_ms\", \"retry_cooldown_ms\"}") {
                config.flags.gattChallenge = v
            }
        }

        mutating func parseThresholds(_ o: [String: JSONValue]) {
            var smoothingName: String?
            var alpha: Float = 0.3
            var q: Float = 0.5
            var r: Float = 16
            for k in o.keys.sorted() where known("thresholds.\(k)") {
                let path = "thresholds.\(k)"
                let v = o[k]!
                switch k {
                case "enter_rssi": if let x = int(v, path) { config.enterRssi = x }
                case "leave_rssi": if let x = int(v, path) { config.leaveRssi = x }
                case "max_stddev_db": if let x = number(v, path) { config.maxStdDevDb = Float(x) }
                case "min_readings": if let x = int(v, path) { config.minReadings = x }
                case "dwell_enter_rssi": if let x = int(v, path) { config.dwellEnterRssi = x }
                case "dwell_window_ms": if let x = int(v, path) { config.dwellWindowMs = Int64(x) }
                case "enter_hold_ms": if let x = int(v, path) { config.enterHoldMs = Int64(x) }
                case "enter_at_once_rssi": if let x = int(v, path) { config.enterAtOnceRssi = x }
                case "smoothing_window": if let x = int(v, path) { config.smoothingWindow = x }
                case "smoothing": smoothingName = string(v, path)
                case "ema_alpha": if let x = number(v, path) { alpha = Float(x) }
                case "kalman_process_noise": if let x = number(v, path) { q = Float(x) }
                case "kalman_measurement_noise": if let x = number(v, path) { r = Float(x) }
                case "ranging_extensions": if let x = int(v, path) { config.rangingExtensions = x }
                case "signal_loss_ms": if let x = int(v, path) { config.signalLossMs = Int64(x) }
                case "soft_exit_grace_ms", "debounce_ms": if let x = int(v, path) { config.softExitGraceMs = Int64(x) }
                case "exit_confirmation_ms": if let x = int(v, path) { config.exitConfirmationMs = Int64(x) }
                case "heartbeat_interval_ms": if let x = int(v, path) { config.heartbeatIntervalMs = Int64(x) }
                case "session_resume_limit_ms": if let x = int(v, path) { config.sessionResumeLimitMs = Int64(x) }
                case "motion_recent_ms": if let x = int(v, path) { config.motion.recentActivityMs = Int64(x) }
                case "geofence_exit_margin_m": if let x = number(v, path) { config.geofenceExitMarginMeters = x }
                default: unknown(path)
                }
            }
            switch smoothingName {
            case nil:
                // Parameters given without a mode adjust the current mode's parameters.
                switch config.smoothing {
                case .median: break
                case .ema: if o["ema_alpha"] != nil { config.smoothing = .ema(alpha: alpha) }
                case .kalman:
                    if o["kalman_process_noise"] != nil || o["kalman_measurement_noise"] != nil {
                        config.smoothing = .kalman(processNoise: q, measurementNoise: r)
                    }
                }
            case "median"?: config.smoothing = .median
            case "ema"?: config.smoothing = .ema(alpha: alpha)
            case "kalman"?: config.smoothing = .kalman(processNoise: q, measurementNoise: r)
            case let other?: issue("thresholds.smoothing", "must be \"median\", \"ema\" or \"kalman\", got \"\(other)\"")
            }
        }

        mutating func parseFlags(_ o: [String: JSONValue]) {
            for k in o.keys.sorted() {
                let path = "feature_flags.\(k)"
                guard let v = bool(o[k]!, path) else { continue }
                switch k {
                case "motion_gating": config.flags.motionGating = v
                case "require_geofence", "co_location": config.flags.requireGeofence = v
                case "continuous_scan": config.flags.continuousScan = v
                case "gatt_challenge": config.flags.gattChallenge = v
                case "use_healthkit": config.flags.useHealthKit = v
                case "kill_switch": config.flags.killSwitch = v
                default: config.flags.other[k] = v
                }
            }
        }

        // Typed accessors: each records a readable issue and returns nil on a type mismatch.

        mutating func issue(_ key: String, _ message: String) {
            issues.append(ConfigIssue(key: key, message: message))
        }

        mutating func int(_ v: JSONValue, _ key: String, expected: String = "an integer") -> Int? {
            switch v {
            case .int(let i):
                if let x = Int(exactly: i) { return x }
            case .double(let d):
                if d.rounded() == d, let x = Int(exactly: d) { return x }
            default: break
            }
            issue(key, "expected \(expected), got \(v.described)")
            return nil
        }

        mutating func number(_ v: JSONValue, _ key: String) -> Double? {
            switch v {
            case .int(let i): return Double(i)
            case .double(let d): return d
            default:
                issue(key, "expected a number, got \(v.described)")
                return nil
            }
        }

        mutating func bool(_ v: JSONValue, _ key: String, expected: String = "a boolean") -> Bool? {
            if case .bool(let b) = v { return b }
            issue(key, "expected \(expected), got \(v.described)")
            return nil
        }

        mutating func string(_ v: JSONValue, _ key: String) -> String? {
            if case .string(let s) = v { return s }
            issue(key, "expected a string, got \(v.described)")
            return nil
        }

        mutating func object(_ v: JSONValue, _ key: String) -> [String: JSONValue]? {
            if case .object(let o) = v { return o }
            issue(key, "expected an object, got \(v.described)")
            return nil
        }
    }
}

/// A JSON value, decoded without losing the difference between integers, reals and booleans.
enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        self = .object(try c.decode([String: JSONValue].self))
    }

    var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// e.g. `the string "-70"`, `the number 1.5`, `null`.
    var described: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return "the boolean \(b)"
        case .int(let i): return "the number \(i)"
        case .double(let d): return "the number \(d)"
        case .string(let s): return "the string \"\(s)\""
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}
