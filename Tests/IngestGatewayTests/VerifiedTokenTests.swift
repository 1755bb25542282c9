import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import IngestGatewayService
import RegistryFeed
import ServiceRuntime
import Synchronization
import Testing

/// The auth middleware remembers tokens it verified (`VerifiedTokenCache`): a remembered token must
/// still expire on time, and a revoked device must still be refused.
@Suite("Verified device tokens")
struct VerifiedTokenTests {
    final class Clock: Sendable {
        private let value: Mutex<Date>
        init(_ date: Date) { value = Mutex(date) }
        var now: Date { value.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    static func app(clock: Clock, cache: RegistryCache = RegistryCache(), capacity: Int = 50_000) -> some ApplicationProtocol {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: ProblemMiddleware<GatewayRequestContext>(ProblemMapper(maxBodyBytes: 1_024)))
        router.add(
            middleware: DeviceAuthMiddleware(signer: TestKeys.signer, cache: cache, now: { clock.now }, verifiedTokenCapacity: capacity))
        router.get("/whoami") { _, context -> String in try context.requireDevice().deviceId }
        return Application(router: router)
    }

    static func get(_ client: some TestClientProtocol, token: String, device: String) async throws -> TestResponse {
        try await client.execute(
            uri: "/whoami", method: .get, headers: [.authorization: token, HTTPFieldName(HTTPHeader.deviceId)!: device])
    }

    /// `ProblemMiddleware` over the gateway's context: a refusal carries the request id as a success
    /// does, each request its own.
    @Test("every answer carries its own X-Request-Id, refusals included")
    func everyAnswerCarriesItsRequestId() async throws {
        let device = TestDevice.make()
        let token = TestKeys.token(device: device.deviceId, user: device.userId, issuedAt: Date(), lifetime: .seconds(600))
        try await Self.app(clock: Clock(Date())).test(.router) { client in
            let accepted = try await Self.get(client, token: "Bearer \(token)", device: device.deviceId)
            let refused = try await Self.get(client, token: "Bearer not-a-token", device: device.deviceId)
            #expect(accepted.status == .ok && refused.status == .unauthorized)
            let ids = [accepted, refused].compactMap { $0.headers[HTTPFieldName(HTTPHeader.requestId)!] }
            #expect(ids.count == 2 && Set(ids).count == 2, "\(ids)")
        }
    }

    @Test("a remembered token still expires at its expiry, not later")
    func rememberedTokenExpires() async throws {
        let issued = Date()
        let clock = Clock(issued.addingTimeInterval(60))
        let device = TestDevice.make()
        let token = TestKeys.token(device: device.deviceId, user: device.userId, issuedAt: issued, lifetime: .seconds(600))
        try await Self.app(clock: clock).test(.router) { client in
            for _ in 0..<3 {
                let ok = try await Self.get(client, token: "Bearer \(token)", device: device.deviceId)
                #expect(ok.status == .ok)
                #expect(String(buffer: ok.body) == device.deviceId)
            }
            clock.advance(600)
            let expired = try await Self.get(client, token: "Bearer \(token)", device: device.deviceId)
            #expect(expired.status == .unauthorized)
            #expect(String(buffer: expired.body).contains("expired"))
        }
    }

    @Test("a remembered token of a device revoked since is refused")
    func revokedAfterRemembered() async throws {
        let clock = Clock(Date())
        let cache = RegistryCache()
        let device = TestDevice.make()
        try await Self.app(clock: clock, cache: cache).test(.router) { client in
            let remembered = try await Self.get(client, token: "Bearer \(device.token)", device: device.deviceId)
            #expect(remembered.status == .ok)
            RegistryRecords.device(cache, device, status: "revoked", version: 2)
            let revoked = try await Self.get(client, token: "Bearer \(device.token)", device: device.deviceId)
            #expect(revoked.status == .forbidden)
        }
    }

    @Test("spaces and tabs around the token are ignored; a forged token is refused whatever was remembered")
    func paddingAndForgery() async throws {
        let clock = Clock(Date())
        let device = TestDevice.make()
        // Capacity 1: two devices in turn empty the cache on every store, and both keep working.
        try await Self.app(clock: clock, capacity: 1).test(.router) { client in
            let other = TestDevice.make()
            for _ in 0..<2 {
                let padded = try await Self.get(client, token: "Bearer  \t\(device.token) \t", device: device.deviceId)
                #expect(padded.status == .ok)
                let otherDevice = try await Self.get(client, token: "Bearer \(other.token)", device: other.deviceId)
                #expect(otherDevice.status == .ok)
            }
            let forged = TestKeys.token(device: device.deviceId, user: device.userId, signer: TestKeys.foreignSigner)
            let forgedAnswer = try await Self.get(client, token: "Bearer \(forged)", device: device.deviceId)
            #expect(forgedAnswer.status == .unauthorized)
            let altered = try await Self.get(client, token: "Bearer \(device.token)x", device: device.deviceId)
            #expect(altered.status == .unauthorized)
        }
    }
}
