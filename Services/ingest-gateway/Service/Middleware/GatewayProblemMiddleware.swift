import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore

/// Turns every error into an RFC 9457 problem+json answer (as the registry's `ProblemMiddleware`
/// does): `ProblemDetails` as is, `ProtocolDecodingError` as a 400 naming the field, Hummingbird's
/// `HTTPError` with its status. Only an unexpected error is a 500, its details in the log. Every
/// answer carries `X-Request-Id`.
public struct GatewayProblemMiddleware: RouterMiddleware {
    public typealias Context = GatewayRequestContext
    let maxBodyBytes: Int

    public init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            var response = try await next(request, context)
            if response.headers[.requestId] == nil { response.headers[.requestId] = context.requestId }
            return response
        } catch {
            var problem = problem(for: error)
            if problem.instance == nil { problem.instance = request.uri.path }
            if problem.status >= 500 {
                context.logger.error("request failed", metadata: ["path": .string(request.uri.path), "error": .string(String(describing: error))])
            }
            return Reply.problem(problem, requestId: context.requestId)
        }
    }

    func problem(for error: any Error) -> ProblemDetails {
        switch error {
        case let problem as ProblemDetails:
            return problem
        case let decoding as ProtocolDecodingError:
            return .decodingFailed(decoding)
        case is NIOTooManyBytesError:
            return .payloadTooLarge(limitBytes: maxBodyBytes)
        case let http as HTTPError:
            switch http.status {
            case .contentTooLarge: return .payloadTooLarge(limitBytes: maxBodyBytes)
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
}
