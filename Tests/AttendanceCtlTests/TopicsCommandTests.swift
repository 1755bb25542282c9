import AttendanceProtocol
import Foundation
import LocalStackTesting
import ServiceRuntime
import Testing

/// `attendancectl topics ensure` reports what the broker has, on topics of the test's own.
@Suite("attendancectl topics ensure")
struct TopicsCommandTests {
    @Test("an existing topic's partitions are what the broker has; asking for other counts is an error naming them")
    func existingTopicsShowTheirOwnPartitions() async throws {
        try LocalStack.ensureStarted()
        let prefix = LocalStack.uniqueName("ctl-topics")
        var environment = ["KAFKA_BROKERS": LocalStack.brokers]
        for topic in Topic.allCases { environment[topic.overrideKey] = "\(prefix).\(topic.name)" }
        func partitions(_ run: CLIRun) throws -> [String: String] {
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: String]], "\(run)")
            return Dictionary(uniqueKeysWithValues: rows.compactMap { row in row["topic"].map { ($0, row["partitions"] ?? "") } })
        }
        let raw = "\(prefix).\(Topic.rawEvents.name)"

        let first = await runCLI(["topics", "ensure", "--partitions", "2", "--json"], environment: environment)
        #expect(first.code == 0, "\(first)")
        #expect(try partitions(first)[raw] == "2")

        let again = await runCLI(["topics", "ensure", "--partitions", "3", "--json"], environment: environment)
        #expect(again.code == 1, "\(again)")
        #expect(try partitions(again)[raw] == "2")
        #expect(again.stderr.contains("\(raw) has 2") && again.stderr.contains("3 were asked for"), "\(again)")

        // Without a count asked for, existing topics are fine as they are.
        let plain = await runCLI(["topics", "ensure", "--json"], environment: environment)
        #expect(plain.code == 0, "\(plain)")
        #expect(try partitions(plain)[raw] == "2")
    }
}
