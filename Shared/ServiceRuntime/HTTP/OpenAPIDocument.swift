import AttendanceProtocol
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// A service's OpenAPI document: the `openapi.yaml` kept beside its code (`Service/Resources/`),
/// served at `GET /openapi.yaml` by `ServiceApplication` and checked against the router by the
/// service's tests and against the running service by schemathesis (`make test`).
public struct OpenAPIDocument: Sendable {
    public let text: String

    public init(text: String) {
        self.text = text
    }

    /// The `Resources/openapi.yaml` of a service target's bundle (`OpenAPIDocument(bundle: .module)`);
    /// nil when the target bundles none.
    public init?(bundle: Bundle) {
        guard
            let url = bundle.url(forResource: "openapi", withExtension: "yaml", subdirectory: "Resources")
                ?? bundle.url(forResource: "openapi", withExtension: "yaml"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { return nil }
        self.text = text
    }

    /// Every `METHOD /path` the document declares. The document keeps paths at two spaces of
    /// indentation and methods at four.
    public var operations: Set<String> {
        var operations = Set<String>()
        var inPaths = false
        var currentPath: String?
        let methods: Set<String> = ["get", "post", "put", "patch", "delete", "head", "options"]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if !line.hasPrefix(" ") && !line.isEmpty { break }
            if line.hasPrefix("  /") && line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    ") && !line.hasPrefix("     ") && line.hasSuffix(":"),
                let path = currentPath, methods.contains(String(line.dropFirst(4).dropLast()))
            {
                operations.insert("\(line.dropFirst(4).dropLast().uppercased()) \(path)")
            }
        }
        return operations
    }

    /// Every `METHOD /path` a service answers with these routes (and `ServiceApplication`'s own),
    /// spelled as a document spells them (`:id` becomes `{id}`).
    public static func operations<Context>(of router: Router<Context>) -> Set<String> {
        let routed = router.routes.map { route in
            let path = route.path.components.map { element in
                let text = element.description
                return text.hasPrefix(":") ? "{\(text.dropFirst())}" : text
            }
            return "\(route.method) /\(path.joined(separator: "/"))"
        }
        return Set(routed).union(ServiceApplication.sharedOperations)
    }

    /// How what `router` serves differs from what the document declares; `isEmpty` when the document
    /// describes exactly the service's routes.
    public func drift<Context>(from router: Router<Context>) -> OpenAPIDrift {
        let routed = Self.operations(of: router)
        let documented = operations
        return OpenAPIDrift(
            routed: routed.count, undocumented: routed.subtracting(documented).sorted(), notRouted: documented.subtracting(routed).sorted())
    }

    /// `GET /openapi.yaml`, as `application/yaml`.
    func addRoute<Context: RequestContext>(to router: Router<Context>) {
        let body = ByteBuffer(string: text)
        router.get("/openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml; charset=utf-8"], body: ResponseBody(byteBuffer: body))
        }
    }
}

/// Where a router and its OpenAPI document disagree (`OpenAPIDocument.drift(from:)`).
public struct OpenAPIDrift: Sendable, CustomStringConvertible {
    /// How many operations the router serves.
    public let routed: Int
    /// Served, not in the document.
    public let undocumented: [String]
    /// In the document, not served.
    public let notRouted: [String]

    public var isEmpty: Bool { undocumented.isEmpty && notRouted.isEmpty }
    public var description: String { "undocumented: \(undocumented); documented but not routed: \(notRouted)" }
}

/// The routes of a built router, for answering a method a path does not have with 405 and `Allow`
/// (a path no route serves stays 404). Filled once the service's routes are added.
final class RouteMethodTable: Sendable {
    private let routes = Mutex<[(path: RouterPath, methods: [HTTPRequest.Method])]>([])

    func record<Context>(_ router: Router<Context>) {
        let grouped = Dictionary(grouping: router.routes, by: { $0.path.description })
        routes.withLock { routes in
            routes = grouped.values.compactMap { descriptions in
                descriptions.first.map { (path: $0.path, methods: descriptions.map(\.method)) }
            }
        }
    }

    /// The methods the path is served with, `HEAD` wherever `GET` is (`ServiceApplication` serves it);
    /// empty when no route serves it. As in the router, the most literal route wins (`/events/batch`
    /// over `/events/:key`), segment by segment.
    func methods(for path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        let methods = routes.withLock { routes in
            let scored = routes.compactMap { route in Self.specificity(route.path, segments).map { (route, $0) } }
            guard let best = scored.map(\.1).max(by: { $0.lexicographicallyPrecedes($1) }) else { return [HTTPRequest.Method]() }
            return scored.filter { $0.1 == best }.flatMap(\.0.methods)
        }
        return methods.contains(.get) && !methods.contains(.head) ? methods + [.head] : methods
    }

    /// Per segment, 1 for a literal match and 0 for a capture or wildcard; nil when the route does
    /// not match the path.
    private static func specificity(_ route: RouterPath, _ segments: [Substring]) -> [Int]? {
        var index = 0
        var score: [Int] = []
        for element in route.components {
            if element.description == "**" { return score }
            guard index < segments.count, element ~= segments[index] else { return nil }
            score.append(element == segments[index] ? 1 : 0)
            index += 1
        }
        return index == segments.count ? score : nil
    }
}

/// 405 Method Not Allowed, with `Allow`, for a request whose path is routed only for other methods.
/// Only a 404 (answered or thrown) is looked at again, so a routed request pays nothing.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let table: RouteMethodTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            if let refusal = methodNotAllowed(request) { return refusal }
            throw error
        }
        guard response.status == .notFound, let refusal = methodNotAllowed(request) else { return response }
        return refusal
    }

    private func methodNotAllowed(_ request: Request) -> Response? {
        let methods = table.methods(for: request.uri.path)
        guard !methods.isEmpty, !methods.contains(request.method) else { return nil }
        var problem = ProblemDetails(
            type: "urn:problem:attendance:method-not-allowed", title: "Method not allowed", status: 405,
            detail: "\(request.method) is not served here; allowed: \(methods.map(\.rawValue).sorted().joined(separator: ", "))"
        )
        problem.instance = request.uri.path
        return ProblemMapper.response(problem, headers: [.allow: methods.map(\.rawValue).sorted().joined(separator: ", ")])
    }
}

extension HTTPField.Name {
    /// `Allow`: the methods a 405's path is served with.
    public static var allow: Self { Self("Allow")! }
}
