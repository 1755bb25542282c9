import AttendanceProtocol
import ServiceRuntime
import Testing

@testable import SessionMergerService

@Suite("The merger's minimum presence setting")
struct MinimumPresenceConfigurationTests {
    @Test func tenMinutesByDefaultAnyValueUpToAnHourAndAClearErrorOtherwise() throws {
        #expect(try SessionMergerConfiguration.load(from: EnvironmentReader([:])).minimumPresence == 600)
        let off = try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_MINIMUM_PRESENCE_SECONDS": "0"]))
        #expect(off.minimumPresence == 0)
        let hour = try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_MINIMUM_PRESENCE_SECONDS": "3600"]))
        #expect(hour.minimumPresence == 3_600)
        for bad in ["-1", "3601", "ten minutes"] {
            let error = try #require(throws: ConfigurationError.self) {
                try SessionMergerConfiguration.load(from: EnvironmentReader(["MERGER_MINIMUM_PRESENCE_SECONDS": bad]))
            }
            #expect(error.key == "MERGER_MINIMUM_PRESENCE_SECONDS", "\(error)")
        }
    }
}

@Suite("The merger's session thresholds")
struct SessionThresholdConfigurationTests {
    /// A threshold out of its range, or against another, names its variable and the rule in variables.
    @Test func aThresholdOutOfItsRangeNamesItsVariable() throws {
        let cases: [(env: [String: String], key: String, says: String)] = [
            (["MERGER_MERGE_WINDOW_SECONDS": "20"], "MERGER_MERGE_WINDOW_SECONDS", "between 30 s and 1 min"),
            (
                ["MERGER_SOFT_EXIT_GRACE_SECONDS": "3600", "MERGER_IDLE_CUTOFF_SECONDS": "3600"], "MERGER_IDLE_CUTOFF_SECONDS",
                "longer than MERGER_SOFT_EXIT_GRACE_SECONDS"
            ),
        ]
        for (env, key, says) in cases {
            let error = try #require(throws: ConfigurationError.self) { try SessionMergerConfiguration.load(from: EnvironmentReader(env)) }
            #expect(error.key == key, "\(error)")
            #expect(error.description.contains(says), "\(error)")
            #expect(!error.description.contains("idleCutoff") && !error.description.contains("mergeWindow"), "\(error)")
        }
    }
}
