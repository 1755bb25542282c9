import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore
import ServiceRuntime

/// Every error becomes problem+json through the common `ProblemMapper` (the protocol's decoding
/// errors as a 400 naming the field, 413 naming the gateway's body limit), and every answer, error or
/// not, carries `X-Request-Id`.
public struct GatewayProblemMiddleware: RouterMiddleware {
    public typealias Context = GatewayRequestContext
    let mapper: ProblemMapper

    public init(maxBodyBytes: Int) {
        self.mapper = ProblemMapper(maxBodyBytes: maxBodyBytes)
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            var response = try await next(request, context)
            if response.headers[.requestId] == nil { response.headers[.requestId] = context.requestId }
            return response
        } catch {
            return Reply.problem(mapper.loggedProblem(for: error, request: request, logger: context.logger), requestId: context.requestId)
        }
    }
}
