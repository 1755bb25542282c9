import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import RegistryTestFixtures
import Testing

extension RegistryServiceTests {
    /// A device token lasts 90 days. Before, nothing renewed it: every phone stopped on day 90 until an
    /// admin issued it a new enrollment code, and what it recorded meanwhile was refused.
    @Suite("Device token refresh", .serialized)
    struct DeviceTokenRefreshTests {
        static let day: TimeInterval = 86_400

        @Test func aDeviceExchangesItsTokenForANewOneOfTheSameDevice() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let (user, credentials) = try await h.repository.enrolledUser(name: "Đỗ Thị Hoa", siteIds: [f.site.id])
                let device = credentials.device.id
                let renewed = try await client.send(.post, "/v1/devices/token", key: credentials.token, headers: [.deviceId: device])
                    .decode(DeviceCredentialsResponse.self)
                // (Issued within the same second as the enrollment's, it may be the very same token.)
                #expect(renewed.deviceId == device && renewed.userId == user.id && renewed.tokenExpiresAt >= credentials.claims.expiresAt)
                #expect(renewed.tokenExpiresAt > Date().addingTimeInterval(89 * Self.day))
                let claims = try ServiceTestDatabase.signer.verify(renewed.token, now: Date())
                #expect(claims.deviceId == device && claims.userId == user.id)
                // The registry records the new expiry (the feed carries it).
                let stored = try await h.repository.device(id: device)
                #expect(abs((stored.tokenExpiresAt ?? .distantPast).timeIntervalSince(renewed.tokenExpiresAt)) < 1)
                // A body with members this registry does not know (a newer app's) is taken too.
                _ = try await client.send(
                    .post, "/v1/devices/token", key: credentials.token, json: #"{"reason":"scheduled"}"#, headers: [.deviceId: device]
                )
                .decode(DeviceCredentialsResponse.self)
                // The new token works where the old one did.
                _ = try await client.send(.get, "/v1/devices/config", key: renewed.token, headers: [.deviceId: device])
                    .decode(DeviceConfiguration.self)
            }
        }

        /// A phone switched off when its token ran out recovers by itself within 30 days; later it needs a
        /// new code. The expired token is accepted here only.
        @Test func anExpiredTokenIsRenewedWithinThirtyDaysAndNowhereElse() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let (user, credentials) = try await h.repository.enrolledUser(name: "Vũ Quốc Bảo", siteIds: [f.site.id])
                let device = credentials.device.id
                func expired(daysAgo: TimeInterval) -> String {
                    ServiceTestDatabase.signer.sign(
                        deviceId: device, userId: user.id, issuedAt: Date().addingTimeInterval(-(90 + daysAgo) * Self.day),
                        lifetime: .seconds(90 * 86_400)
                    ).token
                }
                let lately = expired(daysAgo: 10)
                try await client.send(.get, "/v1/devices/config", key: lately, headers: [.deviceId: device]).problem(.unauthorized)
                let renewed = try await client.send(.post, "/v1/devices/token", key: lately, headers: [.deviceId: device])
                    .decode(DeviceCredentialsResponse.self)
                #expect(renewed.deviceId == device)
                let problem = try await client.send(
                    .post, "/v1/devices/token", key: expired(daysAgo: 31), headers: [.deviceId: device]
                ).problem(.unauthorized)
                #expect(problem.detail?.contains("expired") == true, "\(String(describing: problem.detail))")
            }
        }

        @Test func aRevokedDeviceAnotherDevicesIdAndNoTokenAreRefused() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                let (_, credentials) = try await h.repository.enrolledUser(name: "Ngô Thanh Tâm", siteIds: [f.site.id])
                let device = credentials.device.id
                try await client.send(.post, "/v1/devices/token", key: nil, headers: [.deviceId: device]).problem(.unauthorized)
                try await client.send(.post, "/v1/devices/token", key: credentials.token).problem(.badRequest)
                try await client.send(.post, "/v1/devices/token", key: credentials.token, headers: [.deviceId: "dev_other"])
                    .problem(.forbidden)
                try await client.send(.post, "/v1/devices/token?x=1", key: credentials.token, headers: [.deviceId: device])
                    .problem(.badRequest)
                _ = try await h.repository.revokeDevice(id: device)
                try await client.send(.post, "/v1/devices/token", key: credentials.token, headers: [.deviceId: device])
                    .problem(.forbidden)
            }
        }
    }
}
