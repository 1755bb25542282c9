import AttendanceProtocol
import Foundation

/// Why a registry call failed, each as one line an operator can act on.
public enum RegistryClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An admin operation without a key.
    case missingAPIKey
    /// The registry URL given (`--url`, `REGISTRY_URL`) is not an http(s) URL.
    case invalidURL(String)
    /// No HTTP answer: refused, timed out, unresolvable host.
    case unreachable(url: String, reason: String)
    /// A change (POST, PUT, PATCH) was sent and no answer came (timed out, connection closed): the registry
    /// may have applied it. Repeating it blindly can apply it twice (a second user, a key rotated twice).
    case outcomeUnknown(url: String, reason: String)
    /// An RFC 9457 problem answer.
    case problem(ProblemDetails)
    /// An error status without a problem body (a proxy's error page, say).
    case unexpectedStatus(Int, body: String)
    /// A success status whose body is not what the API document promises.
    case unexpectedAnswer(String)
    /// A request that cannot be written as JSON (a number that is not finite), so it was never sent.
    case unsendable(String)

    public var description: String {
        switch self {
        case .missingAPIKey:
            return "no API key: pass --api-key KEY or set ATTENDANCE_API_KEY (an admin creates keys with "
                + "'attendancectl registry api-keys create'; the first one is printed by the registry started with REGISTRY_BOOTSTRAP=1)"
        case .invalidURL(let url):
            return "invalid registry URL \"\(url)\": expected http://HOST:PORT (--url or REGISTRY_URL)"
        case .unreachable(let url, let reason):
            return "cannot reach registry at \(url): \(reason)"
        case .outcomeUnknown(let url, let reason):
            return "the registry at \(url) did not answer the change (\(reason)): it may have applied it; "
                + "look with get or list before running it again"
        case .problem(let problem):
            return Self.line(for: problem)
        case .unexpectedStatus(let status, let body):
            let excerpt = Self.singleLine(String(body.prefix(200))).trimmingCharacters(in: .whitespaces)
            return "registry answered HTTP \(status)" + (excerpt.isEmpty ? "" : ": \(excerpt)")
        case .unexpectedAnswer(let reason):
            return "unexpected answer from the registry: \(reason)"
        case .unsendable(let reason):
            return "the request was not sent: \(reason)"
        }
    }

    /// `Title (HTTP status): detail; field: reason; field: reason` on one line.
    public static func line(for problem: ProblemDetails) -> String {
        var text = "\(problem.title) (HTTP \(problem.status))"
        let fields = (problem.errors ?? []).map { "\($0.field.isEmpty ? "body" : $0.field): \($0.reason)" }
        var parts: [String] = []
        // The registry's validation detail repeats the first failing field: say it once.
        if let detail = problem.detail?.trimmingCharacters(in: .whitespacesAndNewlines), !detail.isEmpty, !fields.contains(detail) {
            parts.append(detail)
        }
        parts += fields
        for reason in problem.reasons ?? [] { parts.append(reason) }
        if let retry = problem.retryAfterSeconds { parts.append("retry after \(retry) s") }
        if !parts.isEmpty { text += ": " + parts.joined(separator: "; ") }
        return singleLine(text)
    }

    /// Newlines and tabs as spaces: every message is one line.
    static func singleLine(_ text: String) -> String {
        text.split(whereSeparator: { $0.isNewline || $0 == "\t" }).joined(separator: " ")
    }

    /// The error a non-2xx answer stands for: its problem when the body is one, else the status.
    static func from(_ response: RegistryResponse) -> RegistryClientError {
        if let problem = LenientProblem.decode(response.body) { return .problem(problem) }
        return .unexpectedStatus(response.status, body: String(decoding: response.body, as: UTF8.self))
    }
}

/// Reads a problem body field by field, so that an unknown extension never hides the title.
struct LenientProblem: Decodable {
    struct Field: Decodable {
        var field: String?
        var reason: String?
    }

    var type: String?
    var title: String?
    var status: Int?
    var detail: String?
    var instance: String?
    var errors: [Field]?
    var reasons: [String]?
    var retryAfterSeconds: Int?

    static func decode(_ data: Data) -> ProblemDetails? {
        guard let body = try? JSONDecoder().decode(LenientProblem.self, from: data), let title = body.title, let status = body.status
        else { return nil }
        let errors = body.errors?.map { FieldError(field: $0.field ?? "", reason: $0.reason ?? "is invalid") }
        return ProblemDetails(
            type: body.type ?? "about:blank", title: title, status: status, detail: body.detail, instance: body.instance,
            errors: errors, reasons: body.reasons, retryAfterSeconds: body.retryAfterSeconds
        )
    }
}
