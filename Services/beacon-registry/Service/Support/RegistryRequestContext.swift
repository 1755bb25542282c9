import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird

/// The request context of the registry's routes: the API key the auth middleware verified (nil on
/// the unauthenticated routes: health, metrics, the OpenAPI document, device enrollment) and the
/// platform's JSON conventions (RFC 3339 UTC timestamps, as `WireTimestamp` writes them).
public struct RegistryRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `APIKeyAuthMiddleware` on every `/v1/admin` route.
    public var apiKey: APIKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        apiKey = nil
    }

    public var requestDecoder: JSONDecoder { RegistryJSON.decoder() }
    public var responseEncoder: JSONEncoder { RegistryJSON.encoder() }

    /// Throws 401 without a verified key, 403 when its role is below `role`. The first line of
    /// every admin handler, before the body is read.
    public func authorize(_ role: APIRole) throws(ProblemDetails) {
        guard let apiKey else { throw .unauthorized("send an admin API key: Authorization: Bearer <key>") }
        guard apiKey.role.permits(role) else {
            throw .forbidden("this operation needs the \(role.rawValue) role; API key \(apiKey.id) has \(apiKey.role.rawValue)")
        }
    }
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
