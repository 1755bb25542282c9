import Foundation
import Hummingbird
import KafkaClient
import NIOFoundationEssentialsCompat
import PostgresNIO
import Synchronization

/// One dependency the service needs to do its work. Ready means every check passes.
public protocol ReadinessCheck: Sendable {
    var name: String { get }
    /// Throws when the dependency is unusable; must answer within a second or two.
    func check() async throws
}

public struct PostgresReadinessCheck: ReadinessCheck {
    public let name = "postgres"
    let client: PostgresClient

    public init(client: PostgresClient) { self.client = client }

    /// How long the check waits for a connection and an answer.
    public static let answerWithin: Duration = .seconds(2)

    /// Fails with `PostgresNotAnswering` when the database does not answer in time: the pool keeps
    /// retrying a database that is down, so a query alone would wait for as long as it stays down.
    public func check() async throws {
        let client = client
        do {
            try await withTimeout(Self.answerWithin) {
                _ = try await client.query("SELECT 1", logger: Logger(label: "readiness")).collect()
            }
        } catch is TimeoutError {
            throw PostgresNotAnswering()
        }
    }
}

/// PostgreSQL gave no answer to the readiness query within `PostgresReadinessCheck.answerWithin`.
public struct PostgresNotAnswering: Error, CustomStringConvertible {
    public var description: String { "PostgreSQL did not answer within \(PostgresReadinessCheck.answerWithin)" }
}

/// Checks the broker connection with a metadata request through an existing client.
public struct KafkaReadinessCheck: ReadinessCheck {
    public let name = "kafka"
    let metadata: @Sendable () async throws -> [String: Int32]

    public init(producer: KafkaProducer) { metadata = { try await producer.metadata(timeoutMs: 2_000) } }
    public init(consumer: KafkaConsumer) { metadata = { try await consumer.metadata(timeoutMs: 2_000) } }

    public func check() async throws { _ = try await metadata() }
}

/// `/health/live` answers while the process serves HTTP; `/health/ready` only when every
/// dependency answers, so an orchestrator routes traffic only to instances that can work.
///
/// Requests that arrive while the dependencies are being checked share that check's answer: a burst of
/// probes, or a client polling hard while the broker is down, checks each dependency once at a time
/// instead of queueing a broker round trip per request behind the client's own blocking calls.
public struct HealthController<Context: RequestContext>: Sendable {
    let service: String
    let checks: [any ReadinessCheck]
    let inProgress = SharedEvaluation<HealthReport>()

    public func addRoutes(to router: Router<Context>) {
        router.get("/health/live") { _, _ in
            HealthReport(status: "ok", service: service, checks: [:])
        }
        router.get("/health/ready") { _, _ -> Response in
            let report = await readiness()
            let body = try JSONEncoder.health.encode(report)
            return Response(
                status: report.status == "ok" ? .ok : .serviceUnavailable,
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(data: body))
            )
        }
    }

    func readiness() async -> HealthReport {
        await inProgress.value { [service, checks] in await Self.evaluate(service: service, checks: checks) }
    }

    private static func evaluate(service: String, checks: [any ReadinessCheck]) async -> HealthReport {
        let results = await withTaskGroup(of: (String, String).self) { group in
            for check in checks {
                group.addTask {
                    do {
                        try await withTimeout(.seconds(3)) { try await check.check() }
                        return (check.name, "ok")
                    } catch {
                        return (check.name, "failing: \(error)")
                    }
                }
            }
            var results: [String: String] = [:]
            for await (name, status) in group { results[name] = status }
            return results
        }
        let ok = results.values.allSatisfy { $0 == "ok" }
        return HealthReport(status: ok ? "ok" : "unavailable", service: service, checks: results)
    }
}

public struct HealthReport: ResponseCodable, Sendable {
    public let status: String
    public let service: String
    public let checks: [String: String]
}

extension JSONEncoder {
    static let health: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}

/// One evaluation at a time: callers that arrive while one runs get its result; the next caller after it
/// finished starts a new one. The evaluation runs in a task of its own, so a caller that goes away
/// (a client that disconnected) does not cancel it for the others.
final class SharedEvaluation<Value: Sendable>: Sendable {
    private let running = Mutex<Task<Value, Never>?>(nil)

    func value(_ evaluate: @escaping @Sendable () async -> Value) async -> Value {
        let task = running.withLock { running in
            if let task = running { return task }
            let task = Task { await evaluate() }
            running = task
            return task
        }
        let value = await task.value
        running.withLock { if $0 == task { $0 = nil } }
        return value
    }
}

/// `withTimeout`'s error: the body did not finish in time.
public struct TimeoutError: Error, CustomStringConvertible {
    public var description: String { "timed out" }
}

/// Runs `body`, failing with `TimeoutError` if it takes longer than `duration`.
public func withTimeout<T: Sendable>(_ duration: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: duration)
            throw TimeoutError()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
