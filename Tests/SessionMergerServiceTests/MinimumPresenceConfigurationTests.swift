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
