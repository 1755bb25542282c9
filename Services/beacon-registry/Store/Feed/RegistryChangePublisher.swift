import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime
import Synchronization

/// One row of `change_outbox` waiting to be published.
package struct RegistryOutboxRow: Hashable, Sendable {
    package var id: Int64
    package var entityType: String
    package var entityId: String
    /// `upsert` or `delete`.
    package var op: String
    /// The entity's JSON (`nil` for a delete).
    package var payload: String?
    package var createdAt: Date

    /// The key on `registry.changes`: `<entityType>:<entityId>`.
    package var key: RegistryKey { RegistryKey(entityType: RegistryEntityType(rawValue: entityType), entityId: entityId) }

    /// The record this row becomes: a `RegistryChange` (version = the row id, changedAt = the row's
    /// creation time) for an upsert, a tombstone (null value) for a delete.
    package func message(topic: String = Topic.registryChanges.name) throws -> KafkaOutgoingMessage {
        let key = self.key
        if op == RegistryOperation.delete.rawValue {
            return KafkaOutgoingMessage(topic: topic, key: key.description, value: nil)
        }
        guard let payload else { throw RegistryPublishError.malformedRow(id: id, reason: "upsert without a payload") }
        let json: JSONValue
        do {
            json = try ProtocolCodec.wire.decode(JSONValue.self, from: payload)
        } catch {
            throw RegistryPublishError.malformedRow(id: id, reason: "payload is not JSON: \(error)")
        }
        let change = RegistryChange(
            entityType: key.entityType, entityId: entityId, op: .upsert, version: id, changedAt: createdAt, payload: json
        )
        return KafkaOutgoingMessage(topic: topic, key: key.description, value: try ProtocolCodec.wire.encode(change))
    }
}

package enum RegistryPublishError: Error, Hashable, Sendable, CustomStringConvertible {
    case malformedRow(id: Int64, reason: String)
    case sequenceWentBack(String)

    package var description: String {
        switch self {
        case .malformedRow(let id, let reason): return "change_outbox row \(id) cannot be published: \(reason)"
        case .sequenceWentBack(let reason): return reason
        }
    }
}

/// `change_outbox` as an outbox of the compacted `registry.changes` topic: rows are stamped
/// `published_at`, and an entity's earlier published rows are deleted with it, so the table keeps, like
/// the compacted topic, each entity's latest change (`RegistryFeedRepair` copies those when the broker
/// lost the topic) and no history of names, sites or device tokens; the insert trigger notifies `registry_change_outbox` at each commit, so a change is on the feed a
/// few milliseconds after it (readers that must not decide from a stale view wait that long).
///
/// The ids are the feed's versions, and its readers drop a change whose version is not above the one
/// they hold. A database restored from a backup under a running registry gives ids again from the
/// backup's sequence, below versions already published: such changes would be dropped as old
/// everywhere. So once rows are waiting, the relay checks that the sequence has not gone back below the
/// highest id it published; if it has, it publishes nothing and calls `onSequenceWentBack` (by default:
/// log and exit with code 75, so that the supervisor starts the registry afresh, whose start moves the
/// ids past the feed's and publishes every entity's latest change again, `RegistryFeedRepair`).
package struct RegistryChangeOutbox: OutboxTable {
    /// The channel the outbox's insert trigger notifies at each commit that added rows.
    package static let notificationChannel = "registry_change_outbox"

    package let topic: String
    /// `pg_advisory_xact_lock` key: "regfeed1" as ASCII.
    package var lockKey: Int64 { 0x7265_6766_6565_6431 }
    package var name: String { "registry changes" }
    /// The highest id this process published.
    private let highestPublished = HighestPublishedId()
    private let onSequenceWentBack: @Sendable (String) -> Void

    package init(
        topic: String = Topic.registryChanges.name,
        onSequenceWentBack: (@Sendable (String) -> Void)? = nil, logger: Logger = Logger(label: "registry-change-outbox")
    ) {
        self.topic = topic
        self.onSequenceWentBack =
            onSequenceWentBack ?? { reason in
                logger.critical("\(reason); exiting so that the registry's start publishes every entity's latest change again")
                exit(BrokerStateWatch.exitCode)
            }
    }

    package func pending(
        limit: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [(id: Int64, message: KafkaOutgoingMessage)] {
        let rows = try await connection.query(
            """
            SELECT id, entity_type, entity_id, op, payload::text, created_at, (\(unescaped: RegistryFeedRepair.lastIdQuery.sql))
            FROM change_outbox
            WHERE published_at IS NULL
            ORDER BY id
            LIMIT \(limit)
            FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        )
        var pending: [(id: Int64, message: KafkaOutgoingMessage)] = []
        // The sequence's last id, read with the rows (every row carries it).
        var lastId: Int64 = .max
        for try await (id, type, entityId, op, payload, createdAt, sequence) in rows.decode(
            (Int64, String, String, String, String?, Date, Int64).self)
        {
            let row = RegistryOutboxRow(id: id, entityType: type, entityId: entityId, op: op, payload: payload, createdAt: createdAt)
            pending.append((id, try row.message(topic: topic)))
            lastId = sequence
        }
        let published = highestPublished.value.load(ordering: .relaxed)
        // No rows: `lastId` stays at its maximum and nothing is checked.
        if published > 0, lastId < published {
            let reason =
                "the registry's change ids went back under this process (the sequence is at \(lastId), \(published) was "
                + "published): its database was restored from a backup"
            onSequenceWentBack(reason)
            throw RegistryPublishError.sequenceWentBack(reason)
        }
        return pending
    }

    package func markDelivered(_ ids: [Int64], on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("UPDATE change_outbox SET published_at = now() WHERE id = ANY(\(ids))", logger: logger)
        try await connection.query(
            """
            DELETE FROM change_outbox o
            USING (SELECT entity_type, entity_id, max(id) AS id FROM change_outbox WHERE id = ANY(\(ids)) GROUP BY 1, 2) latest
            WHERE o.entity_type = latest.entity_type AND o.entity_id = latest.entity_id AND o.id < latest.id
              AND o.published_at IS NOT NULL
            """, logger: logger)
        if let highest = ids.max() { highestPublished.value.max(highest, ordering: .relaxed) }
    }
}

/// The highest change id a relay published, shared by the copies of its outbox value.
private final class HighestPublishedId: Sendable {
    let value = Atomic<Int64>(0)
}

/// Moves `change_outbox` to `registry.changes` (`OutboxRelay`).
package typealias RegistryChangePublisher = OutboxRelay<RegistryChangeOutbox>

extension OutboxRelay where Table == RegistryChangeOutbox {
    /// The registry's relay: woken by the outbox's trigger at each commit, polling every 5 s only as
    /// a fallback.
    package convenience init(
        client: PostgresClient, producer: KafkaProducer, topic: String = Topic.registryChanges.name,
        pollInterval: Duration = .seconds(5), logger: Logger
    ) {
        self.init(
            table: RegistryChangeOutbox(topic: topic, logger: logger), client: client, producer: producer,
            configuration: OutboxRelayConfiguration(
                pollInterval: pollInterval, notificationChannel: RegistryChangeOutbox.notificationChannel),
            logger: logger)
    }

    /// Waits until a running publisher has emptied the outbox (every row stamped `published_at`),
    /// checking every `interval`. Tools that write registry rows and then need the feed's readers to
    /// know them (the fleet simulator, load generators, end-to-end tests) call it.
    /// - Returns: false when rows were still unpublished after `timeout`.
    package static func waitUntilPublished(
        client: PostgresClient, logger: Logger, timeout: Duration, interval: Duration = .milliseconds(200)
    ) async throws -> Bool {
        try await poll(every: interval, timeout: timeout) {
            let rows = try await client.query("SELECT count(*)::int FROM change_outbox WHERE published_at IS NULL", logger: logger)
            var pending = 1
            for try await n in rows.decode(Int.self) { pending = n }
            return pending == 0
        }
    }
}
