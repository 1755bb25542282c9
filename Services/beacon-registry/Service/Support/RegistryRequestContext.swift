import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird

/// The request context of the registry's routes: the API key the auth middleware verified (nil on
/// the unauthenticated routes: health, metrics, the OpenAPI document, device enrollment) and the
/// platform's JSON conventions (RFC 3339 UTC timestamps, as `WireTimestamp` writes them).
public struct RegistryRequestContext: AdminRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `AdminAuthMiddleware` on every `/v1/admin` route.
    public var apiKey: APIKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        apiKey = nil
    }

    public var requestDecoder: JSONDecoder { RegistryJSON.decoder() }
    public var responseEncoder: JSONEncoder { RegistryJSON.encoder() }
}

/// The JSON coders of the registry API.
public enum RegistryJSON {
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
