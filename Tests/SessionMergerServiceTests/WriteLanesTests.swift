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
    /// With `MERGER_WRITE_LANES` above 1, a large batch is stored as concurrent transactions split by user, its
    /// offsets after all of them.
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

        @Test func aLargeBatchIsSplitByUserIntoBalancedLanesAndASmallOneIsNot() async throws {
            try await MergerDB.run { db in
                let events = Self.day(users: 60, prefix: "lanes-\(token())", at: Date().minus(hours: 4))
                let batch = await db.processor.decode(try db.messages(events))
                try #require(batch.decoded.count == events.count && events.count >= 2 * VettedBatchProcessor.minimumMessagesPerLane)

                let lanes = try #require(VettedBatchProcessor.writeLanes(of: batch.decoded, count: 2))
                try #require(lanes.count == 2)
                #expect(lanes.flatMap { $0 }.sorted() == Array(events.indices))
                for lane in lanes { #expect(lane == lane.sorted(), "a lane keeps batch order") }
                let usersOf = lanes.map { Set($0.map { events[$0].raw.userId }) }
                #expect(usersOf[0].isDisjoint(with: usersOf[1]), "a user's events stay in one lane")
                #expect(abs(lanes[0].count - lanes[1].count) <= 6, "lanes of \(lanes[0].count) and \(lanes[1].count) messages")

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

        /// A processor of `db`'s schema storing large batches in two lanes, with a consumer group of its own.
        static func lanes(_ db: MergerDB) -> VettedBatchProcessor {
            var configuration = db.configuration
            configuration.consumer.groupId += "-lanes"
            configuration.writeLanes = 2
            return VettedBatchProcessor(
                client: db.client, configuration: configuration, deadLetters: CollectingDeadLetters(), logger: MergerDB.logger)
        }

        func storedOffset(_ processor: VettedBatchProcessor, _ db: MergerDB) async throws -> Int64? {
            let partition = TopicPartition(topic: db.topic, partition: 0)
            return try await processor.storedOffsets(for: [partition])[partition]
        }

        @Test func aBatchStoredInLanesGivesWhatOneTransactionGives() async throws {
            try await MergerDB.run { db in
                try #require(db.configuration.writeLanes == 1, "one transaction per batch is the default")
                let lanes = Self.lanes(db)
                let start = Date().minus(hours: 4), run = token()
                let inLanes = Self.day(users: 60, prefix: "lanes-\(run)", at: start)
                let inOne = Self.day(users: 60, prefix: "one-\(run)", at: start)

                let laneResult = try await db.process(inLanes, from: 0, with: lanes)
                let oneResult = try await db.process(inOne, from: 0)

                #expect(laneResult.verdicts.map(\.requestId) == inLanes.map(\.raw.requestId), "one verdict per message, in message order")
                #expect(laneResult.verdicts.allSatisfy { $0.outcome == .accepted })
                #expect(laneResult.verdicts.map(\.outcome) == oneResult.verdicts.map(\.outcome))
                #expect(laneResult.sessionChanges.count == oneResult.sessionChanges.count)
                #expect(try await storedOffset(lanes, db) == Int64(inLanes.count))
                #expect(try await db.storedOffset() == Int64(inOne.count))
                for u in 0..<60 {
                    let lanes = try await db.sessions(user: "lanes-\(run)-\(u)"), one = try await db.sessions(user: "one-\(run)-\(u)")
                    #expect(lanes.map(\.status) == one.map(\.status) && lanes.map(\.closeReason) == one.map(\.closeReason))
                    #expect(lanes.map(\.checkInAt) == one.map(\.checkInAt))
                    #expect(
                        try await db.outbox(user: "lanes-\(run)-\(u)").map(\.change) == db.outbox(user: "one-\(run)-\(u)").map(\.change))
                }
            }
        }

        @Test func lanesThatCommittedBeforeTheOffsetsAreAnsweredFromTheirRowsWhenTheBatchComesAgain() async throws {
            try await MergerDB.run { db in
                let lanes = Self.lanes(db)
                let events = Self.day(users: 60, prefix: "again-\(token())", at: Date().minus(hours: 4))
                let first = try await db.process(events, from: 0, with: lanes)
                try #require(first.verdicts.count == events.count)
                // A crash after the lanes committed and before the offsets: the batch is read again.
                try await db.client.query(
                    "DELETE FROM consumer_offsets WHERE group_id = \(db.configuration.consumer.groupId + "-lanes")", logger: MergerDB.logger
                )
                #expect(try await storedOffset(lanes, db) == nil)
                let sessionsBefore = try await db.count("SELECT count(*)::int8 FROM sessions WHERE user_id LIKE 'again-%'")
                let changesBefore = try await db.count("SELECT count(*)::int8 FROM session_change_outbox WHERE user_id LIKE 'again-%'")

                let again = try await db.process(events, from: 0, with: lanes)
                #expect(again.verdicts.allSatisfy { $0.outcome == .duplicate })
                #expect(again.verdicts.map(\.serverReceiptId) == first.verdicts.map(\.serverReceiptId))
                #expect(again.verdicts.map(\.sessionId) == first.verdicts.map(\.sessionId))
                #expect(try await db.count("SELECT count(*)::int8 FROM sessions WHERE user_id LIKE 'again-%'") == sessionsBefore)
                #expect(
                    try await db.count("SELECT count(*)::int8 FROM session_change_outbox WHERE user_id LIKE 'again-%'") == changesBefore)
                #expect(try await storedOffset(lanes, db) == Int64(events.count))
            }
        }
    }
}
