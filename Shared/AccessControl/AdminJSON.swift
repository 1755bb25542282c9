import AttendanceProtocol
import Foundation

/// The JSON coders of the admin APIs (registry, merger): RFC 3339 UTC timestamps as `WireTimestamp`
/// writes them, sorted keys, unescaped slashes.
public enum AdminJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(WireTimestamp.string(from: date))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = WireTimestamp.date(from: text) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not an RFC 3339 timestamp such as 2025-09-18T08:30:00Z"
                ))
            }
            return date
        }
        return decoder
    }
}
