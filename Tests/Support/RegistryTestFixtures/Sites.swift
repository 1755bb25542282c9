import AttendanceProtocol
import BeaconRegistryCore

extension NewSite {
    /// A site in Ho Chi Minh City with a 200 m geofence and a day shift (08:30-17:30, check-in from an
    /// hour before, check-out until two hours after): what a registry test needs when the site's own
    /// settings are not what it is about.
    package static func dayShift(organizationId: String, name: String = "Head office") -> NewSite {
        NewSite(
            organizationId: organizationId, name: name, timezone: "Asia/Ho_Chi_Minh",
            geofence: Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200),
            shift: ShiftSettings(
                start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!,
                checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5
            )
        )
    }
}
