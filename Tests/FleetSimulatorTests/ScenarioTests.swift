import FleetSimulatorCore
import Foundation
import PresenceKit
import Testing

/// Every row of the QA matrix (`Scenario.all`) on virtual time, PresenceKit inside each phone with
/// its outbox on disk, against the in-process server; each scenario states its expected outcome.
@Suite("QA matrix scenarios", .serialized)
struct ScenarioTests {
    static let outboxes = ScratchDirectory.fast("fleet-scenario-tests")

    @Test(arguments: Scenario.all.map(\.name))
    func scenarioMeetsItsExpectedOutcome(name: String) async throws {
        let scenario = try #require(Scenario.named(name))
        let outcome = try await scenario.run(outboxDirectory: Self.outboxes)
        #expect(outcome.failures.isEmpty, "\(name): \(outcome.failures)\n\(outcome.report.headline)")
        #expect(outcome.report.delivery.eventsPosted > 0 || name == "walk-past" || name == "visitors-without-devices")
    }

    @Test("a row's own detection settings sit in its config edit, so that `scenario --config` cannot undo them")
    func rowsKeepTheirSettingsInTheirConfigEdit() {
        for scenario in Scenario.all {
            #expect(scenario.options.detection == PresenceConfig(), "\(scenario.name) edits options.detection")
        }
        let resting = Scenario.named("resting-in-a-shadow")
        #expect(resting?.config(PresenceConfig()).checkOutTrigger == .beaconLoss)
    }

    @Test func aRunIsRepeatableForItsSeed() async throws {
        var options = FleetOptions()
        options.devices = 20
        let plan = FleetPlan(options: options)
        func once() async throws -> [String] {
            let results = try await DetectionRun(plan: plan, outboxDirectory: Self.outboxes + "/repeat").run(server: InProcessServer())
            return results.flatMap { $0.posted.map { "\($0.kind)@\($0.decidedAt)" } }
        }
        let a = try await once(), b = try await once()
        #expect(a == b && !a.isEmpty)
    }
}
