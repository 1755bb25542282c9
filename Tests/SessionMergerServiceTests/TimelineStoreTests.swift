import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import SessionMergerCore
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// How timelines are locked and written back (`MergerStore`), against the real local PostgreSQL:
    /// each row is found by its primary key, and a row written since it was loaded is a conflict.
    @Suite("Timeline rows", .timeLimit(.minutes(3)))
    struct TimelineStoreTests {
        @Test func lockingFindsEachStoredTimelineByItsKeyAndSkipsUnknownKeys() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", other = "u-\(token())", siteA = "site-a-\(token())", siteB = "site-b-\(token())"
                let now = Date()
                try await db.process(
                    [
                        Make.checkIn(user: user, site: siteA, at: now.minus(minutes: 30), sessionKey: "sk-\(token())"),
                        Make.checkIn(user: user, site: siteB, at: now.minus(minutes: 20), sessionKey: "sk-\(token())"),
                    ], from: 0)
                let a = MergerStore.TimelineKey(userId: user, siteId: siteA)
                let b = MergerStore.TimelineKey(userId: user, siteId: siteB)
                let unknown = [
                    MergerStore.TimelineKey(userId: user, siteId: "site-none-\(token())"),
                    MergerStore.TimelineKey(userId: other, siteId: siteA),
                ]

                let loaded = try await db.client.withTransaction(logger: MergerDB.logger) { connection in
                    try await MergerStore.lockTimelines(
                        [b] + unknown + [a], policy: db.configuration.policy, on: connection, logger: MergerDB.logger)
                }
                #expect(Set(loaded.keys) == [a, b])
                #expect(loaded[a]?.version == 1 && loaded[b]?.version == 1)
                #expect(loaded[a]?.timeline.siteId == siteA && loaded[b]?.timeline.siteId == siteB)
                #expect(loaded[a]?.timeline.eventCount == 1 && loaded[b]?.timeline.eventCount == 1)
            }
        }

        @Test func aStoredHeaderIsFoundationsSortedJSONAndRowsWrittenByFoundationStillRead() async throws {
            try await MergerDB.run { db in
                let user = "u/\(token())", site = "site/\(token())", sessionKey = "sk-\(token())", now = Date()
                try await db.process(
                    [
                        Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sessionKey),
                        Make.heartbeat(user: user, at: now.minus(minutes: 20), sessionKey: sessionKey),
                        Make.checkOut(user: user, at: now.minus(minutes: 10), sessionKey: sessionKey),
                    ], from: 0)
                let rows = try await db.client.query(
                    "SELECT state FROM timelines WHERE user_id = \(user) AND site_id = \(site)", logger: MergerDB.logger)
                var stored: [String] = []
                for try await state in rows.decode(String.self) { stored.append(state) }
                let state = try #require(stored.first)
                let header = try #require(try StoredTimeline.header(from: state))
                #expect(header.userId == user && header.siteId == site)

                // What Foundation's encoder wrote for the same header (rows stored before this codec).
                struct Envelope: Encodable { var format: Int, header: TimelineState.Header }
                let foundation = JSONEncoder()
                foundation.outputFormatting = .sortedKeys
                let old = String(decoding: try foundation.encode(Envelope(format: StoredTimeline.format, header: header)), as: UTF8.self)
                #expect(old.contains(#"\/"#)) // Foundation escapes the slash; the codec does not
                #expect(state == old.replacingOccurrences(of: #"\/"#, with: "/"))
                #expect(try StoredTimeline.header(from: old) == header)
            }
        }

        @Test func aTimelineSavedAtAVersionItNoLongerHasIsAWriteConflict() async throws {
            try await MergerDB.run { db in
                let user = "u-\(token())", site = "site-\(token())"
                try await db.process(
                    [Make.checkIn(user: user, site: site, at: Date().minus(minutes: 10), sessionKey: "sk-\(token())")], from: 0)
                let key = MergerStore.TimelineKey(userId: user, siteId: site)
                let policy = db.configuration.policy
                func storedVersion() async throws -> Int {
                    try await db.count("SELECT version::int FROM timelines WHERE user_id = \(user) AND site_id = \(site)")
                }

                // Saved at the version it was loaded at: written, one version on.
                try await db.client.withTransaction(logger: MergerDB.logger) { connection in
                    let loaded = try await MergerStore.lockTimelines([key], policy: policy, on: connection, logger: MergerDB.logger)
                    try await MergerStore.saveTimelines(loaded, on: connection, logger: MergerDB.logger)
                }
                #expect(try await storedVersion() == 2)

                // Saved as if loaded before that write: refused, and nothing changes.
                await #expect(throws: MergerWriteConflict.self) {
                    try await PostgresFailure.unwrapping {
                        try await db.client.withTransaction(logger: MergerDB.logger) { connection in
                            var loaded = try await MergerStore.lockTimelines([key], policy: policy, on: connection, logger: MergerDB.logger)
                            loaded[key]?.version = 1
                            try await MergerStore.saveTimelines(loaded, on: connection, logger: MergerDB.logger)
                        }
                    }
                }
                #expect(try await storedVersion() == 2)
            }
        }

        /// A batch takes its timelines out of its processor's cache and puts them back after the commit:
        /// a timeline another replica changed in between is rebuilt from the table, never applied to
        /// from the stale copy, and the events of all three batches are in it.
        @Test func aTimelineAnotherReplicaChangedIsRebuiltNotTakenFromTheCache() async throws {
            try await MergerDB.run { db in
                let replica = VettedBatchProcessor(
                    client: db.client, configuration: db.configuration, deadLetters: db.deadLetters, logger: MergerDB.logger)
                let user = "u-\(token())", site = "site-\(token())", sessionKey = "sk-\(token())", now = Date()
                try await db.process([Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sessionKey)], from: 0)
                #expect(db.processor.cachedTimelines == 1)
                try await db.process([Make.event(.heartbeat, user: user, site: site, at: now.minus(minutes: 20))], from: 1, with: replica)
                let last = try await db.process([Make.event(.heartbeat, user: user, site: site, at: now.minus(minutes: 10))], from: 2)
                #expect(last.verdicts.map(\.outcome) == [.accepted])
                #expect(db.processor.cachedTimelines == 1)
                #expect(
                    try await db.count("SELECT event_count FROM timelines WHERE user_id = \(user) AND site_id = \(site) AND version = 3")
                        == 3)
                let sessions = try await db.sessions(user: user)
                #expect(sessions.count == 1 && sessions.first?.status == "open")
            }
        }

        /// Two replicas (each its own processor and timeline cache) apply events of one new timeline at
        /// once: whichever inserts the row second loses the race, retries on the row the first wrote,
        /// and both events are in the timeline.
        @Test func twoReplicasCreatingOneTimelineAtOnceBothLand() async throws {
            try await MergerDB.run { db in
                // Its own consumer group: two owners of one partition's offsets at once would each see the
                // other's older write as offsets gone back (StoredOffsetsWatch).
                var replicaConfiguration = db.configuration
                replicaConfiguration.consumer.groupId += "-replica"
                let replica = VettedBatchProcessor(
                    client: db.client, configuration: replicaConfiguration, deadLetters: db.deadLetters, logger: MergerDB.logger)
                let now = Date()
                for round in 0..<5 {
                    let user = "u-\(token())", site = "site-\(token())", sessionKey = "sk-\(token())"
                    let checkIn = Make.checkIn(user: user, site: site, at: now.minus(minutes: 30), sessionKey: sessionKey)
                    let presence = Make.event(.heartbeat, user: user, site: site, at: now.minus(minutes: 29))
                    async let first = db.process([checkIn], from: Int64(round * 2))
                    async let second = db.process([presence], from: Int64(round * 2 + 1), with: replica)
                    let (one, two) = try await (first, second)
                    #expect(one.verdicts.map(\.outcome) == [.accepted])
                    #expect(two.verdicts.map(\.outcome) == [.accepted])
                    #expect(
                        try await db.count(
                            "SELECT event_count FROM timelines WHERE user_id = \(user) AND site_id = \(site) AND version = 2") == 2)
                    #expect(
                        try await db.count(
                            "SELECT count(*)::int FROM events WHERE user_id = \(user) AND outcome = 'accepted'") == 2)
                }
            }
        }
    }
}
