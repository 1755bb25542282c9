import AttendanceProtocol
import Foundation

/// `rate_limit`: minimum time between punches of a user at a gate, and hysteresis between gates.
///
/// - A check-in less than `minSecondsBetweenPunches` from the user's latest accepted check-in at the
///   same punch point fires: a repeated check-in. A repeated check-out is accepted with a note: a
///   check-out only ends presence, and a user's second phone may check out seconds after the first. The punch
///   point is the beacon's gate; a punch without a known gate (the check-in contract) counts at
///   `site:<siteId>`, and one without a site either (a check-out contract) is compared with the
///   user's latest punch anywhere.
/// - A punch of the other type within the interval is a change of state, not a repeat: a person
///   coming back through the door, leaving right after arriving, or a geofence flapping at its edge
///   (out, in, out). It is accepted with a note; the merger folds the flap (a check-out followed
///   within seconds by a check-in is noise, a check-in soon after a check-out reopens the session).
///   The phone does not send a refused punch again, so refusing one would leave the person checked
///   out while inside, or the session open until the idle cutoff.
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
        // Measured from what the event itself names: a check-out contract (no site, no gate) against the
        // latest punch anywhere. (It is recorded at the site it ends: `PolicyHistory.record`.)
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
            if let previous, previous.idempotencyKey != punch.idempotencyKey {
                let gap = abs(punch.time.timeIntervalSince(previous.time))
                if gap < minimum, previous.type != punch.type {
                    let change = punch.type == .checkin ? "re-entry" : "short stay"
                    return .note("\(change): \(Wording.punched(previous.type)) \(Wording.seconds(gap)) ago \(place)")
                }
                if gap < minimum, punch.type == .checkout {
                    // A check-out only ends presence, so a repeated one gains nobody anything, and refusing it
                    // can leave a session open: a user's second phone checking out seconds after the first,
                    // whose heartbeat in between the merger took for presence.
                    return .note("repeated check-out: \(Wording.punched(previous.type)) \(Wording.seconds(gap)) ago \(place)")
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

    static func secondsLeft(_ minimum: TimeInterval, _ gap: TimeInterval) -> Int {
        max(1, Int((minimum - gap).rounded(.up)))
    }
}
