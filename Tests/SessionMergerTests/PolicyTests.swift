import AttendanceProtocol
import Foundation
import SessionMergerCore
import Testing

@Suite("Session policy validation")
struct PolicyTests {
    @Test("the defaults are valid and are the documented values")
    func defaults() throws {
        let policy = try SessionPolicy.default.validated()
        #expect(policy.mergeWindow == 45)
        #expect(policy.softExitGrace == 300)
        #expect(policy.noiseThreshold == 10)
        #expect(policy.idleCutoff == 12 * 3_600)
        #expect(policy.horizon == 8 * 86_400)
    }

    @Test("merge window bounds are 30-60 s", arguments: [(29.0, false), (30.0, true), (45.0, true), (60.0, true), (61.0, false)])
    func mergeWindowBounds(value: Double, valid: Bool) {
        let issues = SessionPolicy(mergeWindow: value).validationIssues()
        #expect(issues.isEmpty == valid)
        if !valid { #expect(issues.map(\.field) == ["mergeWindow"]) }
    }

    @Test("each bad threshold is named")
    func eachField() {
        #expect(SessionPolicy(noiseThreshold: 5).validationIssues().map(\.field) == ["noiseThreshold"])
        #expect(SessionPolicy(softExitGrace: 5).validationIssues().map(\.field) == ["softExitGrace"])
        #expect(SessionPolicy(softExitGrace: 20, noiseThreshold: 30).validationIssues().map(\.field) == ["softExitGrace"])
        #expect(SessionPolicy(softExitGrace: 7_200).validationIssues().map(\.field) == ["softExitGrace"])
        #expect(SessionPolicy(idleCutoff: 1_800).validationIssues().map(\.field) == ["idleCutoff"])
        #expect(SessionPolicy(horizon: 48 * 3_600).validationIssues().map(\.field) == ["horizon"])
        #expect(SessionPolicy(horizon: 60 * 86_400).validationIssues().map(\.field) == ["horizon"])
        #expect(SessionPolicy(mergeWindow: .nan).validationIssues().map(\.field) == ["mergeWindow"])
        #expect(SessionPolicy(idleCutoff: .infinity).validationIssues().map(\.field).contains("idleCutoff"))
    }

    @Test("the horizon must cover 72 h offline plus the idle cutoff")
    func horizonFloor() throws {
        #expect(SessionPolicy(idleCutoff: 12 * 3_600, horizon: 84 * 3_600).validationIssues().isEmpty)
        let issues = SessionPolicy(idleCutoff: 12 * 3_600, horizon: 83 * 3_600).validationIssues()
        #expect(issues.map(\.field) == ["horizon"])
        let issue = try #require(issues.first)
        #expect(issue.reason.contains("72 h offline"))
    }

    @Test("every problem is reported at once, with readable messages")
    func allProblems() throws {
        let policy = SessionPolicy(mergeWindow: 10, softExitGrace: 1, noiseThreshold: 2, idleCutoff: 60, horizon: 3_600)
        #expect(throws: SessionPolicyError.self) { try policy.validated() }
        do {
            _ = try policy.validated()
            Issue.record("expected the invalid policy to throw")
        } catch {
            #expect(error.fields == ["mergeWindow", "noiseThreshold", "softExitGrace", "idleCutoff", "horizon"])
            let firstIssue = try #require(error.issues.first)
            #expect(
                firstIssue.description
                    == "mergeWindow: must be between 30 s and 1 min (check-in candidates merge within 30-60 s), got 10 s")
            #expect(error.description.contains("noiseThreshold: must be between 10 s and 1 min"))
        }
    }

    @Test("a timeline refuses an invalid policy")
    func timelineRefuses() {
        #expect(throws: SessionPolicyError.self) {
            _ = try SessionTimeline(userId: "u", siteId: "s", policy: SessionPolicy(mergeWindow: 90))
        }
    }
}
