import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird

/// The request context of the merger's routes: the admin API key the auth middleware verified (nil on
/// health and metrics) and the platform's JSON conventions (RFC 3339 UTC timestamps).
public struct MergerRequestContext: AdminRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `AdminAuthMiddleware` on every `/v1/admin` route.
    public var apiKey: APIKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        apiKey = nil
    }

    public var requestDecoder: JSONDecoder { MergerHTTPJSON.decoder() }
    public var responseEncoder: JSONEncoder { MergerHTTPJSON.encoder() }
}

/// The JSON coders of the merger's admin API.
public enum MergerHTTPJSON {
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
                    codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not an RFC 3339 timestamp such as 2025-09-18T08:30:00Z"))
            }
            return date
        }
        return decoder
    }
}
