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

    public var requestDecoder: JSONDecoder { AdminJSON.decoder() }
    public var responseEncoder: JSONEncoder { AdminJSON.encoder() }
}
