import KafkaClient
import LocalStackTesting
import PostgresNIO
import ServiceRuntime
import SessionMergerService
import Testing

/// When the broker lost its state, a consumer's stored offsets are deleted before the process exits, or
/// the next start would skip the start of the recreated topics: a moment of PostgreSQL refusing the
/// delete does not leave them behind.
@Suite("Stored offsets forgotten after a broker lost its state", .timeLimit(.minutes(1)))
struct StoredOffsetsForgetTests {
    @Test func aDeleteRefusedTwiceIsRetriedUntilItSucceeds() async throws {
        try await LocalStack.withMigratedSchema(.merger, prefix: "forget_offsets") { db, schema in
            try await db.query(
                """
                INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ('g', 'attendance.events.vetted', 0, 42)
                """)
            // The first two deletes fail (counted outside their rolled-back transactions), the third goes through.
            for statement: PostgresQuery in [
                "CREATE SEQUENCE \(unescaped: schema).delete_attempts",
                """
                CREATE FUNCTION \(unescaped: schema).refuse_twice() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF nextval('\(unescaped: schema).delete_attempts') <= 2 THEN RAISE EXCEPTION 'the database is restarting'; END IF;
                    RETURN OLD;
                END $$
                """,
                """
                CREATE TRIGGER refuse BEFORE DELETE ON \(unescaped: schema).consumer_offsets
                FOR EACH ROW EXECUTE FUNCTION \(unescaped: schema).refuse_twice()
                """,
            ] {
                try await db.query(statement)
            }
            let forgotten = await StoredOffsetsTable.forget(groupId: "g", client: db, logger: LocalStack.logger(label: "forget-test"))
            #expect(forgotten)
            let left = try await db.query("SELECT count(*) FROM consumer_offsets")
            for try await count in left.decode(Int.self) { #expect(count == 0) }
            // And a delete refused for longer than the retry window gives up (the process exits then).
            try await db.query("INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ('g', 't', 0, 1)")
            try await db.query("ALTER SEQUENCE \(unescaped: schema).delete_attempts RESTART WITH 1")
            let gaveUp = await StoredOffsetsTable.forget(
                groupId: "g", client: db, logger: LocalStack.logger(label: "forget-test"), retryFor: .milliseconds(100))
            #expect(!gaveUp)
        }
    }
}
