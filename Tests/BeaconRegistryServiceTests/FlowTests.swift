import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryServiceTests {
    @Suite("Endpoints", .serialized)
    struct FlowTests {
        /// Organization → namespace → site → gate → minor → beacon → status → plan → sighting → verification.
        @Test func installingABeaconEndToEnd() async throws {
            try await Harness.run { h, client in
                let t = token()
                let organization = try await client.send(
                    .post, "/v1/admin/organizations", key: h.admin, json: #"{"id":"org-\#(t)","name":"Org \#(t)"}"#
                )
                .decode(Organization.self, status: .created)
                #expect(organization.id == "org-\(t)")
                #expect(
                    try await client.send(.get, "/v1/admin/organizations/\(organization.id)", key: h.viewer).decode(Organization.self)
                        == organization)

                let namespace = try await client.send(.post, "/v1/admin/organizations/\(organization.id)/namespace", key: h.admin)
                    .decode(BusinessNamespace.self)
                // Idempotent.
                let again = try await client.send(.post, "/v1/admin/organizations/\(organization.id)/namespace", key: h.admin, json: "{}")
                    .decode(BusinessNamespace.self)
                #expect(again.uuid == namespace.uuid && again.major == namespace.major)

                let site = try await client.send(
                    .post, "/v1/admin/sites", key: h.admin, json: Sample.site(organizationId: organization.id, name: "HQ")
                )
                .decode(Site.self, status: .created)
                #expect(site.shift.start == TimeOfDay(hour: 8, minute: 30))
                #expect(try await client.send(.get, "/v1/admin/sites/\(site.id)", key: h.viewer).decode(Site.self) == site)
                // A shift ending when it starts runs round the clock (24 hours); it is not refused.
                let roundTheClock = Sample.site(organizationId: organization.id, name: "Plant")
                    .replacingOccurrences(of: #""end":"17:30""#, with: #""end":"08:30""#)
                let plant = try await client.send(.post, "/v1/admin/sites", key: h.admin, json: roundTheClock).decode(
                    Site.self, status: .created)
                #expect(plant.shift.start == plant.shift.end)

                let gate = try await client.send(
                    .post, "/v1/admin/gates", key: h.installer, json: #"{"siteId":"\#(site.id)","name":"Lobby"}"#
                )
                .decode(Gate.self, status: .created)
                #expect(try await client.send(.get, "/v1/admin/gates/\(gate.id)", key: h.viewer).decode(Gate.self) == gate)
                let minor = try await client.send(.post, "/v1/admin/gates/\(gate.id)/minor", key: h.installer)
                    .decode(MinorAllocation.self, status: .created)
                #expect(minor.uuid == namespace.uuid && minor.major == namespace.major && minor.gateId == gate.id)

                let beacon = try await client.send(
                    .post, "/v1/admin/beacons", key: h.installer,
                    json: """
                        {"uuid":"\(minor.uuid.uuidString.lowercased())","major":\(minor.major),"minor":\(minor.minor),"gateId":"\(gate.id)",
                         "mac":"aa-bb-cc-\(t.prefix(2))-ee-ff","txPower":-59,"advIntervalMs":300,"serial":"SN-\(t)","batteryReplacedOn":"2025-09-18"}
                        """
                ).decode(Beacon.self, status: .created)
                #expect(beacon.status == .active && beacon.batteryReplacedOn == CalendarDate("2025-09-18"))
                #expect(try await client.send(.get, "/v1/admin/beacons/\(beacon.id)", key: h.viewer).decode(Beacon.self) == beacon)
                // The same identity again: 409.
                try await client.send(
                    .post, "/v1/admin/beacons", key: h.installer,
                    json: #"{"uuid":"\#(minor.uuid.uuidString)","major":\#(minor.major),"minor":\#(minor.minor),"gateId":"\#(gate.id)"}"#
                ).problem(.conflict)

                let lost = try await client.send(.patch, "/v1/admin/beacons/\(beacon.id)", key: h.installer, json: #"{"status":"lost"}"#)
                    .decode(Beacon.self)
                #expect(lost.status == .lost)

                struct Plan: Decodable {
                    struct Settings: Decodable {
                        var deviceName: String; var measuredPower: Int; var advertisingIntervalUnits: Int; var txPowerIndex: Int
                    }
                    var beaconId: String
                    var settings: Settings
                    var frames: [String]
                    var steps: [CP28Step]
                }
                let plan = try await client.send(
                    .get, "/v1/admin/beacons/\(beacon.id)/provisioning-plan?txPowerIndex=2&deviceName=Lobby1", key: h.viewer
                )
                .decode(Plan.self)
                #expect(plan.frames.count == 24)
                #expect(plan.frames.allSatisfy { $0.hasPrefix("4E 4F ") })
                #expect(plan.settings.deviceName == "Lobby1" && plan.settings.txPowerIndex == 2)
                #expect(plan.settings.measuredPower == -59 && plan.settings.advertisingIntervalUnits == 3)
                // The same frames as the core builds for these settings.
                let expected = try CP28ProvisioningPlan(
                    CP28BeaconSettings(
                        deviceName: "Lobby1", uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor, measuredPower: -59,
                        advertisingIntervalUnits: 3, txPowerIndex: 2
                    ))
                #expect(plan.frames == expected.steps.map(\.hex))

                struct Verification: Decodable { var verified: Bool; var deviceCount: Int; var windowMinutes: Int; var lastSeen: Date? }
                let before = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/verification?withinMinutes=5", key: h.viewer)
                    .decode(Verification.self)
                #expect(!before.verified && before.deviceCount == 0 && before.windowMinutes == 5)
                for device in ["dev-a-\(t)", "dev-b-\(t)"] {
                    let response = try await client.send(
                        .post, "/v1/admin/sightings", key: h.installer,
                        json:
                            #"{"beacon":{"uuid":"\#(minor.uuid.uuidString)","major":\#(minor.major),"minor":\#(minor.minor)},"deviceId":"\#(device)"}"#
                    )
                    #expect(response.status == .accepted, "\(response.text)")
                }
                let after = try await client.send(.get, "/v1/admin/beacons/\(beacon.id)/verification", key: h.viewer).decode(
                    Verification.self)
                #expect(after.verified && after.deviceCount == 2 && after.windowMinutes == 15 && after.lastSeen != nil)

                let page = try await client.send(.get, "/v1/admin/sites/\(site.id)/beacons", key: h.viewer).decode(PageBody<Beacon>.self)
                #expect(page.items.map(\.id) == [beacon.id] && page.nextCursor == nil)
            }
        }

        @Test func enrollmentCodeIsExchangedOnceThenRevoked() async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                let user = try await client.send(
                    .post, "/v1/admin/users", key: h.admin, json: #"{"name":"Trần Thị Bình","siteIds":["\#(f.site.id)"]}"#
                )
                .decode(User.self, status: .created)
                #expect(user.siteIds == [f.site.id])

                struct Issued: Decodable { var code: String; var enrollment: EnrollmentCode }
                let issued = try await client.send(
                    .post, "/v1/admin/users/\(user.id)/enrollment-codes", key: h.admin, json: #"{"validityMinutes":30}"#
                )
                .decode(Issued.self, status: .created)
                #expect(issued.enrollment.userId == user.id)
                #expect(abs(issued.enrollment.expiresAt.timeIntervalSince(issued.enrollment.createdAt) - 1_800) < 1)

                struct Credentials: Decodable { var deviceId: String; var userId: String; var token: String; var device: Device }
                // With a member a newer app sends (`pushToken`): ignored, as everywhere in the device API.
                let enroll = #"{"code":"\#(issued.code)","appVersion":"1.4.0","model":"Pixel 8","pushToken":"t-1"}"#
                // No API key needed (the code is the credential).
                let credentials = try await client.send(.post, "/v1/devices/enroll", key: nil, json: enroll).decode(
                    Credentials.self, status: .created)
                #expect(credentials.userId == user.id && credentials.device.model == "Pixel 8" && credentials.device.status == .enrolled)
                let claims = try ServiceTestDatabase.signer.verify(credentials.token, now: Date())
                #expect(claims.deviceId == credentials.deviceId && claims.userId == user.id)

                // Reuse: 409, and no second device.
                let reuse = try await client.send(.post, "/v1/devices/enroll", key: nil, json: enroll)
                #expect(reuse.status == .conflict || reuse.status == .unauthorized)
                try reuse.problem(reuse.status)
                #expect(try await h.count("SELECT count(*)::int FROM devices WHERE user_id = \(user.id)") == 1)

                #expect(
                    try await client.send(.get, "/v1/admin/devices/\(credentials.deviceId)", key: h.viewer).decode(Device.self).status
                        == .enrolled)
                try await client.send(.post, "/v1/admin/devices/\(credentials.deviceId)/revoke", key: h.installer).problem(.forbidden)
                let revoked = try await client.send(.post, "/v1/admin/devices/\(credentials.deviceId)/revoke", key: h.admin).decode(
                    Device.self)
                #expect(revoked.status == .revoked && revoked.revokedAt != nil)
            }
        }

        @Test func listsPageWithOpaqueCursors() async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                for i in 1...4 { _ = try await h.repository.createGate(NewGate(siteId: f.site.id, name: "Gate \(i)")) }
                var all = Set<String>()
                var cursor: String?
                var pages = 0
                repeat {
                    let uri = "/v1/admin/sites/\(f.site.id)/gates?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let page = try await client.send(.get, uri, key: h.viewer).decode(PageBody<Gate>.self)
                    pages += 1
                    #expect(page.items.count == (pages < 3 ? 2 : 1))
                    for gate in page.items { #expect(all.insert(gate.id).inserted, "\(gate.id) on two pages") }
                    cursor = page.nextCursor
                } while cursor != nil && pages < 5
                #expect(pages == 3)
                #expect(all.count == 5 && all.contains(f.gate.id))
                // The default page holds all five; ids ascend.
                let whole = try await client.send(.get, "/v1/admin/sites/\(f.site.id)/gates", key: h.viewer).decode(PageBody<Gate>.self)
                #expect(whole.items.map(\.id) == whole.items.map(\.id).sorted() && whole.items.count == 5 && whole.nextCursor == nil)

                // Organizations: three pages of one, each after the previous (four in all).
                for i in 1...3 { _ = try await h.repository.createOrganization(NewOrganization(name: "Paged \(i)")) }
                var previous: String?
                var orgCursor: String?
                for _ in 1...3 {
                    let page = try await client.send(
                        .get, "/v1/admin/organizations?limit=1" + (orgCursor.map { "&cursor=\($0)" } ?? ""), key: h.viewer
                    )
                    .decode(PageBody<Organization>.self)
                    #expect(page.items.count == 1)
                    if let previous, let id = page.items.first?.id { #expect(id != previous) }
                    previous = page.items.first?.id
                    orgCursor = page.nextCursor
                    #expect(orgCursor != nil)
                }
                // Sites of the organization and a bad limit.
                let sites = try await client.send(.get, "/v1/admin/organizations/\(f.organization.id)/sites?limit=200", key: h.viewer)
                    .decode(PageBody<Site>.self)
                #expect(sites.items.map(\.id) == [f.site.id])
                for bad in ["0", "201", "-1", "ten", ""] {
                    try await client.send(.get, "/v1/admin/sites/\(f.site.id)/gates?limit=\(bad)", key: h.viewer).problem(.badRequest)
                }
            }
        }
    }
}
