import AttendanceProtocol
import FleetSimulatorService
import Foundation
import PresenceKit
import Testing

/// A site as the registry serves it to a device (`GET /v1/devices/config`) becomes the site PresenceKit
/// matches beacons to: its geofence, and exactly its active beacons (not the rest of the namespace).
@Suite("A served site as the phone knows it")
struct ServedSiteTests {
    @Test func theServedGeofenceAndBeaconsAreWhatThePhoneMatches() throws {
        let uuid = UUID(uuidString: "3AA28898-81F4-4FED-9D7A-C0ED710805F8")!
        let now = Date(timeIntervalSince1970: 1_764_000_000)
        let served = DeviceSite(
            site: AttendanceProtocol.Site(
                id: "site_hq", organizationId: "org_1", name: "HQ", timezone: "Asia/Ho_Chi_Minh",
                geofence: AttendanceProtocol.Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 220),
                shift: ShiftSettings(
                    start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!, checkInBeforeStartMinutes: 60,
                    checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5),
                createdAt: now),
            namespace: BusinessNamespace(organizationId: "org_1", uuid: uuid, major: 7, allocatedAt: now),
            beacons: [
                DeviceBeacon(uuid: uuid, major: 7, minor: 1, gateId: "gate_lobby"),
                DeviceBeacon(uuid: uuid, major: 7, minor: 3, gateId: "gate_back"),
            ],
            detectionConfig: SiteDetectionConfig(siteId: "site_hq", version: 0, updatedAt: nil, document: [:]))

        let site = EnrolledFleet.presenceSite(served)
        #expect(site.id == "site_hq" && site.radiusMeters == 220)
        #expect(site.center == GeoPoint(latitude: 10.7769, longitude: 106.7009))
        let directory = SiteDirectory(sites: [site])
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 1)) == 0)
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 3)) == 0)
        // Another site's beacon in the same namespace is not this site's check-in point.
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 2)) == nil)
    }
}
