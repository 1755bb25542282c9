import AsyncHTTPClient
import AttendanceCtlCommands
import AttendanceProtocol
import Foundation
import NIOCore
import Testing

@testable import RegistryClient

@Suite("Registry errors as one line")
struct ErrorLineTests {
    @Test func validationProblemNamesEveryFailingField() {
        let problem = ProblemDetails.validation([
            FieldError(field: "geofence.radiusMeters", reason: "must be within 10...5000 metres (150-300 is typical)"),
            FieldError(field: "timezone", reason: "must be an IANA time zone name such as Asia/Ho_Chi_Minh"),
        ])
        let line = RegistryClientError.problem(problem).description
        #expect(
            line == "The request is not valid (HTTP 400): geofence.radiusMeters: must be within 10...5000 metres (150-300 is typical); "
                + "timezone: must be an IANA time zone name such as Asia/Ho_Chi_Minh")
    }

    @Test func titleAndDetail() {
        let line = RegistryClientError.problem(.forbidden("this operation needs the admin role;\nAPI key k1 has viewer")).description
        #expect(line == "Not allowed (HTTP 403): this operation needs the admin role; API key k1 has viewer")
        #expect(!line.contains("\n"))
    }

    @Test func aWholeBodyErrorIsCalledBody() {
        let line = RegistryClientError.problem(.validation([FieldError(field: "", reason: "the body is not valid JSON")])).description
        #expect(line.hasSuffix(": body: the body is not valid JSON"))
    }

    @Test func problemWithoutDetailIsItsTitleAndStatus() {
        let line = RegistryClientError.problem(ProblemDetails(type: "about:blank", title: "Not Found", status: 404)).description
        #expect(line == "Not Found (HTTP 404)")
    }

    @Test func retryAfterIsShown() {
        let problem = ProblemDetails(
            type: "about:blank", title: "Service Unavailable", status: 503, detail: "contention", retryAfterSeconds: 2)
        #expect(RegistryClientError.problem(problem).description == "Service Unavailable (HTTP 503): contention; retry after 2 s")
    }

    @Test func otherFailures() {
        #expect(
            RegistryClientError.unreachable(url: "http://127.0.0.1:1", reason: "connection refused").description
                == "cannot reach registry at http://127.0.0.1:1: connection refused")
        #expect(RegistryClientError.missingAPIKey.description.hasPrefix("no API key: pass --api-key KEY or set ATTENDANCE_API_KEY"))
        #expect(
            RegistryClientError.unexpectedStatus(502, body: "<html>\n<b>Bad gateway</b>\n</html>").description
                == "registry answered HTTP 502: <html> <b>Bad gateway</b> </html>")
        #expect(RegistryClientError.invalidURL("localhost:8083").description.contains("\"localhost:8083\""))
    }

    /// A problem body with fields this client does not know, or missing optional ones, still reads.
    @Test func problemBodiesAreReadLeniently() async throws {
        let body =
            #"{"type":"urn:problem:attendance:validation","title":"The request is not valid","status":400,"#
            + #""errors":[{"field":"name","reason":"is required"}],"action":{"kind":"something-new"},"extra":[1,2]}"#
        let transport = FakeTransport(status: 400, contentType: "application/problem+json", json: body)
        let run = await runCLI(["registry", "organizations", "create", "--name", "X", "--api-key", "k"], transport: transport)
        #expect(run.code == 1)
        #expect(run.stderr == "Error: The request is not valid (HTTP 400): name: is required")
        #expect(run.stdout.isEmpty)
    }

    @Test func anErrorStatusWithoutAProblemBody() async {
        let transport = FakeTransport(status: 502, contentType: "text/html", json: "<h1>Bad Gateway</h1>")
        let run = await runCLI(["registry", "orgs", "list", "--api-key", "k"], transport: transport)
        #expect(run.code == 1)
        #expect(run.stderr == "Error: registry answered HTTP 502: <h1>Bad Gateway</h1>")
    }

    @Test func aSuccessWhoseBodyIsNotTheDocumentedJSON() async {
        let transport = FakeTransport(json: #"{"id":"org-1"}"#)
        let run = await runCLI(["registry", "orgs", "get", "org-1", "--api-key", "k"], transport: transport)
        #expect(run.code == 1)
        #expect(
            run.stderr
                == "Error: unexpected answer from the registry: /v1/admin/organizations/org-1 did not return the documented JSON (name is missing)"
        )
    }

    @Test func transportFailuresAreOneLine() async {
        let transport = FakeTransport { _ in .failure(.unreachable(url: "http://registry.invalid:8083", reason: "connection timed out")) }
        let run = await runCLI(
            ["registry", "orgs", "list", "--api-key", "k", "--url", "http://registry.invalid:8083"], transport: transport)
        #expect(run.code == 1)
        #expect(run.stderr == "Error: cannot reach registry at http://registry.invalid:8083: connection timed out")
    }

    /// A change sent without an answer may have been applied: a script is told so (exit 75), not that
    /// it failed (exit 1), so it looks before it repeats a user's creation or a key's rotation.
    @Test func aChangeWithoutAnAnswerSaysItMayHaveBeenApplied() async {
        let transport = FakeTransport { _ in .failure(.outcomeUnknown(url: "http://registry.test:8083", reason: "no answer in time")) }
        let run = await runCLI(
            ["registry", "users", "create", "--name", "Ana", "--api-key", "k", "--url", "http://registry.test:8083"], transport: transport)
        #expect(run.code == 75)
        #expect(
            run.stderr
                == "Error: the registry at http://registry.test:8083 did not answer the change (no answer in time): it may have applied it; look with get or list before running it again"
        )
        // Only a change, only when the request may have arrived: not a GET, not a connection never made.
        func failure(_ error: any Error, _ method: RegistryRequest.Method) -> RegistryClientError {
            HTTPRegistryTransport.failure(error, method: method, url: "http://registry.test:8083")
        }
        for error: any Error in [HTTPClientError.readTimeout, HTTPClientError.remoteConnectionClosed, NIOTooManyBytesError(maxBytes: 16)] {
            #expect(failure(error, .post) == .outcomeUnknown(url: "http://registry.test:8083", reason: HTTPRegistryTransport.reason(error)))
            #expect(failure(error, .put) != .unreachable(url: "http://registry.test:8083", reason: HTTPRegistryTransport.reason(error)))
            #expect(failure(error, .get) == .unreachable(url: "http://registry.test:8083", reason: HTTPRegistryTransport.reason(error)))
        }
        #expect(
            failure(HTTPClientError.connectTimeout, .post) == .unreachable(url: "http://registry.test:8083", reason: "connection timed out")
        )
    }
}
