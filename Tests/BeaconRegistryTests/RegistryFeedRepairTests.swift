import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import RegistryTestFixtures
import Testing

@testable import BeaconRegistryStore

/// When the registry refills its feed topic from the outbox (the end-to-end test restarts the
/// broker and checks the whole path).
@Suite("Registry feed repair")
struct RegistryFeedRepairTests {
    @Test func anEmptyFeedTopicIsLostOnlyWhenChangesWerePublished() {
        #expect(RegistryFeedRepair.isLost(highWatermark: 0, outboxHasPublishedRows: true))
        // A new deployment: nothing published yet, nothing to refill.
        #expect(!RegistryFeedRepair.isLost(highWatermark: 0, outboxHasPublishedRows: false))
        // A topic written once keeps a high watermark above 0, compacted or not.
        #expect(!RegistryFeedRepair.isLost(highWatermark: 1, outboxHasPublishedRows: true))
    }
}

extension RegistryDatabaseTests {
    @Suite("Registry feed refill", .serialized)
    struct FeedRefill {
        static let columns = "id, entity_type, entity_id, op, payload::text, created_at"

        /// `query` selects `columns` from `change_outbox`.
        static func rows(_ client: PostgresClient, _ query: PostgresQuery) async throws -> [RegistryOutboxRow] {
            var result: [RegistryOutboxRow] = []
            for try await (id, type, entityId, op, payload, createdAt) in try await client.query(query, logger: RegistryTestDatabase.logger)
                .decode((Int64, String, String, String, String?, Date).self)
            {
                result.append(
                    RegistryOutboxRow(id: id, entityType: type, entityId: entityId, op: op, payload: payload, createdAt: createdAt))
            }
            return result
        }

        static func unpublished(_ client: PostgresClient) async throws -> [RegistryOutboxRow] {
            try await rows(client, "SELECT \(unescaped: columns) FROM change_outbox WHERE published_at IS NULL ORDER BY id")
        }

        static func markAllPublished(_ client: PostgresClient) async throws {
            try await client.query(
                "UPDATE change_outbox SET published_at = now() WHERE published_at IS NULL", logger: RegistryTestDatabase.logger)
        }

        /// The copies arrive between two markers, so a reader that starts during the refill knows when
        /// its view is the whole registry; the latest change of every entity is copied, deletes included.
        @Test func aRefillCopiesEveryEntitysLatestChangeBetweenItsMarkers() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let beacon = try await repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 9, minor: 1, gateId: fixture.gate.id))
                _ = try await repository.updateBeaconStatus(beaconId: beacon.id, status: .lost)
                try await Self.markAllPublished(client)

                let queued = try await RegistryFeedRepair.queueRefill(client: client, logger: RegistryTestDatabase.logger)
                let rows = try await Self.unpublished(client)
                try #require(rows.count == queued + 2)
                let start = try #require(rows.first), end = try #require(rows.last)
                #expect(start.entityType == "feed" && start.entityId == RegistryFeedRefill.startedId)
                #expect(end.entityType == "feed" && end.entityId == RegistryFeedRefill.endedId)
                let endPayload = try ProtocolCodec.wire.decode(JSONValue.self, from: try #require(end.payload))
                #expect(endPayload[RegistryFeedRefill.startedVersionField]?.int64Value == start.id)

                // One copy per entity, equal to its latest change (its time included), in the order
                // they were written: both lists are in id order.
                let copies = Array(rows.dropFirst().dropLast())
                let latest = try await Self.rows(
                    client,
                    """
                    SELECT \(unescaped: Self.columns) FROM change_outbox
                    WHERE id IN (SELECT max(id) FROM change_outbox WHERE entity_type <> 'feed' AND id < \(start.id) GROUP BY entity_type, entity_id)
                    ORDER BY id
                    """)
                func withoutId(_ rows: [RegistryOutboxRow]) -> [RegistryOutboxRow] {
                    rows.map {
                        var row = $0; row.id = 0; return row
                    }
                }
                #expect(withoutId(copies) == withoutId(latest))
                let beaconCopy = try #require(copies.first { $0.entityType == "beacon" && $0.entityId == beacon.id })
                #expect(beaconCopy.payload?.contains("\"lost\"") == true)

                // A refill queued and not yet published is not queued twice (a registry restarted
                // before its publisher produced the first row).
                #expect(try await RegistryFeedRepair.queueRefill(client: client, logger: RegistryTestDatabase.logger) == 0)
                #expect(try await Self.unpublished(client) == rows)
                try await Self.markAllPublished(client)
            }
        }

        /// A database restored from a backup is behind the feed: its next ids would be versions the
        /// consumers already hold, and every change they carry (a revoked device) would be dropped as
        /// stale. At start the registry moves its ids past the feed's last version and refills the feed.
        @Test func aDatabaseBehindItsFeedMovesItsIdsPastTheFeedAndRefillsIt() async throws {
            try LocalStack.ensureStarted()
            let topic = try await LocalStack.newRegistryFeedTopic()
            let kafka = KafkaConfiguration(
                bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks, clientId: "feed-rewind")
            let logger = RegistryTestDatabase.logger
            let admin = try KafkaAdmin(configuration: kafka, logger: logger)
            let reader = KafkaPartitionReader(configuration: kafka, logger: logger)
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                try await Self.markAllPublished(client)
                // Nothing on the feed yet: nothing to do.
                #expect(
                    try await RegistryFeedRepair.repairIfRewound(admin: admin, reader: reader, client: client, topic: topic, logger: logger)
                        == 0)

                // The feed published versions up to 5,000,000 before the database was restored.
                let ahead: Int64 = 5_000_000
                let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(client: kafka), logger: logger)
                let producing = Task { try await producer.run() }
                let change = RegistryChange(
                    entityType: .user, entityId: fixture.user.id, op: .upsert, version: ahead, changedAt: Date(),
                    payload: try ProtocolCodec.wire.decode(JSONValue.self, from: try ProtocolCodec.wire.encode(fixture.user)))
                // Written by a later registry (a newer schema version): the start reads its version all the same.
                let later = String(decoding: try ProtocolCodec.wire.encode(change), as: UTF8.self)
                    .replacingOccurrences(of: #""schemaVersion":1"#, with: #""schemaVersion":99"#)
                try #require(later.contains(#""schemaVersion":99"#))
                let reports = try await producer.sendBatch([
                    KafkaOutgoingMessage(topic: topic, key: "user:\(fixture.user.id)", value: Array(later.utf8))
                ])
                producer.beginShutdown()
                try await producing.value
                #expect(reports.allSatisfy { $0.isDelivered })
                #expect(
                    try await RegistryFeedRepair.lastPublishedVersion(admin: admin, reader: reader, topic: topic) == ahead)

                let queued = try await RegistryFeedRepair.repairIfRewound(
                    admin: admin, reader: reader, client: client, topic: topic, logger: logger)
                #expect(queued > 0)
                let rows = try await Self.unpublished(client)
                try #require(rows.count == queued + 2)
                #expect(rows.allSatisfy { $0.id > ahead }, "every refilled change outranks what the consumers hold")
                // The next change too, and a second start changes nothing.
                let revoked = try await repository.setUserSites(userId: fixture.user.id, siteIds: [])
                #expect(revoked.siteIds.isEmpty)
                let latest = try #require(try await Self.unpublished(client).last)
                #expect(latest.id > ahead && latest.entityId == fixture.user.id)
                #expect(
                    try await RegistryFeedRepair.repairIfRewound(admin: admin, reader: reader, client: client, topic: topic, logger: logger)
                        == 0)
                try await Self.markAllPublished(client)
            }
        }

        /// A registry whose broker watch saw the broker lose its state queues the refill before it exits:
        /// a topic another service created again, and that this process then wrote to, is no longer
        /// empty at the next start, whose empty-topic check would take it for intact.
        @Test func aRegistryThatSawTheBrokerLoseItsStateQueuesTheRefillBeforeExiting() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                _ = try await RegistryFixture.make(repository)
                try await Self.markAllPublished(client)
                await RegistryFeedRepair.queueRefillAfterLoss(client: client, logger: RegistryTestDatabase.logger)
                let rows = try await Self.unpublished(client)
                #expect(rows.first?.entityId == RegistryFeedRefill.startedId && rows.last?.entityId == RegistryFeedRefill.endedId)
                #expect(rows.count > 2)
                try await Self.markAllPublished(client)
            }
        }
    }
}
