import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore

/// The one place every service refuses control characters (U+0000-U+001F and U+007F) in what a client
/// sends: the decoded path, query parameter names and values, and every string of a JSON body (keys
/// included, escaped or not). No identifier, name or time zone of this product contains one, and a NUL
/// is refused by PostgreSQL itself; refusing them at the edge answers a 400 naming the field instead of
/// letting them reach storage. `ProblemMiddleware` runs it before any route; a service that checks who is
/// asking before it reads a body (the gateway) has it check the path and query there, and the body
/// after its authentication (`RequestBodyGuardMiddleware`).
public enum RequestTextGuard {
    /// The decoded path and the query, without reading the body.
    public static func checkTarget(_ request: Request) throws {
        var problems: [FieldError] = []
        let path = request.uri.path
        if let decoded = path.removingPercentEncoding, containsControl(decoded) {
            problems.append(FieldError(field: "path", reason: "must not contain control characters"))
        } else if path.removingPercentEncoding == nil {
            problems.append(FieldError(field: "path", reason: "is not valid percent-encoded UTF-8"))
        }
        problems += invalidQueryEncodings(request.uri.query)
        for (name, value) in request.uri.queryParameters {
            if containsControl(String(name)) {
                problems.append(FieldError(field: "query", reason: "a parameter name contains control characters"))
            } else if containsControl(String(value)) {
                problems.append(FieldError(field: String(name), reason: "must not contain control characters"))
            }
        }
        if !problems.isEmpty { throw ProblemDetails.validation(problems) }
    }

    /// A JSON body's strings (not for GET, HEAD and DELETE, which carry none). The body is read (up to
    /// `maxBodyBytes`; more is a 413 through `ProblemMapper`) and stays readable by the route.
    public static func checkBody(_ request: inout Request, maxBodyBytes: Int) async throws {
        guard request.method != .get, request.method != .head, request.method != .delete else { return }
        let body = try await request.collectBody(upTo: maxBodyBytes)
        guard body.readableBytes > 0, jsonHasControlCharacter(body.readableBytesView) else { return }
        throw ProblemDetails.validation([
            FieldError(field: fieldWithControl(in: Data(body.readableBytesView)) ?? "", reason: "must not contain control characters")
        ])
    }

    /// A query parameter whose name or value is not valid percent-encoded UTF-8 (`siteId=%ff`): the
    /// decoded parameters would carry U+FFFD in its place and match nothing, so it is refused instead,
    /// named by its name (or `query` when the name itself is broken).
    static func invalidQueryEncodings(_ query: String?) -> [FieldError] {
        guard let query, !query.isEmpty else { return [] }
        var problems: [FieldError] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts[0].removingPercentEncoding else {
                problems.append(FieldError(field: "query", reason: "a parameter name is not valid percent-encoded UTF-8"))
                continue
            }
            if parts.count == 2, parts[1].removingPercentEncoding == nil {
                problems.append(FieldError(field: name, reason: "is not valid percent-encoded UTF-8"))
            }
        }
        return problems
    }

    /// The body limit when a service names none.
    public static let defaultMaxBodyBytes = 1 << 20

    /// For text the guard cannot see: what a route decodes itself (an opaque cursor's payload).
    public static func containsControlCharacter(_ text: String) -> Bool { containsControl(text) }

    static func containsControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// Does a JSON text hold a control character inside a string, raw or escaped (`\n`, `\u0000`,
    /// `\u007f`, ...)? One pass over the bytes; whitespace between tokens is not inside a string.
    static func jsonHasControlCharacter(_ bytes: some Collection<UInt8>) -> Bool {
        var inString = false
        var i = bytes.startIndex
        func hex(_ b: UInt8) -> UInt32? {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(b - UInt8(ascii: "A") + 10)
            default: nil
            }
        }
        while i != bytes.endIndex {
            let b = bytes[i]
            if !inString {
                if b == UInt8(ascii: "\"") { inString = true }
                i = bytes.index(after: i)
                continue
            }
            if b == UInt8(ascii: "\"") {
                inString = false
            } else if b < 0x20 || b == 0x7F {
                return true
            } else if b == UInt8(ascii: "\\") {
                i = bytes.index(after: i)
                guard i != bytes.endIndex else { return false }
                switch bytes[i] {
                case UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    return true
                case UInt8(ascii: "u"):
                    var value: UInt32 = 0
                    for _ in 0..<4 {
                        i = bytes.index(after: i)
                        guard i != bytes.endIndex, let digit = hex(bytes[i]) else { return false }
                        value = value << 4 | digit
                    }
                    if value < 0x20 || value == 0x7F { return true }
                default:
                    break
                }
            }
            i = bytes.index(after: i)
        }
        return false
    }

    /// The dotted path of the first key or string value holding a control character (`name`,
    /// `items[2].siteId`), for the 400; nil when the body is not JSON.
    static func fieldWithControl(in data: Data) -> String? {
        guard let root = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
        func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
        func find(_ value: Any, _ path: String) -> String? {
            switch value {
            case let text as String:
                return containsControl(text) ? path : nil
            case let object as [String: Any]:
                for key in object.keys.sorted() {
                    if containsControl(key) { return join(path, "(a key)") }
                    if let found = find(object[key]!, join(path, key)) { return found }
                }
                return nil
            case let array as [Any]:
                for (index, element) in array.enumerated() {
                    if let found = find(element, "\(path)[\(index)]") { return found }
                }
                return nil
            default:
                return nil
            }
        }
        return find(root, "")
    }
}

extension RequestContext {
    /// A path parameter, percent-decoded (`AC%3A23%3A3F` is `AC:23:3F`): the router hands them over
    /// as they were sent. Invalid percent-encoding is returned as sent, for the route's own check to refuse.
    public func pathParameter(_ name: String) -> String? {
        guard let raw = parameters.get(name) else { return nil }
        return raw.removingPercentEncoding ?? raw
    }
}
