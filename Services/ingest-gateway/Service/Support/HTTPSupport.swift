import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore

/// `HTTPField.Name` (swift-http-types; Hummingbird re-exports only `HTTPFields`).
package typealias HTTPFieldName = HTTPFields.Element.Name

extension HTTPFieldName {
    static let idempotencyKey = Self(HTTPHeader.idempotencyKey)!
    static let appVersion = Self(HTTPHeader.appVersion)!
    static let idempotentReplayed = Self(HTTPHeader.idempotentReplayed)!
}

/// Reading device request bodies: `application/json` only (415), at most `maxBytes` (413, checked
/// on `Content-Length` before reading and again while reading), decoded with the protocol codec so
/// a 400 names the failing field.
enum DeviceBody {
    static func requireJSONContentType(_ request: Request) throws(ProblemDetails) {
        let contentType = request.headers[.contentType]
        guard let contentType else { throw .unsupportedMediaType(nil) }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard mediaType == MediaType.json else { throw .unsupportedMediaType(contentType) }
    }

    static func read(_ request: Request, maxBytes: Int) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > maxBytes {
            throw ProblemDetails.payloadTooLarge(limitBytes: maxBytes)
        }
        try requireJSONContentType(request)
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBytes)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.payloadTooLarge(limitBytes: maxBytes)
        }
        guard buffer.readableBytes > 0 else {
            throw ProblemDetails.validation([FieldError(field: "", reason: "a JSON body is required")])
        }
        return Array(buffer.readableBytesView)
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(ProblemDetails) -> T {
        do {
            return try ProtocolCodec.wire.decode(type, from: bytes)
        } catch {
            throw .decodingFailed(error)
        }
    }
}

/// JSON answers in the protocol's wire format (`ProblemMiddleware` adds the request id).
enum GatewayReply {
    static func json<T: Encodable>(_ value: T, status: Int, headers extra: HTTPFields = [:]) -> Response {
        let bytes = (try? ProtocolCodec.wire.encode(value)) ?? Array("{}".utf8)
        var headers = extra
        headers[.contentType] = MediaType.json
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
