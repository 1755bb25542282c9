import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceLifecycle

/// Moves `merger.session_change_outbox` to `attendance.sessions` (key: user id).
///
/// Each round is one transaction: take the publishing lock (transaction-scoped advisory lock: with
/// several replicas one publishes at a time, so each user's changes reach the topic in commit order),
/// select the oldest rows `FOR UPDATE SKIP LOCKED`, produce them, wait for every delivery report,
/// delete them, commit. A message without a successful report rolls the round back: the rows are
/// produced again (at-least-once; `SessionChange.version` lets consumers drop what they have).
/// A crash right after the batch transaction committed loses nothing: the rows wait here.
public final class SessionChangePublisher: Service, Sendable {
    /// `pg_advisory_xact_lock` key: "mrgsess1" as ASCII.
    public static let publishLockKey: Int64 = 0x6D72_6773_6573_7331

    private let client: PostgresClient
    private let producer: KafkaProducer
    private let topic: String
    private let batchSize: Int
    private let pollInterval: Duration
    private let logger: Logger

    public init(client: PostgresClient, producer: KafkaProducer, configuration: SessionMergerConfiguration, logger: Logger) {
        self.client = client
        self.producer = producer
        self.topic = configuration.sessionsTopic
        self.batchSize = configuration.outboxBatchSize
        self.pollInterval = configuration.outboxPollInterval
        self.logger = logger
    }

    public func run() async throws {
        var backoff = pollInterval
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let wait: Duration
            do {
                let published = try await publishRound()
                backoff = pollInterval
                if published > 0 { continue }
                wait = pollInterval
            } catch {
                logger.error("publishing session changes failed; retrying", metadata: [
                    "error": .string(String(describing: error)), "retryIn": .string("\(backoff)"),
                ])
                wait = backoff
                backoff = min(backoff * 2, .seconds(5))
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
        }
    }

    /// One round. - Returns: how many changes were published (0 when none waited or another
    /// publisher holds the lock).
    @discardableResult
    public func publishRound() async throws -> Int {
        let producer = self.producer
        let logger = self.logger
        let topic = self.topic
        let batchSize = self.batchSize
        return try await unwrapTransactionError {
            try await client.withTransaction(logger: logger) { connection in
                let lockRows = try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.publishLockKey))", logger: logger)
                var locked = false
                for try await acquired in lockRows.decode(Bool.self) { locked = acquired }
                guard locked else { return 0 }
                let rows = try await connection.query(
                    """
                    SELECT id, user_id, payload FROM merger.session_change_outbox
                    ORDER BY id LIMIT \(batchSize) FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                )
                var ids: [Int64] = []
                var messages: [KafkaOutgoingMessage] = []
                for try await (id, userId, payload) in rows.decode((Int64, String, String).self) {
                    ids.append(id)
                    messages.append(KafkaOutgoingMessage(
                        topic: topic, key: PartitionKey.session(userId: userId).value, value: Array(payload.utf8)))
                }
                guard !ids.isEmpty else { return 0 }
                let reports = try await producer.sendBatch(messages)
                let failures = reports.filter { !$0.isDelivered }
                if let first = failures.first {
                    throw SessionPublishError(failed: failures.count, of: reports.count, firstError: first.error.map { "\($0)" } ?? "unknown")
                }
                try await connection.query("DELETE FROM merger.session_change_outbox WHERE id = ANY(\(ids))", logger: logger)
                return ids.count
            }
        }
    }
}

struct SessionPublishError: Error, CustomStringConvertible {
    var failed: Int
    var of: Int
    var firstError: String

    var description: String {
        "\(failed) of \(of) session changes were not delivered (\(firstError)); they stay in the outbox"
    }
}
