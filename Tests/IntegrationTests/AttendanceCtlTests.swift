import ArgumentParser
import AttendanceCtlCommands
import AttendanceProtocol
import KafkaClient
import LocalStackTesting
import Testing

@Suite("attendancectl")
struct AttendanceCtlTests {
    @Test func topicsEnsureCreatesEveryPlatformTopicFromTheProtocol() async throws {
        try LocalStack.ensureStarted()
        let command = try AttendanceCtl.parseAsRoot(["topics", "ensure", "--brokers", LocalStack.brokers, "--json"])
        guard var ensure = command as? any AsyncParsableCommand else { Issue.record("not async"); return }
        try await ensure.run()
        let admin = try KafkaAdmin(
            configuration: KafkaConfiguration(bootstrapServers: LocalStack.brokers, brokerQuirks: LocalStack.brokerQuirks),
            logger: LocalStack.logger)
        let topics = try await admin.topics()
        for topic in Topic.allCases {
            #expect(topics[topic.name] == topic.defaultPartitionCount, "\(topic.name)")
        }
    }

    @Test(arguments: [
        (["topics", "ensure", "--brokers", "nonsense"], "configuration error: KAFKA_BROKERS=\"nonsense\" is invalid"),
        (["frobnicate"], "Unexpected argument 'frobnicate'"),
        (["topics", "ensure", "--replication-factor", "many"], "many"),
    ])
    func badInputIsOneReadableLine(arguments: [String], expected: String) async {
        do {
            var command = try AttendanceCtl.parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand { try await asyncCommand.run() } else { try command.run() }
            Issue.record("expected an error for \(arguments)")
        } catch {
            let message = AttendanceCtl.message(for: error)
            #expect(message.contains(expected), "\(message)")
            #expect(!message.contains("\n"))
        }
    }

    @Test func unreachableBrokerIsAnErrorNotAHang() async throws {
        let command = try AttendanceCtl.parseAsRoot(["topics", "list", "--brokers", "127.0.0.1:1"])
        var list = try #require(command as? any AsyncParsableCommand, "topics list is not an async command")
        let started = ContinuousClock.now
        let error = await #expect(throws: (any Error).self) { try await list.run() }
        #expect(AttendanceCtl.message(for: try #require(error)).contains("127.0.0.1:1"), "the error line names the broker")
        #expect(ContinuousClock.now - started < .seconds(60), "an error, not a hang")
    }
}
