import AttendanceProtocol
import Crypto
import Foundation
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

    /// A JSON answer a client may already hold: 200 with a strong `ETag` of the encoded body and
    /// `Cache-Control: no-cache` (ask again each time, revalidating), or 304 Not Modified with the same
    /// headers and no body when the request's `If-None-Match` names that tag (or is `*`).
    public static func revalidatedJSON<T: Encodable, Context: RequestContext>(
        _ value: T, request: Request, context: Context
    ) throws -> Response where Context.Encoder == JSONEncoder {
        let body = try context.responseEncoder.encode(value)
        let tag = entityTag(of: body)
        var headers: HTTPFields = [.eTag: tag, .cacheControl: "no-cache"]
        if let condition = request.headers[.ifNoneMatch], ifNoneMatch(condition, matches: tag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// A strong entity tag of `body`: the first 16 bytes of its SHA-256, in hex, quoted.
    static func entityTag(of body: Data) -> String {
        "\"" + Hex.encode(Array(SHA256.hash(data: body).prefix(16))) + "\""
    }

    /// `If-None-Match` (a list of entity tags, or `*`) compared weakly with `tag`, as for a GET: a
    /// weak tag (`W/"…"`) matches the strong tag with the same opaque value. A malformed member
    /// matches nothing.
    static func ifNoneMatch(_ field: String, matches tag: String) -> Bool {
        for member in field.split(separator: ",") {
            var candidate = member.trimmingCharacters(in: .whitespaces)
            if candidate == "*" { return true }
            if candidate.hasPrefix("W/") { candidate.removeFirst(2) }
            if candidate == tag { return true }
        }
        return false
    }
}
