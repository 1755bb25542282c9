import Foundation
import LocalStackTesting
import Testing

@Suite("attendancectl doctor")
struct DoctorTests {
    /// PostgreSQL settings that cannot be read fail the postgres row; the broker's rows, checked
    /// before it, are still printed.
    @Test func unreadablePostgresSettingsAreARowNotTheWholeReport() async throws {
        try LocalStack.ensureStarted()
        let run = await runCLI(
            ["doctor", "--json", "--brokers", LocalStack.brokers], environment: ["DATABASE_URL": "mysql://nowhere"])
        #expect(run.code == 1, "\(run)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]], "\(run)")
        let byCheck = Dictionary(rows.compactMap { row in (row["check"] as? String).map { ($0, row) } }) { first, _ in first }
        #expect(byCheck.keys.sorted() == ["broker", "librdkafka", "postgres", "round trip"], "\(run)")
        #expect(byCheck["librdkafka"]?["status"] as? String == "ok")
        #expect(byCheck["round trip"]?["status"] as? String == "ok", "\(run)")
        #expect(byCheck["postgres"]?["status"] as? String == "FAIL")
        #expect((byCheck["postgres"]?["detail"] as? String)?.contains("DATABASE_URL") == true, "\(run)")
    }
}
