import AttendanceProtocol
import Foundation

/// `rate_limit`: minimum time between punches of a user at a gate, and hysteresis between gates.
///
/// - A punch (check-in or check-out) less than `minSecondsBetweenPunches` from the user's latest
///   accepted punch at the same punch point fires, whatever the two punches' types: a check-out
///   right after a check-in is refused too. The punch point is the beacon's gate; a punch without a
///   known gate (the check-in contract) counts at `site:<siteId>`, and one without a site either
///   (a check-out contract) is compared with the user's latest punch anywhere.
/// - Re-entry: a check-in within the interval after a check-out is a person coming back through
///   the door (or a geofence flapping at its edge), not a repeated punch. It is accepted with a note
///   (the merger reopens the session it closed), because the phone does not send a refused check-in
///   again and the person would stay checked out while inside.
/// - Soft exit: a check-out contract with reason `soft_exit_expired` has already waited the
///   device's soft-exit grace without presence, so it is a real exit; with
///   `exemptSoftExitCheckouts` (default on) it is exempt when the earlier punch is a check-in.
/// - Hysteresis (`minSecondsBetweenGates`, default 45 s, 0 off): a punch of the same type at
///   another gate of the same site within that time of the user's latest punch is ping-pong
///   between two doors: one presence, not a new punch. It is accepted, not refused (the merger
///   folds it into the open session), and the rule fires as a note (`RuleOutcome.note`: no
///   refusal, risk 0, action none) so the verdict says why. This is checked before the per-gate
///   interval, so A → B → A inside the window folds too; a repeat at the same door with no other
///   door in between is not ping-pong and stays refused by the interval.
/// - Replays never fire: an idempotency key the history has accepted is not a new punch, and a
///   history record with the event's own key is never compared with it.
/// - Times are event times, compared as absolute differences, so late (offline) events are judged
///   against the neighbour recorded so far, not against the receipt time.
///
/// The interval fires with `retry_after` (the seconds until the interval ends), risk 0.1.
/// Heartbeats pass.
package struct RateLimitRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .rateLimit }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        guard event.isPunch else { return .passed }
        let history = context.history
        guard !history.hasAccepted(idempotencyKey: event.idempotencyKey, userId: event.userId) else { return .passed }
        let settings = context.settings
        let punch = PunchRecord(event: event, registry: context.registry)

        let gateWindow = TimeInterval(settings.minSecondsBetweenGates)
        if gateWindow > 0, let siteId = punch.siteId, let gateId = punch.gateId,
            let previous = history.lastPunch(userId: event.userId),
            previous.idempotencyKey != punch.idempotencyKey, previous.siteId == siteId,
            let previousGate = previous.gateId, previousGate != gateId, previous.type == punch.type
        {
            let gap = abs(punch.time.timeIntervalSince(previous.time))
            if gap < gateWindow {
                return .note(
                    "hysteresis: \(Wording.punched(previous.type)) \(Wording.seconds(gap)) ago at gate \(previousGate) of this site; "
                        + "folded into the same presence"
                )
            }
        }

        let minimum = TimeInterval(settings.minSecondsBetweenPunches)
        if minimum > 0 {
            let previous: PunchRecord?
            let place: String
            if let point = punch.punchPoint {
                previous = history.lastPunch(userId: event.userId, punchPoint: point)
                place = punch.gateId != nil ? "at this gate" : "at this site"
            } else {
                previous = history.lastPunch(userId: event.userId)
                place = previous?.siteId.map { "at site \($0)" } ?? "at the last gate"
            }
            if let previous, previous.idempotencyKey != punch.idempotencyKey, !isSoftExit(event, after: previous, settings) {
                let gap = abs(punch.time.timeIntervalSince(previous.time))
                if gap < minimum, previous.type == .checkout, punch.type == .checkin {
                    return .note("re-entry: \(Wording.punched(previous.type)) \(Wording.seconds(gap)) ago \(place); the session reopens")
                }
                if gap < minimum {
                    return .fire(
                        "\(Wording.punched(previous.type)) \(Wording.seconds(gap)) ago \(place)",
                        action: .retryAfter, risk: 0.1, retryAfterSeconds: Self.secondsLeft(minimum, gap)
                    )
                }
            }
        }

        return .passed
    }

    private func isSoftExit(_ event: RawEventEnvelope, after previous: PunchRecord, _ settings: PolicySettings) -> Bool {
        guard settings.exemptSoftExitCheckouts, previous.type == .checkin,
            case .checkOut(let request) = event.payload
        else { return false }
        return request.reason == .softExitExpired
    }

    static func secondsLeft(_ minimum: TimeInterval, _ gap: TimeInterval) -> Int {
        max(1, Int((minimum - gap).rounded(.up)))
    }
}
