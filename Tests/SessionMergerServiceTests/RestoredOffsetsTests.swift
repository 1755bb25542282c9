import AttendanceProtocol
import Foundation
import KafkaClient
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import Testing

@testable import SessionMergerService

extension SessionMergerServiceTests {
    /// PostgreSQL restored from a backup under a running merger: the stored offsets are behind what the
    /// merger has read. Storing on would write its later offsets over them, and the records in between
    /// (what the restore lost) would never be read again.
    @Suite("Stored offsets that went back under a running merger", .timeLimit(.minutes(2)))
    struct RestoredOffsetsTests {
        @Test func aBatchOverOffsetsThatWentBackStoresNothingAndAFreshProcessReadsTheLostRecordsAgain() async throws {
            try await MergerDB.run { db in
                let run = token(), site = "site-\(token())"
                let users = (0..<3).map { "restored-\(run)-\($0)" }
                let keys = users.map { _ in "sk-\(token())" }
                let checkIns = zip(users, keys).map { Make.checkIn(user: $0, site: site, at: Date().minus(hours: 2), sessionKey: $1) }
                let heartbeats = zip(users, keys).map { Make.heartbeat(user: $0, at: Date().minus(hours: 1), sessionKey: $1) }
                let stored = { try await db.count("SELECT count(*)::int FROM events WHERE user_id LIKE \("restored-\(run)-%")") }
                try #require(try await db.process(checkIns, from: 0).verdicts.count == 3)

                // The restore: a backup from before the check-ins (offsets and events as they were then).
                try await db.client.query("DELETE FROM events WHERE user_id LIKE \("restored-\(run)-%")", logger: MergerDB.logger)
                try await db.client.query(
                    "UPDATE consumer_offsets SET next_offset = 1 WHERE group_id = \(db.configuration.consumer.groupId)",
                    logger: MergerDB.logger)
                let error = await #expect(throws: StoredOffsetsWentBack.self) { try await db.process(heartbeats, from: 3) }
                #expect(error?.expected == 3 && error?.stored == 1, "\(String(describing: error))")
                #expect(try await stored() == 0, "nothing of the refused batch is stored")

                // The table's rows gone altogether are refused the same way.
                try await db.client.query(
                    "DELETE FROM consumer_offsets WHERE group_id = \(db.configuration.consumer.groupId)", logger: MergerDB.logger)
                let gone = await #expect(throws: StoredOffsetsWentBack.self) { try await db.process(heartbeats, from: 3) }
                #expect(gone?.stored == nil)

                // A fresh process (the supervisor's restart) seeks to what the table holds and reads the
                // lost check-ins again.
                let fresh = VettedBatchProcessor(
                    client: db.client, configuration: db.configuration, deadLetters: CollectingDeadLetters(), logger: MergerDB.logger)
                #expect(try await fresh.storedOffsets(for: [TopicPartition(topic: db.topic, partition: 0)]).isEmpty)
                let again = try await db.process(checkIns + heartbeats, from: 0, with: fresh)
                #expect(again.verdicts.count == 6 && again.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(try await stored() == 6)
            }
        }
    }
}
