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
    /// With `MERGER_WRITE_LANES` above 1 (2 by default), a large batch is stored as concurrent transactions, one
    /// per lane of users, each with its own lane's offsets; and a running merger never stores over offsets
    /// that went back under it.
    @Suite("Write lanes")
    struct WriteLanesTests {
        /// `users` users with 1 to 6 events each: a check-in, heartbeats, a check-out.
        static func day(users: Int, prefix: String, at start: Date) -> [VettedEvent] {
            var events: [VettedEvent] = []
            for u in 0..<users {
                let user = "\(prefix)-\(u)", sessionKey = "sk-\(user)"
                events.append(Make.checkIn(user: user, site: "S_HQ", at: start, sessionKey: sessionKey))
                for h in 0..<(u % 5) {
                    events.append(Make.heartbeat(user: user, at: start.addingTimeInterval(Double(h + 1) * 300), sessionKey: sessionKey))
                }
                events.append(Make.checkOut(user: user, at: start.addingTimeInterval(3 * 3_600), sessionKey: sessionKey))
            }
            // Interleaved as a partition holds them: by time, users mixed.
            return events.enumerated().sorted {
                ($0.element.raw.payload.eventTime, $0.offset) < ($1.element.raw.payload.eventTime, $1.offset)
            }
            .map(\.element)
        }

        @Test func aLargeBatchIsSplitIntoItsUsersStableLanesAndASmallOneIsNot() async throws {
            try await MergerDB.run { db in
                let events = Self.day(users: 60, prefix: "lanes-\(token())", at: Date().minus(hours: 4))
                let batch = await db.processor.decode(try db.messages(events))
                try #require(batch.decoded.count == events.count && events.count >= 2 * VettedBatchProcessor.minimumMessagesPerLane)

                let lanes = try #require(VettedBatchProcessor.writeLanes(of: batch.decoded, count: 2))
                try #require(lanes.count == 2)
                #expect(lanes.map(\.lane) == [0, 1])
                #expect(lanes.flatMap(\.indices).sorted() == Array(events.indices))
                for lane in lanes {
                    #expect(lane.indices == lane.indices.sorted(), "a lane keeps batch order")
                    for index in lane.indices {
                        #expect(
                            VettedBatchProcessor.lane(ofUser: events[index].raw.userId, count: 2) == lane.lane, "a user's lane is stable")
                    }
                }

                let small = await db.processor.decode(
                    try db.messages(Array(events.prefix(2 * VettedBatchProcessor.minimumMessagesPerLane - 1))))
                #expect(VettedBatchProcessor.writeLanes(of: small.decoded, count: 2) == nil)
                #expect(VettedBatchProcessor.writeLanes(of: batch.decoded, count: 1) == nil)
                // One user's messages never span two lanes, so they fill one: stored in one transaction.
                let oneUser = (0..<(2 * VettedBatchProcessor.minimumMessagesPerLane)).map { i in
                    Make.heartbeat(user: "lanes-one-user", at: Date().minus(seconds: Double(i)), sessionKey: "sk-one")
                }
                #expect(VettedBatchProcessor.writeLanes(of: await db.processor.decode(try db.messages(oneUser)).decoded, count: 2) == nil)
            }
        }

        /// The stored lane offsets assume each user's lane: the hash may never change.
        @Test func aUsersLaneIsPinned() {
            #expect(VettedBatchProcessor.lane(ofUser: "usr_d77ffd3516089dfaedb92bd4", count: 1) == 0)
            #expect(
                ["usr_d77ffd3516089dfaedb92bd4", "usr_cbcd6e5d5c6c2b9e65304c2f", "u-1", ""].map {
                    VettedBatchProcessor.lane(ofUser: $0, count: 2)
                } == [1, 0, 0, 1])
            #expect(
                ["usr_d77ffd3516089dfaedb92bd4", "usr_cbcd6e5d5c6c2b9e65304c2f", "u-1", ""].map {
                    VettedBatchProcessor.lane(ofUser: $0, count: 8)
                } == [3, 6, 2, 5])
        }

        /// A processor of `db`'s schema storing in `lanes` lanes, in the consumer group `db`'s plus `group`.
        static func processor(_ db: MergerDB, lanes: Int, group: String = "-lanes") -> VettedBatchProcessor {
            var configuration = db.configuration
            configuration.consumer.groupId += group
            configuration.writeLanes = lanes
            return VettedBatchProcessor(
                client: db.client, configuration: configuration, deadLetters: CollectingDeadLetters(), logger: MergerDB.logger)
        }

        /// Two lanes, in a consumer group of their own.
        static func lanes(_ db: MergerDB) -> VettedBatchProcessor { processor(db, lanes: 2) }

        /// Every batch in one transaction, in another consumer group of its own.
        static func oneTransaction(_ db: MergerDB) -> VettedBatchProcessor { processor(db, lanes: 1, group: "-one") }

        func storedOffset(_ processor: VettedBatchProcessor, _ db: MergerDB) async throws -> Int64? {
            let partition = TopicPartition(topic: db.topic, partition: 0)
            return try await processor.storedOffsets(for: [partition])[partition]
        }

        /// The stored rows of the lanes processor's group: (lane, lane count, next offset), by lane.
        func laneRows(_ db: MergerDB) async throws -> [[Int64]] {
            let rows = try await db.client.query(
                """
                SELECT lane::int8, lanes::int8, next_offset FROM consumer_offsets
                WHERE group_id = \(db.configuration.consumer.groupId + "-lanes") ORDER BY lane
                """, logger: MergerDB.logger)
            var result: [[Int64]] = []
            for try await (lane, lanes, next) in rows.decode((Int64, Int64, Int64).self) { result.append([lane, lanes, next]) }
            return result
        }

        @Test func aBatchStoredInLanesGivesWhatOneTransactionGives() async throws {
            try await MergerDB.run { db in
                try #require(db.configuration.writeLanes == 2, "two lanes are the default")
                let lanes = Self.lanes(db), one = Self.oneTransaction(db)
                let start = Date().minus(hours: 4), run = token()
                let inLanes = Self.day(users: 60, prefix: "lanes-\(run)", at: start)
                let inOne = Self.day(users: 60, prefix: "one-\(run)", at: start)

                let laneResult = try await db.process(inLanes, from: 0, with: lanes)
                let oneResult = try await db.process(inOne, from: 0, with: one)

                #expect(laneResult.transactions == 2 && oneResult.transactions == 1)
                #expect(laneResult.verdicts.map(\.requestId) == inLanes.map(\.raw.requestId), "one verdict per message, in message order")
                #expect(laneResult.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(laneResult.verdicts.map(\.outcome) == oneResult.verdicts.map(\.outcome))
                #expect(laneResult.sessionChanges.count == oneResult.sessionChanges.count)
                #expect(try await storedOffset(lanes, db) == Int64(inLanes.count))
                #expect(try await laneRows(db) == [[0, 2, Int64(inLanes.count)], [1, 2, Int64(inLanes.count)]], "each lane's row")
                #expect(try await storedOffset(one, db) == Int64(inOne.count))
                for u in 0..<60 {
                    let lanes = try await db.sessions(user: "lanes-\(run)-\(u)"), one = try await db.sessions(user: "one-\(run)-\(u)")
                    #expect(lanes.map(\.status) == one.map(\.status) && lanes.map(\.closeReason) == one.map(\.closeReason))
                    #expect(lanes.map(\.checkInAt) == one.map(\.checkInAt))
                    #expect(
                        try await db.outbox(user: "lanes-\(run)-\(u)").map(\.change) == db.outbox(user: "one-\(run)-\(u)").map(\.change))
                }
            }
        }

        /// A crash after one lane committed and before the other did: each lane's transaction held its
        /// own offsets, so the restarted merger resumes at the lane behind and skips what the other
        /// lane stored. Every event is stored once; nothing is answered twice.
        /// Stores a day of 60 users in lanes, then a second day whose lane 1 fails at its offsets after
        /// lane 0 has committed (a crash between the lanes' commits). Returns the two days.
        func crashBetweenLanes(_ db: MergerDB, run: String) async throws -> (first: [VettedEvent], second: [VettedEvent]) {
            let first = Self.day(users: 60, prefix: "crash-a-\(run)", at: Date().minus(hours: 6))
            let second = Self.day(users: 60, prefix: "crash-b-\(run)", at: Date().minus(hours: 4))
            try #require(try await db.process(first, from: 0, with: Self.lanes(db)).verdicts.count == first.count)
            let end1 = Int64(first.count), end2 = end1 + Int64(second.count)
            try await failOffsetWrites(db, lane: 1, "the merger died before lane 1 committed")
            let crash = await #expect(throws: (any Error).self) { try await db.process(second, from: end1, with: Self.lanes(db)) }
            #expect(crash.map { PostgresFailure.description(of: $0) } == "the merger died before lane 1 committed")
            try await db.client.query("DROP TRIGGER fail_offsets ON consumer_offsets", logger: MergerDB.logger)
            #expect(try await laneRows(db) == [[0, 2, end2], [1, 2, end1]])
            return (first, second)
        }

        /// Makes every write of `lane`'s offsets (nil: of any lane) fail until `fail_offsets` is dropped.
        func failOffsetWrites(_ db: MergerDB, lane: Int?, _ message: String) async throws {
            try await db.client.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE OR REPLACE FUNCTION fail_offsets() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN PERFORM pg_sleep(0.5); RAISE EXCEPTION '\(message)'; END $$
                        """), logger: MergerDB.logger)
            let condition = lane.map { "NEW.lane = \($0)" } ?? "true"
            try await db.client.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE TRIGGER fail_offsets BEFORE INSERT OR UPDATE ON consumer_offsets
                        FOR EACH ROW WHEN (\(condition)) EXECUTE FUNCTION fail_offsets()
                        """), logger: MergerDB.logger)
        }

        @Test("after a crash between lanes, a batch that fails once and is stored again still answers each event once")
        func aRetriedBatchAfterACrashBetweenLanesAnswersLaneOnesEventsOnly() async throws {
            try await MergerDB.run { db in
                let run = token()
                let (first, second) = try await crashBetweenLanes(db, run: run)
                let end1 = Int64(first.count), end2 = end1 + Int64(second.count)
                let laneOne = Set(second.filter { VettedBatchProcessor.lane(ofUser: $0.raw.userId, count: 2) == 1 }.map(\.raw.requestId))
                let restarted = Self.lanes(db)
                #expect(try await storedOffset(restarted, db) == end1)
                // A small first batch is stored in one transaction: lane 0 keeps its further offset.
                let head = Array(second.prefix(10))
                let small = try await db.process(head, from: end1, with: restarted)
                #expect(small.verdicts.map(\.requestId) == head.map(\.raw.requestId).filter(laneOne.contains))
                #expect(try await laneRows(db) == [[0, 2, end2], [1, 2, end1 + 10]])
                // The rest fails once (PostgreSQL restarted, say) and is stored again by the same processor.
                let rest = Array(second.dropFirst(10))
                try await failOffsetWrites(db, lane: nil, "PostgreSQL went away")
                let failure = await #expect(throws: (any Error).self) { try await db.process(rest, from: end1 + 10, with: restarted) }
                #expect(failure.map { PostgresFailure.description(of: $0) } == "PostgreSQL went away")
                try await db.client.query("DROP TRIGGER fail_offsets ON consumer_offsets", logger: MergerDB.logger)
                let again = try await db.process(rest, from: end1 + 10, with: restarted)
                #expect(again.verdicts.map(\.requestId) == rest.map(\.raw.requestId).filter(laneOne.contains))
                #expect(again.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(try await laneRows(db) == [[0, 2, end2], [1, 2, end2]])
                #expect(
                    try await db.count("SELECT count(DISTINCT idempotency_key)::int8 FROM events WHERE user_id LIKE 'crash-b-%'")
                        == second.count)
            }
        }

        @Test func aCrashBetweenTwoLanesCommitsStoresEveryEventOnce() async throws {
            try await MergerDB.run { db in
                let run = token()
                let (first, second) = try await crashBetweenLanes(db, run: run)
                let end1 = Int64(first.count), end2 = end1 + Int64(second.count)
                let laneOf = { (event: VettedEvent) in VettedBatchProcessor.lane(ofUser: event.raw.userId, count: 2) }
                let storedBefore = try await db.count("SELECT count(*)::int8 FROM events WHERE user_id LIKE 'crash-b-%'")
                try #require(storedBefore == second.filter { laneOf($0) == 0 }.count, "lane 0 committed, lane 1 did not")

                // Had the broker lost the partition, the consumer would read a new log from offset 0:
                // nothing of it is skipped as stored.
                let newLog = Self.day(users: 60, prefix: "crash-d-\(run)", at: Date().minus(hours: 4))
                let reset = Self.lanes(db)
                #expect(try await storedOffset(reset, db) == end1)
                let fromStart = try await reset.process(try db.messages(newLog, from: 0))
                #expect(fromStart.verdicts.count == newLog.count && fromStart.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(try await db.count("SELECT count(*)::int8 FROM events WHERE user_id LIKE 'crash-d-%'") == newLog.count)
                try await db.client.query(
                    """
                    UPDATE consumer_offsets SET next_offset = CASE lane WHEN 0 THEN \(end2) ELSE \(end1) END
                    WHERE group_id = \(db.configuration.consumer.groupId + "-lanes")
                    """, logger: MergerDB.logger)

                // The restarted merger: resumes at lane 1's offset, re-reads the batch, stores lane 1's share.
                let restarted = Self.lanes(db)
                #expect(try await storedOffset(restarted, db) == end1)
                let again = try await db.process(second, from: end1, with: restarted)
                let laneOne = second.filter { laneOf($0) == 1 }
                #expect(again.verdicts.map(\.requestId) == laneOne.map(\.raw.requestId), "lane 0's events are not answered again")
                #expect(again.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(try await db.count("SELECT count(*)::int8 FROM events WHERE user_id LIKE 'crash-b-%'") == second.count)
                #expect(
                    try await db.count("SELECT count(DISTINCT idempotency_key)::int8 FROM events WHERE user_id LIKE 'crash-b-%'")
                        == second.count)
                #expect(try await laneRows(db) == [[0, 2, end2], [1, 2, end2]])
                // Every user's day is what one transaction gives.
                let one = try await db.process(
                    Self.day(users: 60, prefix: "crash-c-\(run)", at: Date().minus(hours: 4)), from: 0, with: Self.oneTransaction(db))
                try #require(one.verdicts.count == second.count)
                for u in 0..<60 {
                    let lanes = try await db.sessions(user: "crash-b-\(run)-\(u)"),
                        single = try await db.sessions(user: "crash-c-\(run)-\(u)")
                    #expect(lanes.map(\.status) == single.map(\.status) && lanes.map(\.closeReason) == single.map(\.closeReason))
                }
                // The next batch goes on from both lanes' offset.
                #expect(try await storedOffset(Self.lanes(db), db) == end2)
            }
        }

        /// PostgreSQL restored from a backup under a running merger: the stored offsets are behind what the
        /// merger has read. Storing on would write its later offsets over them, and the records in between
        /// (what the restore lost) would never be read again.
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

        /// A partition read again from an earlier offset by a running merger (the start of a broker's new
        /// log), stored in lanes: the lane that commits second finds the first one's lower offset in the
        /// table, which is the batch's own progress, not offsets gone back (`StoredOffsetsWatch`).
        @Test func aPartitionReadAgainFromItsStartIsStoredInLanes() async throws {
            try await MergerDB.run { db in
                let run = token()
                let processor = Self.lanes(db)
                let first = Self.day(users: 60, prefix: "reread-a-\(run)", at: Date().minus(hours: 4))
                try #require(try await db.process(first, from: 0, with: processor).verdicts.count == first.count)
                // One user in lane 0 and 39 in lane 1: lane 0's transaction commits well before lane 1's
                // stores its offsets.
                func log(_ prefix: String) -> [VettedEvent] {
                    let events = Self.day(users: 200, prefix: prefix, at: Date().minus(hours: 3))
                    let users = Array(Set(events.map(\.raw.userId))).sorted()
                    let lane = { (user: String) in VettedBatchProcessor.lane(ofUser: user, count: 2) }
                    let chosen = Set(users.filter { lane($0) == 0 }.prefix(1) + users.filter { lane($0) == 1 }.prefix(39))
                    return events.filter { chosen.contains($0.raw.userId) }
                }
                let newLog = log("reread-b-\(run)")
                try #require(newLog.count < first.count)
                for attempt in 0..<3 {
                    let events = attempt == 0 ? newLog : log("reread-\(attempt)-\(run)")
                    let again = try await db.process(events, from: 0, with: processor)
                    #expect(again.transactions == 2 && again.verdicts.count == events.count)
                    #expect(again.verdicts.allSatisfy { $0.outcome == .accepted })
                }
                #expect(try await db.count("SELECT count(*)::int FROM events WHERE user_id LIKE \("reread-b-\(run)-%")") == newLog.count)
            }
        }

        /// Changing the lane count: rows written under another count are replaced by the new count's,
        /// at their smallest offset; rows that do not cover every lane of their count are dropped, and the
        /// partition is read again from its committed offset (the events' unique keys answer the repeats).
        @Test func rowsOfAnotherLaneCountAreReplacedAtTheirSmallestOffset() async throws {
            try await MergerDB.run { db in
                let events = Self.day(users: 60, prefix: "count-\(token())", at: Date().minus(hours: 4))
                try #require(try await db.process(events, from: 0, with: Self.lanes(db)).verdicts.count == events.count)
                let end = Int64(events.count)
                let oneLane = Self.processor(db, lanes: 1)
                #expect(try await storedOffset(oneLane, db) == end)
                #expect(try await laneRows(db) == [[0, 1, end]])
                #expect(try await storedOffset(Self.lanes(db), db) == end)
                #expect(try await laneRows(db) == [[0, 2, end], [1, 2, end]])

                // Lane 1 of 2 lost (never written): under one lane nothing says what lane 1's users stored.
                try await db.client.query(
                    "DELETE FROM consumer_offsets WHERE group_id = \(db.configuration.consumer.groupId + "-lanes") AND lane = 1",
                    logger: MergerDB.logger)
                #expect(try await storedOffset(oneLane, db) == nil)
                #expect(try await laneRows(db) == [])
            }
        }
    }
}
