import AttendanceProtocol
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// Maps any error a handler throws to an RFC 9457 problem: `ProblemDetails` as is, then the
/// service's own errors (`translate`), the protocol module's decoding errors and Foundation's
/// `DecodingError` as a 400 naming the field, a body over the limit as 413, a database that cannot be
/// reached as 503 (`PostgresFailure.isUnavailable`), Hummingbird's `HTTPError` with its status. Only an
/// unexpected error is a 500; its details go to the log, not the client.
public struct ProblemMapper: Sendable {
    /// The body limit named in a 413 (nil: the 413 does not name one).
    public var maxBodyBytes: Int?
    /// A service's own error types (registry errors, say); nil leaves the error to the common cases.
    public var translate: @Sendable (any Error) -> ProblemDetails?
    /// Where the 5xx other than 500 are logged, at most once per 10 s.
    let unavailableLog = RepeatedFailureLog()

    public init(maxBodyBytes: Int? = nil, translate: @escaping @Sendable (any Error) -> ProblemDetails? = { _ in nil }) {
        self.maxBodyBytes = maxBodyBytes
        self.translate = translate
    }

    public func problem(for error: any Error) -> ProblemDetails {
        if let problem = error as? ProblemDetails { return problem }
        if let translated = translate(error) { return translated }
        if let refusal = StorageRefusal(error) { return refusal.problem }
        if PostgresFailure(error)?.sqlState == PostgresFailure.queryCanceled {
            // A read stopped at the report pool's statement timeout: the same request would be stopped again.
            return .unavailable("the query took longer than this service lets one run; ask for less (fewer days, one user or one site)")
        }
        if PostgresFailure.isUnavailable(error) { return .unavailable("the database is unavailable; retry later", retryAfterSeconds: 1) }
        switch error {
        case let decoding as ProtocolDecodingError:
            return .decodingFailed(decoding)
        case let decoding as DecodingError:
            return .validation([FieldError(decoding: decoding)])
        case is NIOTooManyBytesError:
            return tooLarge
        case let transaction as PostgresTransactionError:
            if let inner = transaction.cause { return problem(for: inner) }
            return ProblemDetails(
                type: "about:blank", title: "Internal Server Error", status: 500, detail: "an unexpected error; see the service log")
        case let http as HTTPError:
            switch http.status {
            case .contentTooLarge: return tooLarge
            case .notFound: return .notFound(http.body ?? "no such resource")
            case .unauthorized: return .unauthorized(http.body ?? "authentication is required")
            case .forbidden: return .forbidden(http.body ?? "not allowed")
            case .badRequest: return .validation([FieldError(field: "", reason: http.body ?? "bad request")])
            default:
                return ProblemDetails(type: "about:blank", title: http.status.reasonPhrase, status: http.status.code, detail: http.body)
            }
        default:
            return ProblemDetails(
                type: "about:blank", title: "Internal Server Error", status: 500, detail: "an unexpected error; see the service log")
        }
    }

    private var tooLarge: ProblemDetails {
        if let maxBodyBytes { return .payloadTooLarge(limitBytes: maxBodyBytes) }
        return ProblemDetails(type: "about:blank", title: "Content Too Large", status: 413, detail: "the body is too large")
    }

    /// The problem+json response (the protocol's wire encoding), with `WWW-Authenticate` on a 401,
    /// `Retry-After` when the problem carries one, and `headers`.
    public static func response(_ problem: ProblemDetails, headers extra: HTTPFields = [:]) -> Response {
        let body = (try? ProtocolCodec.wire.encode(problem)) ?? Array("{\"title\":\"error\",\"status\":\(problem.status)}".utf8)
        var headers = extra
        headers[.contentType] = ProblemDetails.mediaType
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        if let retry = problem.retryAfterSeconds { headers[.retryAfter] = String(retry) }
        return Response(
            status: HTTPResponse.Status(code: problem.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Every error a route throws becomes problem+json (`ProblemMapper`), with the request path as its
/// `instance`; an unexpected error is logged (`loggedProblem`). Control characters in the request are refused first (`RequestTextGuard`);
/// every answer carries the hardening headers (`ResponseHardening`), and the request's id when the
/// context has one (`RequestIdentifiedContext`).
public struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    public let mapper: ProblemMapper
    /// The context's request id, for a context that has one.
    private let requestId: (@Sendable (Context) -> String)?
    /// Whether bodies are checked here; off where `RequestBodyGuardMiddleware` does it after
    /// authentication.
    private let checksBodies: Bool

    public init(_ mapper: ProblemMapper = ProblemMapper(), checkingBodies: Bool = true) {
        self.mapper = mapper
        self.requestId = nil
        self.checksBodies = checkingBodies
    }

    /// For a context with a request id: every answer also carries it as `X-Request-Id`.
    public init(_ mapper: ProblemMapper = ProblemMapper(), checkingBodies: Bool = true) where Context: RequestIdentifiedContext {
        self.mapper = mapper
        self.requestId = { $0.requestId }
        self.checksBodies = checkingBodies
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var response: Response
        do {
            try RequestTextGuard.checkTarget(request)
            if checksBodies { try await RequestTextGuard.checkBody(&request, maxBodyBytes: mapper.bodyLimit) }
            response = try await next(request, context)
        } catch {
            response = ProblemMapper.response(
                mapper.loggedProblem(for: error, request: request, route: context.endpointPath, logger: context.logger))
        }
        if let requestId, response.headers[.requestId] == nil { response.headers[.requestId] = requestId(context) }
        ResponseHardening.apply(to: &response)
        return response
    }
}

/// `RequestTextGuard`'s body check, for routes behind authentication: placed after it (and after rate
/// limiting), so a client that may not send is answered from its headers, before its body is read.
public struct RequestBodyGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    let maxBodyBytes: Int

    public init(_ mapper: ProblemMapper) { maxBodyBytes = mapper.bodyLimit }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        try await RequestTextGuard.checkBody(&request, maxBodyBytes: maxBodyBytes)
        return try await next(request, context)
    }
}

extension ProblemMapper {
    /// The body limit the guard reads up to: the mapper's, else `RequestTextGuard.defaultMaxBodyBytes`.
    public var bodyLimit: Int { maxBodyBytes ?? RequestTextGuard.defaultMaxBodyBytes }

    /// The problem for `error` with the request path as `instance`. A 500 (an unexpected error) is
    /// logged at `error` with its cause, every time; another 5xx mapped here (the database away) at
    /// `warning`, at most once per 10 s (`unavailableLog`). A `ProblemDetails` the handler threw is its
    /// chosen answer and is not logged again. The log names the route's pattern (`route`), not the path,
    /// which can hold a user's or a device's id.
    public func loggedProblem(for error: any Error, request: Request, route: String?, logger: Logger) -> ProblemDetails {
        var problem = problem(for: error)
        if problem.instance == nil { problem.instance = request.uri.path }
        guard problem.status >= 500, !(error is ProblemDetails) else { return problem }
        let metadata: Logger.Metadata = [
            "route": .string(route ?? "(no route)"), "status": "\(problem.status)",
            "error": .string(PostgresFailure.description(of: error)),
        ]
        if problem.status == 500 {
            logger.error("request failed", metadata: metadata)
        } else {
            unavailableLog.log(.warning, "request failed", metadata: metadata, logger: logger)
        }
        return problem
    }
}

extension FieldError {
    /// The field a JSON body failed on, as a dotted path (`shift.start`, `items[2].rssi`), and why.
    public init(decoding error: DecodingError) {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .reduce(into: "") { result, part in
                    result += part.hasPrefix("[") || result.isEmpty ? part : ".\(part)"
                }
        }
        switch error {
        case .keyNotFound(let key, let context):
            self.init(field: path(context.codingPath + [key]), reason: "is required")
        case .valueNotFound(_, let context):
            self.init(field: path(context.codingPath), reason: "is required (null given)")
        case .typeMismatch(let type, let context):
            self.init(field: path(context.codingPath), reason: "must be \(Self.jsonName(type))")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                self.init(field: "", reason: "the body is not valid JSON")
            } else {
                self.init(field: path(context.codingPath), reason: context.debugDescription)
            }
        @unknown default:
            self.init(field: "", reason: "the body does not decode")
        }
    }

    static func jsonName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Int.Type, is Int64.Type, is Int32.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        case is Bool.Type: return "a boolean"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "a valid \(name)"
        }
    }
}

/// A value the database refused for what it is, not for being unavailable: a data exception (SQLSTATE
/// class 22: malformed, out of range, too long) is the client's 400; an integrity violation (class 23)
/// is a 409. The answer never carries the database's words; the log has them.
public struct StorageRefusal: Sendable, Hashable {
    public let sqlState: String

    /// nil for any other SQLSTATE.
    public init?(sqlState: String) {
        guard sqlState.hasPrefix("22") || sqlState.hasPrefix("23") else { return nil }
        self.sqlState = sqlState
    }

    /// The refusal behind `error`, looking inside a failed transaction; nil when it is none.
    public init?(_ error: any Error) {
        guard let failure = PostgresFailure(error) else { return nil }
        self.init(sqlState: failure.sqlState)
    }

    public var isDataException: Bool { sqlState.hasPrefix("22") }

    /// What the client is told.
    public var reason: String {
        isDataException
            ? "a value cannot be stored: it is malformed, out of range or too long" : "the request conflicts with data already stored"
    }

    public var problem: ProblemDetails {
        isDataException ? .validation([FieldError(field: "", reason: reason)]) : .conflict(reason)
    }
}

/// Headers on every answer of every service: `X-Content-Type-Options: nosniff` (a client never guesses
/// another type than the one declared) and `Cache-Control: no-store` (API keys, enrollment codes, device
/// tokens and GATT keys travel in answers, and nothing this product serves is meant to be cached).
public enum ResponseHardening {
    public static func apply(to response: inout Response) {
        response.headers[.xContentTypeOptions] = "nosniff"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
    }
}

/// `ResponseHardening` on every answer, the shared routes' (health, metrics, the document) included.
struct ResponseHardeningMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        ResponseHardening.apply(to: &response)
        return response
    }
}

/// A request context with an id of its request (the gateway's: the raw envelope's `requestId`),
/// answered as `X-Request-Id` on every response `ProblemMiddleware` passes, problems included.
public protocol RequestIdentifiedContext: RequestContext {
    var requestId: String { get }
}

extension HTTPField.Name {
    /// `X-Request-Id`: the id of the request an answer is for.
    public static var requestId: Self { Self(HTTPHeader.requestId)! }
}
