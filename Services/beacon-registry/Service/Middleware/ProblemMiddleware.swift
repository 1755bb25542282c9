import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import NIOCore

/// Turns every error into an RFC 9457 problem+json answer: `ProblemDetails` as is, `RegistryError`
/// through its `problemDetails`, `DecodingError` as a 400 naming the field, Hummingbird's
/// `HTTPError` (unknown route, body too large) with its status. Only an unexpected error is a 500,
/// and its details go to the log, not to the client.
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
        case let registry as RegistryError:
            return registry.problemDetails
        case let decoding as DecodingError:
            return .validation([fieldError(decoding)])
        case let plan as CP28PlanError:
            return .validation([plan.fieldError])
        case is NIOTooManyBytesError:
            return .payloadTooLarge(limitBytes: RegistryLimits.maxBodyBytes)
        case let http as HTTPError:
            switch http.status {
            case .contentTooLarge: return .payloadTooLarge(limitBytes: RegistryLimits.maxBodyBytes)
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

    static func fieldError(_ error: DecodingError) -> FieldError {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .reduce(into: "") { result, part in
                    result += part.hasPrefix("[") || result.isEmpty ? part : ".\(part)"
                }
        }
        switch error {
        case .keyNotFound(let key, let context):
            return FieldError(field: path(context.codingPath + [key]), reason: "is required")
        case .valueNotFound(_, let context):
            return FieldError(field: path(context.codingPath), reason: "is required (null given)")
        case .typeMismatch(let type, let context):
            return FieldError(field: path(context.codingPath), reason: "must be \(jsonName(type))")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return FieldError(field: "", reason: "the body is not valid JSON") }
            return FieldError(field: path(context.codingPath), reason: context.debugDescription)
        @unknown default:
            return FieldError(field: "", reason: "the body does not decode")
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

    public static func response(_ problem: ProblemDetails) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(problem)) ?? Data("{\"title\":\"error\",\"status\":\(problem.status)}".utf8)
        var headers: HTTPFields = [.contentType: ProblemDetails.mediaType]
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        if let retry = problem.retryAfterSeconds { headers[.retryAfter] = String(retry) }
        return Response(
            status: HTTPResponse.Status(code: problem.status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
