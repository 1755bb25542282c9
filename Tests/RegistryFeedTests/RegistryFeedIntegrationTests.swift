import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import RegistryFeed
import ServiceLifecycle
import ServiceRuntime
import Synchronization
import Testing

@testable import BeaconRegistryStore

/// Against the real PostgreSQL and broker. The tests run side by side: each has a registry schema
/// (with its outbox and its relay's lock) and a feed topic of its own (`FeedTestStack.withRepository`).
@Suite("Registry change feed (PostgreSQL + broker)")
struct RegistryFeedIntegrationTests {
    typealias Stack = FeedTestStack

    static func unpublished(_ client: PostgresClient, type: String, id: String) async throws -> Int {
        let rows = try await client.query(
            "SELECT count(*) FROM change_outbox WHERE entity_type = \(type) AND entity_id = \(id) AND published_at IS NULL",
            logger: Stack.logger
        )
        var count = 0
        for try await n in rows.decode(Int.self) { count = n }
        return count
    }

    @Test("a cache loader started after everything was published rebuilds the registry from the topic")
    func lateLoaderRebuilds() async throws {
        try await Stack.withRepository { repository, client in
            let fixture = try await FeedFixture.make(repository)
            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                try await Stack.drainOutbox(publisher)
            }
            #expect(try await Self.unpublished(client, type: "beacon", id: fixture.beacon.id) == 0)

            // Started late: nothing is produced while it runs; it must find everything in the topic.
            let cache = RegistryCache()
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-late"),
                logger: Stack.logger
            )
            #expect(!loader.isCaughtUp)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await loader.run() }
                defer { group.cancelAll() }
                let caughtUp = await loader.waitUntilCaughtUp(timeout: .seconds(60))
                try #require(caughtUp)
                #expect(loader.decodeFailures == 0)

                let resolved = try #require(cache.resolve(uuid: fixture.minor.uuid, major: fixture.minor.major, minor: fixture.minor.minor))
                #expect(resolved.beaconId == fixture.beacon.id)
                #expect(resolved.gateId == fixture.gate.id)
                #expect(resolved.siteId == fixture.site.id)
                #expect(resolved.organizationId == fixture.organization.id)
                #expect(resolved.status == .active)
                #expect(resolved.beacon.txPower == -59)
                #expect(resolved.site?.geofence.radiusMeters == 200)
                #expect(resolved.site?.geofence.latitude == 10.7769)

                let business = try #require(cache.business(uuid: fixture.namespace.uuid, major: fixture.namespace.major))
                #expect(business.organizationId == fixture.organization.id)
                #expect(business.organization?.name == fixture.organization.name)

                #expect(cache.beacons(uuid: fixture.beacon.uuid).contains { $0.id == fixture.beacon.id })
                #expect(cache.beacon(mac: try #require(fixture.beacon.mac))?.id == fixture.beacon.id)
                #expect(
                    cache.minorAllocation(
                        try #require(RegistryBeaconKey(uuid: fixture.minor.uuid, major: fixture.minor.major, minor: fixture.minor.minor)))?
                        .gateId == fixture.gate.id)
                #expect(cache.device(id: fixture.device.id)?.status == .enrolled)
                #expect(cache.device(id: fixture.device.id)?.userId == fixture.user.id)
                #expect(cache.user(id: fixture.user.id)?.siteIds == [fixture.site.id])
            }
        }
    }

    @Test("a view waits for a feed being refilled to settle, an empty view is behind, and once settled a view stays settled")
    func settledWaitsForTheRefill() async throws {
        try await Stack.withRepository { repository, client in
            let (producer, publisher) = try Stack.publisher(client: client)
            let cache = RegistryCache()
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-settle"), logger: Stack.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                group.addTask { try await publisher.run() }
                group.addTask { try await loader.run() }
                defer { group.cancelAll() }
                try #require(await loader.waitUntilCaughtUp(timeout: .seconds(60)))
                // The topic is empty, as right after the broker lost it: current, but not the registry.
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .milliseconds(200), timeout: .seconds(2)) == .behind)

                // The registry refills it: a first entity, then batch after batch for three seconds
                // (records of any kind keep the feed busy; these do not decode and are skipped).
                let first = try await FeedFixture.make(repository)
                try await eventually("the refill's first records reach the cache", timeout: .seconds(15)) {
                    cache.device(id: first.device.id) != nil
                }
                /// `count` records 200 ms apart; the task answers when the last was sent.
                func publishSteadily(_ count: Int, keyPrefix: String) -> Task<ContinuousClock.Instant, any Error> {
                    Task {
                        for index in 0..<count {
                            _ = try await producer.send(
                                KafkaOutgoingMessage(topic: Stack.topic, key: "\(keyPrefix)-\(index)", value: Array("{}".utf8)))
                            try await Task.sleep(for: .milliseconds(200))
                        }
                        return ContinuousClock.now
                    }
                }
                let refill = publishSteadily(15, keyPrefix: "refill")
                try await eventually("the refill reaches the loader", timeout: .seconds(15)) { loader.decodeFailures > 0 }
                // The quiet asked for is 25 times the refill's pace: a machine busy with other suites can
                // stall the publisher a second or two, which must not read as the end of the refill.
                let settled = await loader.waitUntilSettled(asOf: Date(), settle: .seconds(5), timeout: .seconds(60))
                let settledAt = ContinuousClock.now
                let refillEnded = try await refill.value
                #expect(settled == .settled)
                #expect(settledAt >= refillEnded, "settled \(refillEnded - settledAt) before the refill ended")

                // Settled once, a running view only needs to be current: a registry publishing without
                // pause (a bulk import) does not hold its decisions for the settle time.
                let busyFeed = publishSteadily(40, keyPrefix: "import")
                try await Task.sleep(for: .milliseconds(500))
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .seconds(2), timeout: .seconds(60)) == .settled)
                let answeredAt = ContinuousClock.now
                // A process that starts reading meanwhile has records but no quiet: busy, after its timeout.
                let late = try RegistryCacheLoader(
                    cache: RegistryCache(), configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-busy"),
                    logger: Stack.logger)
                group.addTask { try await late.run() }
                try #require(await late.waitUntilCaughtUp(timeout: .seconds(60)))
                #expect(await late.waitUntilSettled(asOf: Date(), settle: .seconds(30), timeout: .seconds(1)) == .busy)
                let importEnded = try await busyFeed.value
                #expect(answeredAt < importEnded, "the settled view waited for the import to end")
            }
        }
    }

    @Test("a view inside a refill, settled before it or not, is behind until it reads the end marker that names the refill's start")
    func aViewInsideARefillIsBehind() async throws {
        try await Stack.withRepository { repository, client in
            let (producer, publisher) = try Stack.publisher(client: client)
            let loader = try RegistryCacheLoader(
                cache: RegistryCache(), configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-refill"), logger: Stack.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await producer.run() }
                group.addTask { try await publisher.run() }
                group.addTask { try await loader.run() }
                defer { group.cancelAll() }
                _ = try await FeedFixture.make(repository)
                try #require(await loader.waitUntilCaughtUp(timeout: .seconds(60)))

                /// A marker as the registry's relay publishes it.
                func marker(_ id: String, version: Int64, payload: [String: JSONValue]) async throws {
                    let change = RegistryChange(
                        entityType: RegistryEntityType(rawValue: RegistryFeedRefill.entityType), entityId: id, version: version,
                        changedAt: Date(), payload: .object(payload))
                    let report = try await producer.send(
                        KafkaOutgoingMessage(topic: Stack.topic, key: change.key.description, value: try ProtocolCodec.wire.encode(change)))
                    try #require(report.isDelivered)
                }
                // Settled before the refill: a running view meets it too (a topic deleted and recreated).
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .milliseconds(200), timeout: .seconds(15)) == .settled)
                let start = Int64.random(in: 1_000_000...2_000_000)
                try await marker(RegistryFeedRefill.startedId, version: start, payload: [:])
                try await eventually("the loader reads the refill's start", timeout: .seconds(15)) { loader.isReadingRefill }
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .milliseconds(200), timeout: .seconds(3)) == .behind)
                // The end of another refill does not end this one.
                try await marker(RegistryFeedRefill.endedId, version: start + 1, payload: ["startedVersion": .integer(start - 1)])
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .milliseconds(200), timeout: .seconds(3)) == .behind)
                #expect(loader.isReadingRefill)

                try await marker(RegistryFeedRefill.endedId, version: start + 2, payload: ["startedVersion": .integer(start)])
                #expect(await loader.waitUntilSettled(asOf: Date(), settle: .milliseconds(200), timeout: .seconds(15)) == .settled)
                #expect(!loader.isReadingRefill)
                // Markers are no entity: nothing failed to decode.
                #expect(loader.decodeFailures == 0)
            }
        }
    }

    @Test("revoking a device reaches a running cache within seconds (15 s at most on a loaded machine)")
    func revocationReachesCache() async throws {
        try await Stack.withRepository { repository, client in
            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                let cache = RegistryCache()
                let loader = try RegistryCacheLoader(
                    cache: cache, configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-live"),
                    logger: Stack.logger
                )
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await publisher.run() }
                    group.addTask { try await loader.run() }
                    defer { group.cancelAll() }
                    try #require(await loader.waitUntilCaughtUp(timeout: .seconds(60)))

                    let fixture = try await FeedFixture.make(repository)
                    try await eventually("the new device reaches the cache", timeout: .seconds(15)) {
                        cache.device(id: fixture.device.id)?.status == .enrolled
                    }
                    let revoked = try await repository.revokeDevice(id: fixture.device.id)
                    #expect(revoked.status == .revoked)
                    let took = try await eventually("the revocation reaches the cache", timeout: .seconds(15)) {
                        cache.device(id: fixture.device.id)?.status == .revoked
                    }
                    #expect(took < .seconds(15))
                    print("revocation reached the running cache in \(took)")

                    let retired = try await repository.updateBeaconStatus(beaconId: fixture.beacon.id, status: .retired)
                    #expect(retired.status == .retired)
                    try await eventually("the beacon status reaches the cache", timeout: .seconds(15)) {
                        cache.beacon(id: fixture.beacon.id)?.status == .retired
                    }
                }
            }
        }
    }

    @Test("the outbox keeps each entity's latest published change, not its history")
    func publishedHistoryIsNotKept() async throws {
        try await Stack.withRepository { repository, client in
            let fixture = try await FeedFixture.make(repository)
            let other = try await repository.createSite(
                NewSite(
                    organizationId: fixture.organization.id, name: "Annex", timezone: fixture.site.timezone,
                    geofence: fixture.site.geofence, shift: fixture.site.shift))
            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                try await Stack.drainOutbox(publisher)
                // Moved twice after it was published, then published again.
                _ = try await repository.setUserSites(userId: fixture.user.id, siteIds: [other.id])
                _ = try await repository.setUserSites(userId: fixture.user.id, siteIds: [fixture.site.id, other.id])
                try await Stack.drainOutbox(publisher)
            }
            let rows = try await client.query(
                "SELECT payload->'siteIds' FROM change_outbox WHERE entity_type = 'user' AND entity_id = \(fixture.user.id)",
                logger: Stack.logger)
            var kept: [String] = []
            for try await sites in rows.decode(String.self) { kept.append(sites) }
            #expect(kept.count == 1, "\(kept)")
            #expect(kept.first?.contains(other.id) == true && kept.first?.contains(fixture.site.id) == true, "\(kept)")
            // Every other entity of the fixture still has its one row, which a refill copies.
            #expect(try await Self.rowCount(client, type: "site", id: fixture.site.id) == 1)
            #expect(try await Self.rowCount(client, type: "device", id: fixture.device.id) == 1)
        }
    }

    static func rowCount(_ client: PostgresClient, type: String, id: String) async throws -> Int {
        let rows = try await client.query(
            "SELECT count(*)::int FROM change_outbox WHERE entity_type = \(type) AND entity_id = \(id)", logger: Stack.logger)
        var count = 0
        for try await n in rows.decode(Int.self) { count = n }
        return count
    }

    @Test("rows stay unpublished when the broker does not acknowledge, and go out on the next run")
    func crashSafety() async throws {
        try await Stack.withRepository { repository, client in
            let organization = try await repository.createOrganization(NewOrganization(name: "Dead broker \(UUID().uuidString.prefix(8))"))

            let failed: Bool = try await Stack.withProducer({ configuration in
                configuration.client = KafkaConfiguration(bootstrapServers: "127.0.0.1:1", clientId: "registry-feed-dead")
                configuration.deliveryTimeoutMs = 1_500
                configuration.flushTimeoutMs = 500
            }) { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                do {
                    let round = try await publisher.publishRound()
                    Issue.record("a round against a dead broker returned \(round)")
                    return false
                } catch {
                    // Normally `.notDelivered` (delivery timeout); any failure must leave the rows.
                    return true
                }
            }
            #expect(failed)
            #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 1)

            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                try await Stack.drainOutbox(publisher)
            }
            #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 0)
        }
    }

    /// A database restored from a backup under a running registry gives change ids again from below what
    /// was published: the feed's readers would drop those changes as old. The relay publishes none of
    /// them and reports it (the service then exits, and its start republishes every entity's latest).
    @Test("a relay whose change ids went back under it publishes nothing and says so")
    func aSequenceThatWentBackPublishesNothing() async throws {
        try await Stack.withRepository { repository, client in
            let organization = try await repository.createOrganization(NewOrganization(name: "Restore \(UUID().uuidString.prefix(8))"))
            let reports = Mutex<[String]>([])
            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(
                    table: RegistryChangeOutbox(
                        topic: Stack.topic, onSequenceWentBack: { reason in reports.withLock { $0.append(reason) } }),
                    client: client, producer: producer, configuration: OutboxRelayConfiguration(), logger: Stack.logger)
                try await Stack.drainOutbox(publisher)
                #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 0)
                #expect(reports.withLock { $0 }.isEmpty)
                // The restore: the organization's change unpublished again.
                try await client.query(
                    """
                    WITH last AS (SELECT max(id) AS id FROM change_outbox)
                    UPDATE change_outbox SET published_at = NULL FROM last WHERE change_outbox.id = last.id
                    """, logger: Stack.logger)
                // The sequence as the backup had it (before any id was given).
                try await client.query("SELECT setval('change_outbox_id_seq', 1, false)", logger: Stack.logger)
                await #expect(throws: RegistryPublishError.self) { _ = try await publisher.publishRound() }
                #expect(reports.withLock { $0 }.count == 1)
                #expect(reports.withLock { $0 }.first?.contains("went back") == true, "\(reports.withLock { $0 })")
            }
            #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 1)
        }
    }

    @Test("the relay's lock is per schema: a relay holding one registry's outbox never blocks another's")
    func relayLockIsPerSchema() async throws {
        try await Stack.withRepository { repository, client in
            let organization = try await repository.createOrganization(NewOrganization(name: "Lock \(UUID().uuidString.prefix(8))"))
            try await Stack.withProducer { producer in
                let publisher = RegistryChangePublisher(client: client, producer: producer, topic: Stack.topic, logger: Stack.logger)
                // Another schema's relay in the middle of its round: it holds its own lock.
                try await LocalStack.withMigratedSchema(.registry, prefix: "registry_lock") { other, _ in
                    try await other.withTransaction(logger: Stack.logger) { connection in
                        #expect(
                            try await RegistryChangePublisher.takeRoundLock(
                                of: RegistryChangeOutbox(), on: connection, logger: Stack.logger))
                        let round = try await publisher.publishRound()
                        #expect(!round.lockedElsewhere && round.published >= 1, "\(round)")
                    }
                }
                // This schema's lock held elsewhere: its relay waits its turn.
                try await client.withTransaction(logger: Stack.logger) { connection in
                    let taken = try await RegistryChangePublisher.takeRoundLock(
                        of: RegistryChangeOutbox(), on: connection, logger: Stack.logger)
                    let round = try await publisher.publishRound()
                    #expect(taken && round.lockedElsewhere, "\(round)")
                }
            }
            #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 0)
        }
    }

    @Test("a commit wakes the publisher: with a 60 s poll, a new row is on the feed within 15 s")
    func aCommitWakesThePublisher() async throws {
        try await Stack.withRepository { repository, client in
            let (producer, publisher) = try Stack.publisher(client: client, pollInterval: .seconds(60))
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [producer, publisher], gracefulShutdownSignals: [], logger: Stack.logger
                ))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                // Its first rounds empty the outbox and it starts listening.
                try await Task.sleep(for: .seconds(1))
                let organization = try await repository.createOrganization(NewOrganization(name: "Wake \(UUID().uuidString.prefix(8))"))
                let committed = ContinuousClock.now
                _ = try await eventually("the organization is published", timeout: .seconds(15)) {
                    (try? await Self.unpublished(client, type: "organization", id: organization.id)) == 0
                }
                #expect(ContinuousClock.now - committed < .seconds(15))
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test("in a ServiceGroup, producer + publisher + loader publish and follow, then shut down gracefully")
    func serviceGroupLifecycle() async throws {
        try await Stack.withRepository { repository, client in
            let (producer, publisher) = try Stack.publisher(client: client, pollInterval: .milliseconds(50))
            let cache = RegistryCache()
            let loader = try RegistryCacheLoader(
                cache: cache, configuration: Stack.loaderConfiguration(groupIdPrefix: "feed-test-group"),
                logger: Stack.logger
            )
            // The producer first: graceful shutdown runs in reverse order, so the publisher stops
            // (finishing its round) before the producer flushes and stops.
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [producer, publisher, loader], gracefulShutdownSignals: [], logger: Stack.logger
                ))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let organization = try await repository.createOrganization(NewOrganization(name: "Group \(UUID().uuidString.prefix(8))"))
                try #require(await loader.waitUntilCaughtUp(timeout: .seconds(60)))
                try await eventually("the organization reaches the cache", timeout: .seconds(10)) {
                    cache.organization(id: organization.id) != nil
                }
                let start = ContinuousClock.now
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                #expect(ContinuousClock.now - start < .seconds(10))
                #expect(try await Self.unpublished(client, type: "organization", id: organization.id) == 0)
            }
        }
    }

    @Test("an outbox row becomes a RegistryChange keyed <type>:<id>, version = row id; a delete a tombstone")
    func rowToMessage() throws {
        let row = RegistryOutboxRow(
            id: 42, entityType: "namespace", entityId: "FF8488AE-921E-49F4-99D4-949B0F9F6171:9", op: "upsert",
            payload:
                #"{"uuid": "FF8488AE-921E-49F4-99D4-949B0F9F6171", "major": 9, "organizationId": "org_1", "allocatedAt": "2026-11-22T03:30:40.710Z"}"#,
            createdAt: Date(timeIntervalSince1970: 1_790_000_000)
        )
        let message = try row.message()
        #expect(message.topic == "registry.changes")
        #expect(message.key == Array("namespace:FF8488AE-921E-49F4-99D4-949B0F9F6171:9".utf8))
        let record = try RegistryRecord.decode(key: "namespace:FF8488AE-921E-49F4-99D4-949B0F9F6171:9", value: message.value)
        guard case .upsert(let change) = record else { Issue.record("not an upsert"); return }
        #expect(change.version == 42)
        #expect(change.entityType.rawValue == "namespace")
        #expect(change.payload?["organizationId"]?.stringValue == "org_1")

        var delete = row
        delete.op = "delete"
        delete.payload = nil
        #expect(try delete.message().value == nil)
    }
}
