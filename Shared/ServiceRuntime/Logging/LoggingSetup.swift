import Foundation
import Logging

public enum LoggingSetup {
    /// Bootstraps swift-log once per process: text lines for people, JSON lines for log shippers.
    public static func bootstrap(format: LogFormat, level: Logger.Level, service: String) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                return JSONLogHandler(label: label, service: service, logLevel: level)
            }
        }
    }
}

/// One JSON object per line on stderr: `ts`, `level`, `service`, `logger`, `msg` and the metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let service: String
    private let write: @Sendable (String) -> Void

    public init(
        label: String, service: String, logLevel: Logger.Level = .info,
        write: @escaping @Sendable (String) -> Void = JSONLogHandler.writeToStderr
    ) {
        self.label = label
        self.service = service
        self.logLevel = logLevel
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        var object: [String: Any] = [
            "ts": Self.timestamp(),
            "level": event.level.rawValue,
            "service": service,
            "logger": label,
            "msg": event.message.description,
        ]
        for (key, value) in merged where object[key] == nil {
            object[key] = Self.json(value)
        }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return
        }
        write(String(decoding: data, as: UTF8.self))
    }

    static func json(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let string): return string
        case .stringConvertible(let convertible): return convertible.description
        case .array(let array): return array.map(json)
        case .dictionary(let dictionary): return dictionary.mapValues(json)
        }
    }

    static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    public static let writeToStderr: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
