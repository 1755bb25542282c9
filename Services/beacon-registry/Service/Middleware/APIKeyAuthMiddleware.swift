import Foundation
import AttendanceProtocol
import BeaconRegistryCore
import Hummingbird

/// Bearer API keys on every `/v1/admin` route: a missing, malformed, unknown or revoked key is a
/// 401; a verified key is put in the context, and each handler then requires its role
/// (`RegistryRequestContext.authorize`, 403 when the role is too low).
public struct APIKeyAuthMiddleware: RouterMiddleware {
    public typealias Context = RegistryRequestContext
    let repository: any AdminRegistryRepository

    public init(repository: any AdminRegistryRepository) {
        self.repository = repository
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization] else {
            throw ProblemDetails.unauthorized("send an admin API key: Authorization: Bearer <key>")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw ProblemDetails.unauthorized("the Authorization header must be: Bearer <key>")
        }
        let presented = parts[1].trimmingCharacters(in: .whitespaces)
        guard let key = try await repository.verifyAPIKey(presented) else {
            throw ProblemDetails.unauthorized("the API key is unknown or revoked")
        }
        var context = context
        context.apiKey = key
        context.logger[metadataKey: "apiKey"] = .string(key.id)
        return try await next(request, context)
    }
}
