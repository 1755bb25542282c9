import AttendanceProtocol
import Foundation

/// `site_assignment`: tenancy. A user's attendance counts only at the sites the registry assigns the
/// user to (which are sites of the user's organization): every site the event names, or the site of
/// the beacon it names, must be one of them.
///
/// Applies to every payload kind that names a site or a beacon; a check-out or heartbeat that names
/// neither passes (its session was opened by a check-in this rule passed), and so does a check-out that
/// names one (it ends a session; a user moved away since must not leave it open). Assignment changes
/// arrive through `registry.changes` like every other registry fact; an event made before the user's
/// sites last changed is judged against sites the registry no longer says, so an unassigned site there
/// is a note, not a refusal (a phone offline through the move, or a check-in moments before it).
///
/// | finding | action | risk |
/// |---|---|---|
/// | the user is not one the registry has published | contact_admin | 0.7 |
/// | a named site (or the beacon's site) is not one of the user's | contact_admin | 0.9 |
/// | the same, for an event made before the user's sites last changed | note | - |
package struct SiteAssignmentRule: PolicyRule {
    package init() {}

    package var id: PolicyRuleID { .siteAssignment }

    package func evaluate(_ event: RawEventEnvelope, context: PolicyContext) -> RuleOutcome {
        var sites = event.claimedSiteIds
        if let beacon = event.attendanceEvent?.beacon,
            let beaconSite = context.registry.beacon(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor)?.siteId,
            !sites.contains(beaconSite)
        {
            sites.append(beaconSite)
        }
        guard !sites.isEmpty else { return .passed }
        guard let assigned = context.registry.assignedSiteIds(userId: event.userId) else {
            return .fire("user \(event.userId) is not known to the registry", action: .contactAdmin, risk: 0.7)
        }
        if event.attendanceEvent?.type == .checkout { return .passed }
        let changedSince = context.registry.userSitesChangedAt(userId: event.userId).map { event.payload.eventTime < $0 } ?? false
        for site in sites where !assigned.contains(site) {
            if changedSince {
                return .note("user \(event.userId)'s sites changed after this event was made; \(site) is not one of them now")
            }
            return .fire("user \(event.userId) is not assigned to site \(site)", action: .contactAdmin, risk: 0.9)
        }
        return .passed
    }
}
