import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import PresenceKit
import RegistryTestFixtures
import Testing

extension RegistryServiceTests {
    @Suite("A site's detection settings and the device configuration", .serialized)
    struct DetectionConfigTests {
        /// An admin sets a site's document; a viewer reads it back; every change bumps the version; the
        /// device of a user of the site receives it, and what it receives decodes on the phone to the
        /// settings the admin meant.
        @Test func anAdminSetsASitesSettingsAndItsDevicesReceiveThem() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let path = "/v1/admin/sites/\(f.site.id)/detection-config"

                let unset = try await client.send(.get, path, key: h.viewer).decode(SiteDetectionConfig.self)
                #expect(unset == SiteDetectionConfig(siteId: f.site.id, version: 0, updatedAt: nil, document: .object([:])))

                let document = #"{"thresholds": {"enter_hold_ms": 3000, "enter_at_once_rssi": -64}, "checkout_trigger": "geofence_exit"}"#
                let first = try await client.send(.put, path, key: h.admin, json: document).decode(SiteDetectionConfig.self)
                #expect(first.version == 1 && first.updatedAt != nil)
                let adminKeyId = try #require(try await h.repository.verifyAPIKey(h.admin)).id
                #expect(first.updatedBy == adminKeyId)
                #expect(first.document["thresholds"]?["enter_hold_ms"] == .integer(3000))
                let read = try await client.send(.get, path, key: h.viewer).decode(SiteDetectionConfig.self)
                #expect(read == first)
                let second = try await client.send(.put, path, key: h.admin, json: #"{"thresholds": {"enter_hold_ms": 2000}}"#)
                    .decode(SiteDetectionConfig.self)
                #expect(second.version == 2 && second.document == ["thresholds": ["enter_hold_ms": 2000]])

                let (user, credentials) = try await h.repository.enrolledUser(name: "Phạm Minh Châu", siteIds: [f.site.id])
                let answer = try await client.send(
                    .get, "/v1/devices/config", key: credentials.token, headers: [.deviceId: credentials.device.id]
                )
                .decode(DeviceConfiguration.self)
                #expect(answer.deviceId == credentials.device.id && answer.userId == user.id)
                let site = try #require(answer.sites.first)
                // (Timestamps travel at millisecond precision, so the entities are compared by what identifies them.)
                #expect(answer.sites.count == 1 && site.site.id == f.site.id && site.site.geofence == f.site.geofence)
                #expect(site.namespace?.uuid == f.namespace.uuid && site.namespace?.major == f.namespace.major)
                #expect(
                    site.beacons == [DeviceBeacon(uuid: f.beacon.uuid, major: f.beacon.major, minor: f.beacon.minor, gateId: f.gate.id)])
                #expect(site.detectionConfig == second)

                // The phone applies what it received with its own reader.
                let onThePhone = try RemoteConfig.decode(
                    String(decoding: try AdminJSON.encoder().encode(site.detectionConfig.document), as: UTF8.self))
                #expect(onThePhone.presence.enterHoldMs == 2_000)
                #expect(onThePhone.presence.enterAtOnceRssi == PresenceConfig().enterAtOnceRssi)
            }
        }

        /// A user of two sites gets both, ordered by id; a site with no document comes with version 0.
        @Test func aUserOfTwoSitesGetsBothAndUnsetSitesCarryTheDefaults() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let other = try await h.repository.createSite(NewSite.dayShift(organizationId: f.organization.id, name: "Annex \(token())"))
                _ = try await client.send(
                    .put, "/v1/admin/sites/\(f.site.id)/detection-config", key: h.admin, json: #"{"geofence_radius": 250}"#
                )
                .decode(SiteDetectionConfig.self)
                let (_, credentials) = try await h.repository.enrolledUser(name: "Lê Văn Dũng", siteIds: [f.site.id, other.id])
                let answer = try await client.send(
                    .get, "/v1/devices/config", key: credentials.token, headers: [.deviceId: credentials.device.id]
                )
                .decode(DeviceConfiguration.self)
                #expect(answer.sites.map(\.site.id) == [f.site.id, other.id].sorted())
                let byId = Dictionary(uniqueKeysWithValues: answer.sites.map { ($0.site.id, $0) })
                #expect(byId[f.site.id]?.detectionConfig.version == 1)
                #expect(byId[other.id]?.detectionConfig == SiteDetectionConfig(siteId: other.id, version: 0, updatedAt: nil, document: [:]))
                #expect(byId[other.id]?.namespace?.uuid == f.namespace.uuid && byId[other.id]?.namespace?.major == f.namespace.major)
                // Only active beacons are check-in points: a retired one is left out.
                #expect(byId[f.site.id]?.beacons.map(\.minor) == [f.beacon.minor] && byId[other.id]?.beacons == [])
                _ = try await h.repository.updateBeaconStatus(beaconId: f.beacon.id, status: .retired)
                let after = try await client.send(
                    .get, "/v1/devices/config", key: credentials.token, headers: [.deviceId: credentials.device.id]
                )
                .decode(DeviceConfiguration.self)
                #expect(after.sites.first { $0.site.id == f.site.id }?.beacons == [])
            }
        }

        /// Every document the phone would refuse is a 400 naming each key, and nothing is stored.
        @Test(arguments: [
            (#"{"thresholds": {"max_stdev_db": 10}}"#, ["thresholds.max_stdev_db"]),
            (#"{"checkout_triger": "beacon_loss"}"#, ["checkout_triger"]),
            (#"{"thresholds": {"enter_rssi": "strong"}}"#, ["thresholds.enter_rssi"]),
            (#"{"thresholds": {"enter_at_once_rssi": -20}, "geofence_radius": 10}"#, ["geofence_radius", "thresholds.enter_at_once_rssi"]),
            // Key and type errors first; ranges and combinations once those pass.
            (#"{"checkout_triger": "x", "geofence_radius": 10}"#, ["checkout_triger"]),
            (#"[1, 2]"#, [""]),
            (#"{"thresholds": "#, [""]),
        ])
        func aDocumentThePhoneWouldRefuseIsA400NamingEachKey(body: String, fields: [String]) async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                let path = "/v1/admin/sites/\(f.site.id)/detection-config"
                let problem = try await client.send(.put, path, key: h.admin, json: body).problem(.badRequest)
                #expect(Set(problem.errors?.map(\.field) ?? []) == Set(fields), "\(problem)")
                #expect(try await client.send(.get, path, key: h.viewer).decode(SiteDetectionConfig.self).version == 0)
            }
        }

        @Test func unknownSitesAnEmptyBodyAndLowRolesAreRefused() async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                let path = "/v1/admin/sites/\(f.site.id)/detection-config"
                try await client.send(.put, "/v1/admin/sites/missing-\(token())/detection-config", key: h.admin, json: "{}").problem(
                    .notFound)
                try await client.send(.get, "/v1/admin/sites/missing-\(token())/detection-config", key: h.viewer).problem(.notFound)
                let malformed = try await client.send(.put, "/v1/admin/sites/-bad/detection-config", key: h.admin, json: "{}")
                    .problem(.badRequest)
                #expect(malformed.errors?.map(\.field) == ["id"], "\(malformed)")
                try await client.send(.get, "/v1/admin/sites/-bad/detection-config", key: h.viewer).problem(.badRequest)
                let empty = try await client.send(.put, path, key: h.admin).problem(.badRequest)
                #expect(empty.errors?.first?.field == "")
                try await client.send(.put, path, key: h.installer, json: "{}").problem(.forbidden)
                try await client.send(.put, path, key: nil, json: "{}").problem(.unauthorized)
                #expect(try await client.send(.get, path, key: h.viewer).decode(SiteDetectionConfig.self).version == 0)
            }
        }

        /// The device route checks the token and `X-Device-Id` as the gateway does, and the device's
        /// state in the registry's own tables: revoked is a 403.
        @Test func theDeviceRouteRefusesBadTokensOtherDevicesAndRevokedDevices() async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                let (_, phone) = try await h.repository.enrolledUser(name: "Võ Thị Hoa", siteIds: [f.site.id])
                let (_, otherPhone) = try await h.repository.enrolledUser(name: "Đỗ Văn Khoa", siteIds: [f.site.id])
                let route = "/v1/devices/config"

                let none = try await client.send(.get, route, key: nil, headers: [.deviceId: phone.device.id]).problem(.unauthorized)
                #expect(none.problemType == .unauthorized)
                try await client.send(.get, route, key: "not-a-token", headers: [.deviceId: phone.device.id]).problem(.unauthorized)
                try await client.send(.get, route, key: h.admin, headers: [.deviceId: phone.device.id]).problem(.unauthorized)
                let missing = try await client.send(.get, route, key: phone.token).problem(.badRequest)
                #expect(missing.errors?.first?.field == HTTPHeader.deviceId)
                try await client.send(.get, route, key: phone.token, headers: [.deviceId: otherPhone.device.id]).problem(.forbidden)
                try await client.send(.get, "\(route)?site=x", key: phone.token, headers: [.deviceId: phone.device.id]).problem(.badRequest)

                // A genuine token of a device this registry does not know (another registry's, or one deleted).
                let stranger = ServiceTestDatabase.signer.sign(
                    deviceId: "dev_unknown_\(token())", userId: phone.device.userId, issuedAt: Date(), lifetime: .seconds(600))
                let unknown = try await client.send(.get, route, key: stranger.token, headers: [.deviceId: stranger.claims.deviceId])
                    .problem(.forbidden)
                #expect(unknown.detail?.contains("not enrolled") == true, "\(unknown)")

                _ = try await h.repository.revokeDevice(id: phone.device.id)
                let revoked = try await client.send(.get, route, key: phone.token, headers: [.deviceId: phone.device.id]).problem(
                    .forbidden)
                #expect(revoked.detail?.contains("revoked") == true, "\(revoked)")
                #expect(revoked.action == .contactAdmin)
                #expect(try await client.send(.get, route, key: otherPhone.token, headers: [.deviceId: otherPhone.device.id]).status == .ok)
            }
        }

        /// The answer carries a strong `ETag`; a device that sends it back gets 304 with no body until
        /// something in its configuration changes; a revoked device is refused whatever tag it sends.
        @Test func aDeviceThatHoldsTheCurrentConfigurationGetsNotModified() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let (_, phone) = try await h.repository.enrolledUser(name: "Lê Thu Trang", siteIds: [f.site.id])
                let route = "/v1/devices/config"
                func fetch(ifNoneMatch: String?) async throws -> TestResponse {
                    var headers: HTTPFields = [.deviceId: phone.device.id]
                    if let ifNoneMatch { headers[.ifNoneMatch] = ifNoneMatch }
                    return try await client.send(.get, route, key: phone.token, headers: headers)
                }
                let first = try await fetch(ifNoneMatch: nil)
                #expect(first.status == .ok && first.headers[.cacheControl] == "no-cache")
                let tag = try #require(first.headers[.eTag])
                #expect(tag.count == 34 && tag.hasPrefix("\"") && tag.hasSuffix("\""), "\(tag)")
                #expect(try await fetch(ifNoneMatch: nil).headers[.eTag] == tag) // the same configuration, the same tag
                for condition in [tag, "W/\(tag)", "\"other\", \(tag)", " \(tag) ", "*"] {
                    let again = try await fetch(ifNoneMatch: condition)
                    #expect(again.status == .notModified, "\(condition)")
                    #expect(again.body.readableBytes == 0 && again.headers[.eTag] == tag, "\(condition)")
                }
                for condition in ["\"0123\"", "", ",", "W/", String(tag.dropFirst())] {
                    #expect(try await fetch(ifNoneMatch: condition).status == .ok, "\(condition)")
                }

                // A new document for the site changes the configuration, and so its tag.
                _ = try await client.send(
                    .put, "/v1/admin/sites/\(f.site.id)/detection-config", key: h.admin, json: #"{"thresholds": {"enter_hold_ms": 2000}}"#)
                let changed = try await fetch(ifNoneMatch: tag)
                #expect(changed.status == .ok && changed.headers[.eTag] != nil && changed.headers[.eTag] != tag)
                #expect(try changed.decode(DeviceConfiguration.self).sites.first?.detectionConfig.version == 1)

                _ = try await h.repository.revokeDevice(id: phone.device.id)
                try await fetch(ifNoneMatch: "*").problem(.forbidden)
            }
        }
    }
}
