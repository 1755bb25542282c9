import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import Logging
import PostgresNIO
import RegistryTestFixtures

/// What the load needs from the registry: one site with a gate and a beacon, and users each with one
/// enrolled device and its token. Made through the registry's repository on the shared PostgreSQL
/// (the running beacon-registry service publishes the changes to the gateway and the policy), so
/// the devices are enrolled exactly as the app enrolls them: a one-time code exchanged for a token.
struct LoadFleet: Sendable {
    struct Device: Sendable {
        let userId: String
        let deviceId: String
        let token: String
    }

    let siteId: String
    let beacon: BeaconIdentity
    let beaconId: String
    let devices: [Device]

    static func enroll(devices count: Int, client: PostgresClient, signer: DeviceTokenSigner, logger: Logger) async throws -> LoadFleet {
        let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer)
        let tag = String(UUID().uuidString.prefix(8)).lowercased()
        let place = try await BeaconedSite.make(repository, name: "Load \(tag)", serialPrefix: "LOAD-\(tag)", advIntervalMs: 700)
        var devices: [Device] = []
        for index in 0..<count {
            let (user, credentials) = try await repository.enrolledUser(name: "Load user \(tag)-\(index)", siteIds: [place.site.id])
            devices.append(Device(userId: user.id, deviceId: credentials.device.id, token: credentials.token))
        }
        return LoadFleet(
            siteId: place.site.id, beacon: place.identity, beaconId: place.beacon.id, devices: devices
        )
    }

    /// Waits until the registry service has published every change (its outbox is empty), then a
    /// little longer for the gateway's and the policy's caches to apply them.
    static func waitUntilPublished(client: PostgresClient, logger: Logger, timeout: Duration = .seconds(120)) async throws {
        guard try await RegistryChangePublisher.waitUntilPublished(client: client, logger: logger, timeout: timeout) else {
            throw LoadError("the registry did not publish its changes within \(timeout) (is beacon-registry running?)")
        }
        try await Task.sleep(for: .seconds(3))
    }
}

struct LoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
