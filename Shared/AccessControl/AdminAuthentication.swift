import AttendanceProtocol
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceRuntime
import Synchronization

/// Checks a presented admin API key (`brk_<id>.<secret>`): the key when it is known and not
/// revoked, `nil` otherwise. Every service with admin routes uses one.
public protocol AdminKeyVerifier: Sendable {
    func verify(presentedKey: String) async throws -> APIKey?
}

/// The beacon registry's PostgreSQL schema, `REGISTRY_SCHEMA` (default `registry`): the registry
/// keeps its tables there, and every other service with admin routes reads the `api_keys` table
/// there. A test gives the registry a schema of its own through it.
public enum RegistrySchema {
    public static let defaultName = "registry"

    public static func load(from env: EnvironmentReader) throws(ConfigurationError) -> String {
        try env.schemaName("REGISTRY_SCHEMA", default: defaultName)
    }

    /// The search path of a pool that runs the registry's queries, which name no schema: its schema first.
    public static func searchPath(from env: EnvironmentReader) throws(ConfigurationError) -> [String] {
        [try load(from: env), "public"]
    }
}

/// Verifies against the registry's `api_keys` table in `schema` (the registry owns the keys; other
/// services share its database and only read). Answers are cached for `cacheLifetime` so a busy
/// admin client costs one query per key per period; a revocation therefore takes effect within
/// that period on services other than the registry.
public final class PostgresAdminKeyVerifier: AdminKeyVerifier {
    private let client: PostgresClient
    private let schema: String
    private let logger: Logger
    private let cacheLifetime: Duration
    private let cache = Mutex<[String: (key: APIKey?, at: ContinuousClock.Instant)]>([:])

    /// - Parameter schema: the registry's schema (`RegistrySchema`), a checked schema name.
    public init(client: PostgresClient, schema: String, cacheLifetime: Duration = .seconds(5), logger: Logger) {
        self.client = client
        self.schema = schema
        self.cacheLifetime = cacheLifetime
        self.logger = logger
    }

    public func verify(presentedKey: String) async throws -> APIKey? {
        guard let (id, secret) = APIKeyFormat.parse(presentedKey) else { return nil }
        let presentedHash = APIKeyFormat.hash(secret: secret)
        let cacheKey = presentedHash
        let now = ContinuousClock.now
        if let hit = cache.withLock({ $0[cacheKey] }), now - hit.at < cacheLifetime { return hit.key }
        let rows = try await client.query(
            "SELECT id, name, role, created_at, revoked_at, secret_sha256 FROM \(unescaped: schema).api_keys WHERE id = \(id)",
            logger: logger)
        var found: APIKey?
        for try await (id, name, role, createdAt, revokedAt, storedHash) in rows.decode((String, String, String, Date, Date?, String).self)
        {
            guard Secrets.constantTimeEquals(presentedHash.utf8, storedHash.utf8), revokedAt == nil,
                let role = APIRole(rawValue: role)
            else { continue }
            found = APIKey(id: id, name: name, role: role, createdAt: createdAt, revokedAt: revokedAt)
        }
        cache.withLock { cache in
            // Unknown keys are cached too (a flood of bad keys must not become a flood of queries),
            // but the table stays bounded.
            if cache.count > 10_000 { cache.removeAll(keepingCapacity: true) }
            cache[cacheKey] = (found, now)
        }
        return found
    }
}

/// A request context that carries the admin API key the middleware verified.
public protocol AdminRequestContext: RequestContext {
    var apiKey: APIKey? { get set }
}

/// The request context of every service's admin routes: the API key `AdminAuthMiddleware` verified
/// (nil on the unauthenticated routes: health, metrics, the OpenAPI document, device enrollment) and
/// the platform's admin JSON conventions (RFC 3339 UTC timestamps, unknown members refused).
public struct AdminContext: AdminRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var apiKey: APIKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        apiKey = nil
    }

    public var requestDecoder: JSONDecoder { AdminJSON.decoder() }
    public var responseEncoder: JSONEncoder { AdminJSON.encoder() }
}

extension AdminRequestContext {
    /// Throws 401 without a verified key, 403 when its role is below `role`. The first line of
    /// every admin handler, before the body is read. Returns the key (who did it, for an audit).
    @discardableResult
    public func authorize(_ role: APIRole) throws(ProblemDetails) -> APIKey {
        guard let apiKey else { throw .unauthorized("send an admin API key: Authorization: Bearer <key>") }
        guard apiKey.role.permits(role) else {
            throw .forbidden("this operation needs the \(role.rawValue) role; API key \(apiKey.id) has \(apiKey.role.rawValue)")
        }
        return apiKey
    }
}

/// Bearer API keys on admin routes: a missing, malformed, unknown or revoked key is a 401; a
/// verified key is put in the context, and each handler then requires its role with `authorize`.
///
/// Every admin change that succeeds (a method other than GET and HEAD answered 2xx) is logged at
/// `info` as `admin change`: the key's id and role, the method, the route and the path (the ids of
/// what changed), the status. It is the audit record of who changed what and when; reads are not
/// logged.
public struct AdminAuthMiddleware<Context: AdminRequestContext>: RouterMiddleware {
    let verifier: any AdminKeyVerifier

    public init(verifier: any AdminKeyVerifier) {
        self.verifier = verifier
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
        guard let key = try await verifier.verify(presentedKey: presented) else {
            throw ProblemDetails.unauthorized("the API key is unknown or revoked")
        }
        var context = context
        context.apiKey = key
        context.logger[metadataKey: "apiKey"] = .string(key.id)
        let response = try await next(request, context)
        if request.method != .get, request.method != .head, (200..<300).contains(response.status.code) {
            context.logger.info(
                "admin change",
                metadata: [
                    "role": .string(key.role.rawValue), "method": .string(request.method.rawValue),
                    "route": .string(context.endpointPath ?? ""),
                    "path": .string(request.uri.path), "status": "\(response.status.code)",
                ])
        }
        return response
    }
}

extension ServiceKit {
    /// The admin API key check of a service with admin routes: the registry's `api_keys` in its
    /// schema (`REGISTRY_SCHEMA`), read on this service's pool.
    public func adminKeyVerifier(environment env: EnvironmentReader) throws(ConfigurationError) -> PostgresAdminKeyVerifier {
        PostgresAdminKeyVerifier(client: postgres, schema: try RegistrySchema.load(from: env), logger: logger)
    }
}
