import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore

/// Turns every error into an RFC 9457 problem+json answer: `ProblemDetails`
/// as is, Hummingbird's `HTTPError` (unknown route) with its status, anything else a 500 whose details
/// go to the log, not to the client.
public struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            var problem = Self.problem(for: error)
            if problem.instance == nil { problem.instance = request.uri.path }
            if problem.status >= 500 {
                context.logger.error("request failed", metadata: ["path": .string(request.uri.path), "error": .string(String(describing: error))])
            }
            return Self.response(problem)
        }
    }

    public static func problem(for error: any Error) -> ProblemDetails {
        switch error {
        case let problem as ProblemDetails:
            return problem
        case let http as HTTPError:
            switch http.status {
            case .notFound: return .notFound(http.body ?? "no such resource")
            case .unauthorized: return .unauthorized(http.body ?? "authentication is required")
            case .forbidden: return .forbidden(http.body ?? "not allowed")
            case .badRequest: return .validation([FieldError(field: "", reason: http.body ?? "bad request")])
            default:
                return ProblemDetails(type: "about:blank", title: http.status.reasonPhrase, status: http.status.code, detail: http.body)
            }
        default:
            return ProblemDetails(type: "about:blank", title: "Internal Server Error", status: 500, detail: "an unexpected error; see the service log")
        }
    }

    public static func response(_ problem: ProblemDetails) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(problem)) ?? Data("{\"title\":\"error\",\"status\":\(problem.status)}".utf8)
        var headers: HTTPFields = [.contentType: ProblemDetails.mediaType]
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        if let retry = problem.retryAfterSeconds { headers[.retryAfter] = String(retry) }
        return Response(status: HTTPResponse.Status(code: problem.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}
