import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore
import ServiceRuntime

/// Every error becomes problem+json through the common `ProblemMapper` (the protocol's decoding
/// errors as a 400 naming the field, 413 naming the gateway's body limit), and every answer, error or
/// not, carries `X-Request-Id` and the hardening headers (`ResponseHardening`). Control characters in the
/// request are refused first (`RequestTextGuard`).
package struct GatewayProblemMiddleware: RouterMiddleware {
    package typealias Context = GatewayRequestContext
    let mapper: ProblemMapper

    package init(maxBodyBytes: Int) {
        self.mapper = ProblemMapper(maxBodyBytes: maxBodyBytes)
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var response: Response
        do {
            try await RequestTextGuard.check(&request, maxBodyBytes: mapper.maxBodyBytes ?? RequestTextGuard.defaultMaxBodyBytes)
            response = try await next(request, context)
            if response.headers[.requestId] == nil { response.headers[.requestId] = context.requestId }
        } catch {
            response = GatewayReply.problem(
                mapper.loggedProblem(for: error, request: request, logger: context.logger), requestId: context.requestId)
        }
        ResponseHardening.apply(to: &response)
        return response
    }
}
