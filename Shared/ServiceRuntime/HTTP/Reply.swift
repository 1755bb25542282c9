import Hummingbird

/// JSON answers of the admin and query routes, encoded with the request context's encoder (the
/// platform's JSON conventions), with the status given.
public enum Reply {
    public static func json<T: Encodable>(
        _ value: T, status: HTTPResponse.Status = .ok, request: Request, context: some RequestContext
    ) throws -> Response {
        var response = try context.responseEncoder.encode(value, from: request, context: context)
        response.status = status
        return response
    }
}
