import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Prometheus
import Synchronization
import Testing
import _ConnectionPoolModule

@testable import ServiceRuntime

/// What the services log when a request fails: an unexpected error every time, the database's absence
/// once per interval, a handler's chosen answer not at all, and never a path that names a person.
@Suite("Failure logs at production volume")
struct FailureLoggingTests {
    final class Lines: Sendable {
        let items = Mutex<[[String: String]]>([])
        func append(_ line: String) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return }
            items.withLock { $0.append(object.compactMapValues { $0 as? String }) }
        }
        func matching(_ message: String) -> [[String: String]] { items.withLock { $0.filter { $0["msg"] == message } } }
        var all: [[String: String]] { items.withLock { $0 } }
    }

    @Test func aFailureRepeatedWithinTheIntervalIsCountedNotLogged() {
        let log = RepeatedFailureLog(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(log.admit(now: start) == 0)
        #expect(log.admit(now: start + .seconds(1)) == nil)
        #expect(log.admit(now: start + .seconds(9)) == nil)
        // The next line says how many were left out since the one before.
        #expect(log.admit(now: start + .seconds(10)) == 2)
        #expect(log.admit(now: start + .seconds(11)) == nil)
        #expect(log.admit(now: start + .seconds(30)) == 1)
    }

    @Test func unexpectedErrorsEveryTimeTheDatabasesAbsenceOncePerIntervalAChosenAnswerNeverAndNoPersonsId() async throws {
        let lines = Lines()
        let logger = Logger(label: "failure-logging") { label in
            JSONLogHandler(label: label, service: "svc", logLevel: .info) { lines.append($0) }
        }
        struct Unexpected: Error, CustomStringConvertible { var description: String { "an unexpected state" } }
        let configuration = try ServiceConfiguration.load(service: "test-service", defaultHTTPPort: 0, from: EnvironmentReader([:]))
        let app = ServiceApplication.build(
            configuration: configuration, registry: PrometheusCollectorRegistry(), readiness: [], logger: logger, openAPI: nil
        ) { router in
            router.add(middleware: ProblemMiddleware())
            router.get("/v1/users/:id/unexpected") { _, _ -> String in throw Unexpected() }
            router.get("/v1/users/:id/database") { _, _ -> String in throw ConnectionPoolError.connectionCreationCircuitBreakerTripped }
            router.get("/v1/users/:id/chosen") { _, _ -> String in
                throw ProblemDetails.unavailable("the store is not reachable", retryAfterSeconds: 1)
            }
        }
        try await app.test(.router) { client in
            for _ in 0..<3 {
                for (path, status) in [("unexpected", 500), ("database", 503), ("chosen", 503)] {
                    try await client.execute(uri: "/v1/users/u-4711/\(path)", method: .get) { response in
                        #expect(response.status.code == status, "\(path)")
                    }
                }
            }
        }
        let failed = lines.matching("request failed")
        let unexpected = failed.filter { $0["route"] == "/v1/users/{id}/unexpected" }
        #expect(unexpected.count == 3)
        #expect(unexpected.allSatisfy { $0["level"] == "error" && $0["error"] == "an unexpected state" && $0["status"] == "500" })
        let database = failed.filter { $0["route"] == "/v1/users/{id}/database" }
        #expect(database.count == 1)
        #expect(database.first?["level"] == "warning")
        #expect(failed.count == 4, "the chosen 503 is the handler's answer, not logged again: \(failed)")
        #expect(!lines.all.contains { $0.values.contains { $0.contains("u-4711") } }, "a log line names the user: \(lines.all)")
    }

    /// An auditor asks who changed what and when: every admin change that succeeds is one `info` line
    /// with the key, the method, the route and the path; reads and refused changes are not.
    @Test func everyAdminChangeIsOneLineNamingTheKeyAndWhatChanged() async throws {
        struct OneKey: AdminKeyVerifier {
            func verify(presentedKey: String) async throws -> APIKey? {
                presentedKey == "brk_k1.secret" ? APIKey(id: "k1", name: "operator", role: .admin, createdAt: Date(), revokedAt: nil) : nil
            }
        }
        let lines = Lines()
        let logger = Logger(label: "admin-audit") { label in
            JSONLogHandler(label: label, service: "svc", logLevel: .info) { lines.append($0) }
        }
        let configuration = try ServiceConfiguration.load(service: "test-service", defaultHTTPPort: 0, from: EnvironmentReader([:]))
        let app = ServiceApplication.build(
            configuration: configuration, registry: PrometheusCollectorRegistry(), readiness: [], context: AdminContext.self,
            logger: logger,
            openAPI: nil
        ) { router in
            router.add(middleware: ProblemMiddleware())
            let admin = router.group("v1/admin").add(middleware: AdminAuthMiddleware<AdminContext>(verifier: OneKey()))
            admin.get("sites/:id") { _, _ in "a site" }
            admin.put("sites/:id/geofence") { _, _ in "moved" }
            admin.post("devices/:id/revoke") { _, _ -> String in throw ProblemDetails.validation([FieldError(field: "id", reason: "no")]) }
        }
        try await app.test(.router) { client in
            let key: HTTPFields = [.authorization: "Bearer brk_k1.secret"]
            for (method, uri, status) in [
                (HTTPRequest.Method.get, "/v1/admin/sites/s-1", 200), (.put, "/v1/admin/sites/s-1/geofence", 200),
                (.post, "/v1/admin/devices/d-1/revoke", 400),
            ] {
                try await client.execute(uri: uri, method: method, headers: key) { response in
                    #expect(response.status.code == status, "\(method) \(uri)")
                }
            }
        }
        let changes = lines.matching("admin change")
        #expect(changes.count == 1, "\(changes)")
        let change = try #require(changes.first)
        #expect(change["level"] == "info" && change["apiKey"] == "k1" && change["role"] == "admin" && change["method"] == "PUT")
        #expect(change["route"] == "/v1/admin/sites/{id}/geofence" && change["path"] == "/v1/admin/sites/s-1/geofence")
        #expect(change["status"] == "200")
    }
}
