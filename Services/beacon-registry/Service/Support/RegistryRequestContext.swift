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

    public var requestDecoder: JSONDecoder { AdminJSON.decoder() }
    public var responseEncoder: JSONEncoder { AdminJSON.encoder() }
}
