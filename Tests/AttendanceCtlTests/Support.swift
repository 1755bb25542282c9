import AttendanceCtlCommands
import AttendanceProtocol
import Foundation
import RegistryClient
import Synchronization
import Testing

/// What one command line printed and returned.
struct CLIRun: Sendable, CustomStringConvertible {
    var code: Int32
    var stdout: String
    var stderr: String

    var description: String { "exit \(code)\nstdout:\n\(stdout)\nstderr:\n\(stderr)" }

    /// The stdout parsed as a JSON object.
    func object(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        #expect(code == 0, "\(self)", sourceLocation: sourceLocation)
        let value = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        return try #require(value as? [String: Any], "\(stdout)", sourceLocation: sourceLocation)
    }

    /// The value on the `label:` line of a key/value table.
    func field(_ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let prefix = label + ":"
        let line = try #require(
            stdout.split(separator: "\n").first { $0.hasPrefix(prefix) }, "no \(label) in\n\(stdout)", sourceLocation: sourceLocation)
        return line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
    }
}

/// Runs `attendancectl` in-process with its output captured, the given environment (nothing from
/// the real one) and optionally a fake transport.
func runCLI(_ arguments: [String], environment: [String: String] = [:], transport: (any RegistryTransport)? = nil) async -> CLIRun {
    let capture = CapturedOutput()
    let code = await CLIContext.$current.withValue(capture.context(environment: environment, registryTransport: transport)) {
        await AttendanceCtl.execute(arguments)
    }
    return CLIRun(code: code, stdout: capture.stdout, stderr: capture.stderr)
}

/// A transport that records every request and answers with `respond`.
final class FakeTransport: RegistryTransport {
    private let log = Mutex<[(request: RegistryRequest, baseURL: String)]>([])
    let respond: @Sendable (RegistryRequest) -> Result<RegistryResponse, RegistryClientError>

    init(_ respond: @escaping @Sendable (RegistryRequest) -> Result<RegistryResponse, RegistryClientError>) {
        self.respond = respond
    }

    /// Always the same answer.
    convenience init(status: Int = 200, contentType: String = "application/json", json: String) {
        self.init { _ in .success(RegistryResponse(status: status, contentType: contentType, body: Data(json.utf8))) }
    }

    func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse {
        log.withLock { $0.append((request, baseURL)) }
        return try respond(request).get()
    }

    var requests: [RegistryRequest] { log.withLock { $0.map(\.request) } }
    var baseURLs: [String] { log.withLock { $0.map(\.baseURL) } }

    /// The single request's body as a JSON object.
    func onlyBody(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let requests = requests
        #expect(requests.count == 1, sourceLocation: sourceLocation)
        let body = try #require(requests.first?.body, sourceLocation: sourceLocation)
        return try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any], sourceLocation: sourceLocation)
    }
}

enum SampleJSON {
    static let organization = #"{"createdAt":"2025-09-18T08:30:00.000Z","id":"org-1","name":"Acme"}"#
    static let site = """
        {"createdAt":"2025-09-18T08:30:00.000Z","geofence":{"latitude":10.7769,"longitude":106.7009,"radiusMeters":200},"id":"site-1",\
        "name":"HQ","organizationId":"org-1","shift":{"checkInBeforeStartMinutes":60,"checkOutAfterEndMinutes":120,"earlyExitGraceMinutes":5,\
        "end":"17:30","lateEntryGraceMinutes":10,"start":"08:30"},"timezone":"Asia/Ho_Chi_Minh"}
        """
    static let beacon = """
        {"createdAt":"2025-09-18T08:30:00.000Z","gateId":"gate-1","id":"bcn-1","major":7,"minor":3,"status":"lost",\
        "updatedAt":"2025-09-18T08:31:00.000Z","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"}
        """
}
