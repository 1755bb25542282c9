import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Testing

/// When the registry refills its feed topic from the outbox (the end-to-end test restarts the
/// broker and checks the whole path).
@Suite("Registry feed repair")
struct RegistryFeedRepairTests {
    @Test func anEmptyFeedTopicIsLostOnlyWhenChangesWerePublished() {
        #expect(RegistryFeedRepair.isLost(highWatermark: 0, outboxHasPublishedRows: true))
        // A new deployment: nothing published yet, nothing to refill.
        #expect(!RegistryFeedRepair.isLost(highWatermark: 0, outboxHasPublishedRows: false))
        // A topic written once keeps a high watermark above 0, compacted or not.
        #expect(!RegistryFeedRepair.isLost(highWatermark: 1, outboxHasPublishedRows: true))
    }
}
