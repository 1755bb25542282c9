import AttendanceProtocol
import Foundation
import KafkaClient
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Settings of a `RegistryChangePublisher`.
public struct RegistryChangePublisherConfiguration: Sendable {
    /// How long to wait after a round that found nothing to publish.
    public var pollInterval: Duration
    /// Rows per round (one transaction, one produce batch).
    public var batchSize: Int
    public var topic: String
    /// After a failed round the wait doubles from `pollInterval` up to this.
    public var maxBackoff: Duration

    public init(
        pollInterval: Duration = .milliseconds(200), batchSize: Int = 500, topic: String = Topic.registryChanges.name,
        maxBackoff: Duration = .seconds(5)
    ) {
        self.pollInterval = pollInterval
        self.batchSize = batchSize
        self.topic = topic
        self.maxBackoff = maxBackoff
    }
}

/// One row of `registry.change_outbox` waiting to be published.
public struct RegistryOutboxRow: Hashable, Sendable {
    public var id: Int64
    public var entityType: String
    public var entityId: String
    /// `upsert` or `delete`.
    public var op: String
    /// The entity's JSON (`nil` for a delete).
    public var payload: String?
    public var createdAt: Date

    public init(id: Int64, entityType: String, entityId: String, op: String, payload: String?, createdAt: Date) {
        self.id = id
        self.entityType = entityType
        self.entityId = entityId
        self.op = op
        self.payload = payload
        self.createdAt = createdAt
    }

    /// The key on `registry.changes`: `<entityType>:<entityId>`.
    public var key: RegistryKey { RegistryKey(entityType: RegistryEntityType(rawValue: entityType), entityId: entityId) }

    /// The record this row becomes: a `RegistryChange` (version = the row id, changedAt = the row's
    /// creation time) for an upsert, a tombstone (null value) for a delete.
    public func message(topic: String = Topic.registryChanges.name) throws -> KafkaOutgoingMessage {
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

public enum RegistryPublishError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Some messages of the round got no successful delivery report; the round was rolled back.
    case notDelivered(failed: Int, of: Int, firstError: String)
    case malformedRow(id: Int64, reason: String)

    public var description: String {
        switch self {
        case .notDelivered(let failed, let total, let first):
            return "\(failed) of \(total) registry changes were not delivered (\(first)); they stay in the outbox"
        case .malformedRow(let id, let reason):
            return "change_outbox row \(id) cannot be published: \(reason)"
        }
    }
}

/// What one publishing round did.
public struct RegistryPublishRound: Hashable, Sendable {
    /// Rows produced, acknowledged and stamped `published_at`.
    public var published: Int
    /// Another publisher holds the publishing lock; this round did nothing.
    public var lockedElsewhere: Bool
}

/// Moves `registry.change_outbox` to the compacted `registry.changes` topic.
///
/// Each round is one transaction: take the publishing lock (a transaction-scoped advisory lock, so
/// with several replicas only one publishes at a time and the topic gets each key's versions in
/// order, which matters because compaction keeps the *last* record of a key); select up to
/// `batchSize` rows `WHERE published_at IS NULL ORDER BY id … FOR UPDATE SKIP LOCKED` (selected by
/// "unpublished", never by "id above the last one": a transaction holding a lower id may commit after
/// one holding a higher id); produce them keyed `<entityType>:<entityId>`; wait for every delivery
/// report; stamp `published_at = now()`; commit. If any message is not acknowledged the transaction
/// rolls back and the rows are produced again next round: delivery is at-least-once, and consumers
/// skip what they have by (key, version) — the version is the outbox row id.
///
/// A round that published something is followed at once by the next; an empty round waits until a
/// transaction adds rows (the outbox's insert trigger notifies `registry_change_outbox`, which the
/// publisher listens to on a connection of its own) or `pollInterval` passes, whichever is first; a
/// failed one backs off up to `maxBackoff`. So a change is on the feed a few milliseconds after its
/// commit, and the poll only covers a notification lost with its connection.
///
/// A `Service`. The `KafkaProducer` must be running (it is a `Service` too): put it *before* the
/// publisher in the `ServiceGroup`, so that on graceful shutdown the publisher stops first. Graceful
/// shutdown lets the current round finish (produce, wait, commit) and then returns.
public final class RegistryChangePublisher: Service, Sendable {
    /// `pg_advisory_xact_lock` key: "regfeed1" as ASCII.
    public static let publishLockKey: Int64 = 0x7265_6766_6565_6431

    private let client: PostgresClient
    private let producer: KafkaProducer
    private let configuration: RegistryChangePublisherConfiguration
    private let logger: Logger

    /// Waits until a running publisher has emptied the outbox (every row stamped `published_at`),
    /// checking every `interval`. Tools that write registry rows and then need the feed's readers to
    /// know them (the fleet simulator, load generators, end-to-end tests) call it.
    /// - Returns: false when rows were still unpublished after `timeout`.
    public static func waitUntilPublished(
        client: PostgresClient, logger: Logger, timeout: Duration, interval: Duration = .milliseconds(200)
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let rows = try await client.query("SELECT count(*)::int FROM registry.change_outbox WHERE published_at IS NULL", logger: logger)
            var pending = 1
            for try await n in rows.decode(Int.self) { pending = n }
            if pending == 0 { return true }
            try await Task.sleep(for: interval)
        }
        return false
    }

    public init(
        client: PostgresClient, producer: KafkaProducer, configuration: RegistryChangePublisherConfiguration = .init(),
        logger: Logger
    ) {
        self.client = client
        self.producer = producer
        self.configuration = configuration
        self.logger = logger
    }

    /// The channel the outbox's insert trigger notifies at each commit that added rows.
    public static let notificationChannel = "registry_change_outbox"

    public func run() async throws {
        let wakeUp = WakeUp()
        await withDiscardingTaskGroup { group in
            group.addTask { await self.listen(wakeUp: wakeUp) }
            await publishUntilShutdown(wakeUp: wakeUp)
            group.cancelAll()
        }
    }

    private func publishUntilShutdown(wakeUp: WakeUp) async {
        var backoff = configuration.pollInterval
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                let round = try await publishRound()
                backoff = configuration.pollInterval
                if round.published > 0 { continue }
                _ = try? await cancelWhenGracefulShutdown { () async throws in await wakeUp.wait(upTo: self.configuration.pollInterval) }
            } catch {
                logger.error("publishing registry changes failed; retrying", metadata: [
                    "error": .string(String(describing: error)), "retryIn": .string("\(backoff)"),
                ])
                let wait = backoff
                backoff = min(backoff * 2, configuration.maxBackoff)
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
            }
        }
    }

    /// Wakes the publisher at each notification; listens again (after a second) when its connection fails.
    private func listen(wakeUp: WakeUp) async {
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.notificationChannel) { notifications in
                        wakeUp.signal()  // rows may have come while nobody listened
                        for try await _ in notifications { wakeUp.signal() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("listening for registry changes failed; polling meanwhile", metadata: ["error": .string("\(error)")])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// One round (see the type's documentation).
    /// - Throws: `RegistryPublishError` or a database / Kafka error; the rows then stay unpublished.
    @discardableResult
    public func publishRound() async throws -> RegistryPublishRound {
        let configuration = self.configuration
        let producer = self.producer
        let logger = self.logger
        do {
            return try await client.withTransaction(logger: logger) { connection in
                let lockRows = try await connection.query(
                    "SELECT pg_try_advisory_xact_lock(\(Self.publishLockKey))", logger: logger
                )
                var locked = false
                for try await (acquired) in lockRows.decode(Bool.self) { locked = acquired }
                guard locked else { return RegistryPublishRound(published: 0, lockedElsewhere: true) }

                let rows = try await connection.query(
                    """
                    SELECT id, entity_type, entity_id, op, payload::text, created_at
                    FROM registry.change_outbox
                    WHERE published_at IS NULL
                    ORDER BY id
                    LIMIT \(configuration.batchSize)
                    FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                )
                var pending: [RegistryOutboxRow] = []
                for try await (id, type, entityId, op, payload, createdAt) in rows.decode((Int64, String, String, String, String?, Date).self) {
                    pending.append(RegistryOutboxRow(id: id, entityType: type, entityId: entityId, op: op, payload: payload, createdAt: createdAt))
                }
                guard !pending.isEmpty else { return RegistryPublishRound(published: 0, lockedElsewhere: false) }

                let messages = try pending.map { try $0.message(topic: configuration.topic) }
                let reports = try await producer.sendBatch(messages)
                let failures = reports.filter { !$0.isDelivered }
                if let first = failures.first {
                    throw RegistryPublishError.notDelivered(
                        failed: failures.count, of: reports.count, firstError: first.error.map { String(describing: $0) } ?? "unknown"
                    )
                }
                let ids = pending.map(\.id)
                try await connection.query(
                    "UPDATE registry.change_outbox SET published_at = now() WHERE id = ANY(\(ids))", logger: logger
                )
                logger.debug("registry changes published", metadata: ["count": "\(ids.count)", "lastId": "\(ids.last!)"])
                return RegistryPublishRound(published: ids.count, lockedElsewhere: false)
            }
        } catch let error as PostgresTransactionError {
            throw error.closureError ?? error.commitError ?? error.beginError ?? error
        }
    }
}

/// A flag the listener raises and the publisher waits on (checked every few milliseconds, which costs
/// nothing next to a round).
final class WakeUp: Sendable {
    private let raised = Mutex(false)

    func signal() { raised.withLock { $0 = true } }

    /// Returns when the flag is raised (and lowers it) or after `limit`.
    func wait(upTo limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if raised.withLock({ let was = $0; $0 = false; return was }) { return }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
