import Foundation

/// A configuration value that cannot be used. Its description is the one line an operator reads
/// when a service refuses to start.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let key: String
    public let value: String?
    public let expected: String

    public init(key: String, value: String?, expected: String) {
        self.key = key
        self.value = value
        self.expected = expected
    }

    public var description: String {
        if let value {
            return "configuration error: \(key)=\"\(value)\" is invalid: expected \(expected)"
        }
        return "configuration error: \(key) is required: expected \(expected)"
    }
}

/// Reads typed settings from environment variables, with defaults. Every getter names the key in
/// its error so a bad value produces one clear line, not a stack trace.
///
/// Secrets can also come from files, the container convention: when a secret `KEY` is unset and
/// `KEY_FILE` names a file, its content (trimmed) is the value. So an orchestrator mounts a secret
/// instead of putting it in the environment, where `docker inspect` and crash dumps would show it.
/// Only the platform's secrets are read this way (other tools' `*_FILE` variables are left alone).
public struct EnvironmentReader: Sendable {
    /// The settings that may come from a `KEY_FILE`.
    public static let fileBackedKeys: Set<String> = [
        "DEVICE_TOKEN_KEYS", "GATT_NONCE_KEY", "BEACON_KEY_SEAL_KEY", "PGPASSWORD", "DATABASE_URL",
    ]

    public let values: [String: String]
    /// `KEY_FILE` references that could not be read, by `KEY`.
    private let unreadableFiles: [String: String]

    public init(
        _ values: [String: String] = ProcessInfo.processInfo.environment, fileBackedKeys: Set<String> = EnvironmentReader.fileBackedKeys
    ) {
        var resolved = values
        var unreadable: [String: String] = [:]
        for key in fileBackedKeys {
            let fileKey = key + "_FILE"
            guard let path = values[fileKey]?.trimmingCharacters(in: .whitespacesAndNewlines) else { continue }
            guard !path.isEmpty, (values[key] ?? "").trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { continue }
            if let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) {
                let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
                // An empty secret would read as unset: a default password, a feature silently off.
                if value.isEmpty { unreadable[key] = "\(fileKey)=\(path) is empty" } else { resolved[key] = value }
            } else {
                unreadable[key] = "\(fileKey)=\(path) cannot be read"
            }
        }
        self.values = resolved
        self.unreadableFiles = unreadable
    }

    /// Fails on the first `KEY_FILE` that names a missing, unreadable or empty file; services call it at
    /// start so a broken secret mount is one clear line, not a feature silently off.
    public func checkFileReferences() throws(ConfigurationError) {
        if let (key, reason) = unreadableFiles.sorted(by: { $0.key < $1.key }).first {
            throw ConfigurationError(key: key + "_FILE", value: nil, expected: "a readable file holding the value (\(reason))")
        }
    }

    /// Settings that were renamed when the platform took one vocabulary (`docs/CONFIGURATION.md`):
    /// durations end in `_MS` or `_SECONDS`, topic names are `TOPIC_<NAME>` for every service.
    public static let renamedKeys: [String: String] = [
        "MERGER_HORIZON_S": "MERGER_HORIZON_SECONDS",
        "MERGER_IDLE_CUTOFF_S": "MERGER_IDLE_CUTOFF_SECONDS",
        "MERGER_MERGE_WINDOW_S": "MERGER_MERGE_WINDOW_SECONDS",
        "MERGER_NOISE_S": "MERGER_NOISE_SECONDS",
        "MERGER_SOFT_EXIT_GRACE_S": "MERGER_SOFT_EXIT_GRACE_SECONDS",
        "TELEMETRY_SLO_THRESHOLD_S": "TELEMETRY_SLO_THRESHOLD_SECONDS",
        "POLICY_DB_SCHEMA": "POLICY_SCHEMA",
        "MERGER_TOPIC_VETTED": "TOPIC_VETTED_EVENTS",
        "MERGER_TOPIC_VERDICTS": "TOPIC_VERDICTS",
        "MERGER_TOPIC_SESSIONS": "TOPIC_SESSIONS",
        "MERGER_TOPIC_DLQ": "TOPIC_DEAD_LETTERS",
        "MERGER_TOPIC_REGISTRY": "TOPIC_REGISTRY_CHANGES",
        "TELEMETRY_TOPIC_TELEMETRY": "TOPIC_DEVICE_TELEMETRY",
        "TELEMETRY_TOPIC_RAW": "TOPIC_RAW_EVENTS",
        "TELEMETRY_TOPIC_VERDICTS": "TOPIC_VERDICTS",
        "TELEMETRY_TOPIC_SESSIONS": "TOPIC_SESSIONS",
        "TELEMETRY_TOPIC_DLQ": "TOPIC_DEAD_LETTERS",
    ]

    /// Fails on the first setting that was renamed, naming the new name: a renamed setting silently
    /// ignored would run the service with its default.
    public func refuseRenamedKeys() throws(ConfigurationError) {
        if let (old, new) = Self.renamedKeys.sorted(by: { $0.key < $1.key }).first(where: { values[$0.key] != nil }) {
            throw ConfigurationError(key: old, value: values[old], expected: "nothing: \(old) was renamed \(new); set \(new) instead")
        }
    }

    /// The value without the spaces and line ends around it (a secret pasted from a file often ends in one).
    private func raw(_ key: String) -> String? {
        guard let value = values[key]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }

    public func string(_ key: String, default defaultValue: String) -> String {
        raw(key) ?? defaultValue
    }

    public func optionalString(_ key: String) -> String? {
        raw(key)
    }

    public func requiredString(_ key: String, expected: String) throws(ConfigurationError) -> String {
        guard let value = raw(key) else { throw ConfigurationError(key: key, value: nil, expected: expected) }
        return value
    }

    public func int(
        _ key: String, default defaultValue: Int, in range: ClosedRange<Int> = Int.min...Int.max
    ) throws(ConfigurationError) -> Int {
        guard let text = raw(key) else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigurationError(key: key, value: text, expected: "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// nil when unset; an error when set to anything but an integer in `range`.
    public func optionalInt(_ key: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard raw(key) != nil else { return nil }
        return try int(key, default: range.lowerBound, in: range)
    }

    public func double(_ key: String, default defaultValue: Double, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        guard let text = raw(key) else { return defaultValue }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw ConfigurationError(key: key, value: text, expected: "a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    public func bool(_ key: String, default defaultValue: Bool) throws(ConfigurationError) -> Bool {
        guard let text = raw(key) else { return defaultValue }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(key: key, value: text, expected: "true or false")
        }
    }

    /// A duration given in whole milliseconds (`range`); `defaultValue` when unset.
    public func milliseconds(
        _ key: String, default defaultValue: Duration, in range: ClosedRange<Int> = 0...86_400_000
    ) throws(ConfigurationError) -> Duration {
        guard raw(key) != nil else { return defaultValue }
        return .milliseconds(try int(key, default: range.lowerBound, in: range))
    }

    public func choice<T: RawRepresentable & CaseIterable>(_ key: String, default defaultValue: T) throws(ConfigurationError) -> T
    where T.RawValue == String {
        guard let text = raw(key) else { return defaultValue }
        guard let value = T(rawValue: text.lowercased()) else {
            throw ConfigurationError(key: key, value: text, expected: "one of " + T.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return value
    }

    /// A TCP port.
    public func port(_ key: String, default defaultValue: Int) throws(ConfigurationError) -> Int {
        try int(key, default: defaultValue, in: 1...65_535)
    }

    /// A PostgreSQL schema name a service's migrations and queries may splice into SQL
    /// (`ServiceMigrations.isValidSchemaName`).
    public func schemaName(_ key: String, default defaultValue: String) throws(ConfigurationError) -> String {
        let value = string(key, default: defaultValue)
        guard ServiceMigrations.isValidSchemaName(value) else {
            throw ConfigurationError(key: key, value: value, expected: "a lower-case schema name [a-z_][a-z0-9_]{0,62}")
        }
        return value
    }
}
