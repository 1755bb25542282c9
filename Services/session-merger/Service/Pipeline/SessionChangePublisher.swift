import AttendanceProtocol
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime

/// `merger.session_change_outbox` as an outbox of `attendance.sessions` (key: user id): the batch's
/// (or the idle sweep's) transaction writes the rows, the relay deletes them once delivered.
/// `SessionChange.version` lets consumers drop what they already have.
package struct SessionChangeOutbox: OutboxTable {
    package let topic: String
    /// `pg_advisory_xact_lock` key: "mrgsess1" as ASCII.
    package var lockKey: Int64 { 0x6D72_6773_6573_7331 }
    package var name: String { "session changes" }
    /// The channel the outbox's insert trigger notifies at commit (migration 0004).
    package static let notificationChannel = "session_change_outbox"

    package func pending(
        limit: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [(id: Int64, message: KafkaOutgoingMessage)] {
        let rows = try await connection.query(
            "SELECT id, user_id, payload FROM session_change_outbox ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED",
            logger: logger)
        var pending: [(id: Int64, message: KafkaOutgoingMessage)] = []
        for try await (id, userId, payload) in rows.decode((Int64, String, String).self) {
            pending.append(
                (id, KafkaOutgoingMessage(topic: topic, key: PartitionKey.session(userId: userId).value, value: Array(payload.utf8))))
        }
        return pending
    }

    package func markDelivered(_ ids: [Int64], on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("DELETE FROM session_change_outbox WHERE id = ANY(\(ids))", logger: logger)
    }
}

/// Moves `merger.session_change_outbox` to `attendance.sessions` (`OutboxRelay`).
package typealias SessionChangePublisher = OutboxRelay<SessionChangeOutbox>

extension OutboxRelay where Table == SessionChangeOutbox {
    package convenience init(client: PostgresClient, producer: KafkaProducer, configuration: SessionMergerConfiguration, logger: Logger) {
        self.init(
            table: SessionChangeOutbox(topic: configuration.topics[.sessions]), client: client, producer: producer,
            configuration: OutboxRelayConfiguration(
                pollInterval: configuration.outboxPollInterval, batchSize: configuration.outboxBatchSize,
                notificationChannel: SessionChangeOutbox.notificationChannel),
            logger: logger)
    }
}
