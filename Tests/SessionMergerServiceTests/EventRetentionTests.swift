import AttendanceProtocol
import Foundation
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import SessionMergerCore
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// `merger.events` keeps what a timeline may read back and what a phone may still repeat; the rest
    /// goes once it is older than the retention.
    @Suite("Event retention", .timeLimit(.minutes(3)))
    struct EventRetentionTests {
        @Test func eventsPastTheRetentionGoUnlessTheirTimelineStillReadsThem() async throws {
            try await MergerDB.run { db in
                // The first user's timeline compacted whenever written (its watermark passes its closed
                // session); the third user's never (a few events: no watermark until the retention
                // compacts it).
                var compacting = db.configuration
                compacting.compactionThreshold = 0
                let processor = VettedBatchProcessor(
                    client: db.client, configuration: compacting, deadLetters: db.deadLetters, logger: MergerDB.logger,
                    userSites: { _ in nil })
                let now = Date()
                let site = "site-\(token())", early = "u-\(token())", recent = "u-\(token())", occasional = "u-\(token())"
                let oldKey = "sk-\(token())", openKey = "sk-\(token())", visitKey = "sk-\(token())"
                let oldSession = [
                    Make.checkIn(user: early, site: site, at: now.minus(hours: 240), sessionKey: oldKey),
                    Make.checkOut(user: early, at: now.minus(hours: 232), sessionKey: oldKey),
                ]
                let openSession = [
                    Make.checkIn(user: early, site: site, at: now.minus(hours: 2), sessionKey: openKey),
                    Make.heartbeat(user: early, at: now.minus(hours: 1), sessionKey: openKey),
                ]
                let otherUser = Make.checkIn(user: recent, site: site, at: now.minus(hours: 3), sessionKey: "sk-\(token())")
                let refused = Make.checkIn(
                    user: recent, site: site, at: now.minus(hours: 1), sessionKey: "sk-\(token())", decision: Make.reject())
                let visit = [
                    Make.checkIn(user: occasional, site: site, at: now.minus(hours: 200), sessionKey: visitKey),
                    Make.checkOut(user: occasional, at: now.minus(hours: 196), sessionKey: visitKey),
                ]
                try await db.process(oldSession, from: 0, with: processor)
                try await db.process(openSession + [otherUser, refused], from: 2, with: processor)
                try await db.process(visit, from: 6)
                #expect(try await db.count("SELECT count(*)::int FROM events") == 8)
                #expect(
                    try await db.count(
                        "SELECT count(*)::int FROM timelines WHERE user_id = \(occasional) AND state::json -> 'header' -> 'watermark' IS NULL"
                    )
                        == 1)
                let sessionsBefore = try await db.count("SELECT count(*)::int FROM sessions")

                var settings = db.configuration
                settings.eventRetention = .seconds(30 * 86_400)
                let retention = EventRetention(client: db.client, configuration: settings, logger: MergerDB.logger)
                // Ten days on, nothing is past 30 days yet.
                #expect(try await retention.prune(now: now.addingTimeInterval(10 * 86_400)) == 0)
                // Thirty-one days on: the refused event, the first user's closed session (before its
                // watermark) and the third user's visit (once the retention compacted its timeline) go;
                // the open session's and the second user's stay, and so does every session.
                #expect(try await retention.prune(now: now.addingTimeInterval(31 * 86_400)) == 5)
                let kept = try await keys(db)
                #expect(kept == Set((openSession + [otherUser]).map(\.raw.idempotencyKey)))
                #expect(try await db.count("SELECT count(*)::int FROM sessions") == sessionsBefore)
                // The timelines rebuild from what is left (a processor with no cached timelines reads them
                // back from merger.events): a heartbeat of the open session joins it, nothing else changes.
                var uncached = db.configuration
                uncached.timelineCacheCapacity = 0
                let fresh = VettedBatchProcessor(
                    client: db.client, configuration: uncached, deadLetters: db.deadLetters, logger: MergerDB.logger,
                    userSites: { _ in nil })
                let next = try await db.process(
                    [Make.heartbeat(user: early, at: now.minus(minutes: 30), sessionKey: openKey)], from: 8, with: fresh)
                #expect(next.verdicts.first?.sessionId == SessionSnapshot.id(anchorIdempotencyKey: openSession[0].raw.idempotencyKey))
                #expect(next.sessionChanges.map(\.change) == [.extended])
                // Kept for ever when the retention is off.
                var forever = db.configuration
                forever.eventRetention = nil
                let keepAll = EventRetention(client: db.client, configuration: forever, logger: MergerDB.logger)
                #expect(try await keepAll.prune(now: now.addingTimeInterval(3_650 * 86_400)) == 0)
            }
        }

        @Test func theRetentionSettingIsCheckedAtStart() throws {
            #expect(try SessionMergerConfiguration.load(from: EnvironmentReader([:])).eventRetention == .seconds(400 * 86_400))
            #expect(
                try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_EVENT_RETENTION_DAYS": "0"])).eventRetention == nil)
            #expect(
                try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_EVENT_RETENTION_DAYS": "30"])).eventRetention
                    == .seconds(30 * 86_400))
            for bad in ["7", "29", "3651", "-1", "a year"] {
                #expect(throws: ConfigurationError.self, "\(bad)") {
                    try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_EVENT_RETENTION_DAYS": bad]))
                }
            }
        }

        private func keys(_ db: MergerDB) async throws -> Set<String> {
            var keys = Set<String>()
            for try await key in try await db.client.query("SELECT idempotency_key FROM events", logger: MergerDB.logger).decode(
                String.self)
            {
                keys.insert(key)
            }
            return keys
        }
    }
}
