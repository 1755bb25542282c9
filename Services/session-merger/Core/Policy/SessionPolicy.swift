import AttendanceProtocol
import Foundation

/// Every threshold of the session model, in seconds.
///
/// The contract (docs/SPECIFICATION.md, "5. Sessions and daily attendance"): merge check-in candidates
/// within 30-60 s; a gap shorter than 10 s never produces a check-out; a soft-exit grace, an automatic
/// close past a cutoff, events up to 72 h late.
///
/// A policy is plain configuration: it is not part of a timeline's persisted state. A timeline
/// restored under a different policy re-derives its sessions with the new thresholds and reports the
/// differences as ordinary changes on its next operation.
package struct SessionPolicy: Codable, Hashable, Sendable {
    /// A check-in this close to the last event of the current session (even one that has checked out)
    /// joins it. Allowed: 30-60 s.
    package var mergeWindow: TimeInterval
    /// A check-out followed by presence (check-in or heartbeat) within this time reopens the session
    /// (`reopened`); after it the check-out stands and the session closes (`check_out`).
    package var softExitGrace: TimeInterval
    /// A check-out followed by presence after less than this is noise: it never becomes a soft exit
    /// nor a close ("soft exit never creates a false checkout for noise < 10 s").
    package var noiseThreshold: TimeInterval
    /// An open session without presence for longer than this closes (`presence_timeout`); presence after
    /// a longer gap starts a new session.
    package var idleCutoff: TimeInterval
    /// How far back (from the merger's clock) events may still change sessions. Older history is final.
    package var horizon: TimeInterval

    package static let minute: TimeInterval = 60
    package static let hour: TimeInterval = 3_600
    package static let day: TimeInterval = 86_400

    /// The longest offline period devices retry over (no loss after 72 h offline).
    package static let maximumOfflinePeriod: TimeInterval = 72 * hour

    package static let mergeWindowRange: ClosedRange<TimeInterval> = 30...60
    package static let noiseThresholdRange: ClosedRange<TimeInterval> = 10...60
    package static let softExitGraceMaximum: TimeInterval = hour
    package static let idleCutoffRange: ClosedRange<TimeInterval> = hour...(24 * hour)
    package static let horizonMaximum: TimeInterval = 31 * day
    /// The longest outage the merger catches up on with every event still placed in its session: how
    /// far back from `now` a timeline's horizon may be measured (`SessionTimeline.compactionReference`).
    /// Above the raw and vetted topics' shipped retention together (14 days), with room for an operator
    /// who raises it before a planned outage; it bounds how long a timeline no longer written keeps
    /// its last events (the event retention is at least 30 days).
    package static let longestPipelineWait: TimeInterval = 31 * day

    /// 45 s merge window, 5 min soft-exit grace, 10 s noise, 12 h idle cutoff, 8 days horizon.
    ///
    /// The horizon covers the gateway's default event-age limit (7 days) plus the idle cutoff, so every
    /// event the gateway accepts still lands in its session; the 72 h offline case has days of margin.
    package static let `default` = SessionPolicy()

    package init(
        mergeWindow: TimeInterval = 45,
        softExitGrace: TimeInterval = AttendancePresence.defaultSoftExitGraceSeconds,
        noiseThreshold: TimeInterval = 10,
        idleCutoff: TimeInterval = 12 * hour,
        horizon: TimeInterval = 8 * day
    ) {
        self.mergeWindow = mergeWindow
        self.softExitGrace = softExitGrace
        self.noiseThreshold = noiseThreshold
        self.idleCutoff = idleCutoff
        self.horizon = horizon
    }

    /// Every problem of this policy, empty when it is usable.
    package func validationIssues() -> [SessionPolicyError.Issue] {
        var issues: [SessionPolicyError.Issue] = []
        func check(_ field: String, _ value: TimeInterval, _ range: ClosedRange<TimeInterval>, _ why: String) {
            guard value.isFinite else {
                issues.append(.init(field: field, reason: "must be a finite number of seconds, got \(value)"))
                return
            }
            if !range.contains(value) {
                issues.append(
                    .init(
                        field: field,
                        reason:
                            "must be between \(Self.format(range.lowerBound)) and \(Self.format(range.upperBound)) (\(why)), got \(Self.format(value))"
                    ))
            }
        }
        check("mergeWindow", mergeWindow, Self.mergeWindowRange, "check-in candidates merge within 30-60 s")
        check("noiseThreshold", noiseThreshold, Self.noiseThresholdRange, "noise shorter than 10 s never checks out")
        let graceFloor = noiseThreshold.isFinite ? max(noiseThreshold, Self.noiseThresholdRange.lowerBound) : 10
        check("softExitGrace", softExitGrace, graceFloor...Self.softExitGraceMaximum, "at least the noise threshold, at most 1 h")
        check("idleCutoff", idleCutoff, Self.idleCutoffRange, "an idle session closes after 1-24 h without presence")
        if idleCutoff.isFinite && softExitGrace.isFinite && idleCutoff <= softExitGrace {
            issues.append(
                .init(
                    field: "idleCutoff",
                    reason: "must be longer than softExitGrace (\(Self.format(softExitGrace))), got \(Self.format(idleCutoff))"))
        }
        let horizonFloor = Self.maximumOfflinePeriod + (idleCutoff.isFinite ? idleCutoff : 0)
        check(
            "horizon", horizon, horizonFloor...max(horizonFloor, Self.horizonMaximum),
            "72 h offline plus the idle cutoff must still land in its session; state is bounded by 31 days")
        return issues
    }

    /// This policy, or every problem it has.
    package func validated() throws(SessionPolicyError) -> SessionPolicy {
        let issues = validationIssues()
        guard issues.isEmpty else { throw SessionPolicyError(issues: issues) }
        return self
    }

    static func format(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite else { return "\(seconds)" }
        if seconds >= Self.day, seconds.truncatingRemainder(dividingBy: Self.day) == 0 { return "\(Int(seconds / Self.day)) d" }
        if seconds >= Self.hour, seconds.truncatingRemainder(dividingBy: Self.hour) == 0 { return "\(Int(seconds / Self.hour)) h" }
        if seconds >= Self.minute, seconds.truncatingRemainder(dividingBy: Self.minute) == 0 { return "\(Int(seconds / Self.minute)) min" }
        if seconds == seconds.rounded() { return "\(Int(seconds)) s" }
        return "\(seconds) s"
    }
}

/// One problem of a configuration value, naming its field.
package typealias ConfigurationIssue = FieldError

/// A session policy with unusable thresholds: every problem, each naming its field.
package struct SessionPolicyError: Error, Hashable, Sendable, CustomStringConvertible {
    package typealias Issue = ConfigurationIssue

    package var issues: [ConfigurationIssue]

    package init(issues: [ConfigurationIssue]) { self.issues = issues }

    /// The fields with problems, in check order.
    package var fields: [String] { issues.map(\.field) }

    package var description: String { issues.map(\.description).joined(separator: "; ") }
}
