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
        let organization = try await repository.createOrganization(NewOrganization(name: "Load \(tag)"))
        _ = try await repository.allocateNamespace(organizationId: organization.id)
        let site = try await repository.createSite(
            NewSite.dayShift(organizationId: organization.id, name: "Load site \(tag)"))
        let gate = try await repository.createGate(NewGate(siteId: site.id, name: "Main entrance"))
        let minor = try await repository.allocateMinor(gateId: gate.id)
        let beacon = try await repository.registerBeacon(
            NewBeacon(
                uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor, serial: "LOAD-\(tag)",
                mac: nil, txPower: -59, advIntervalMs: 700, gateId: gate.id
            ))
        var devices: [Device] = []
        for index in 0..<count {
            let user = try await repository.createUser(NewUser(name: "Load user \(tag)-\(index)", siteIds: [site.id]))
            let code = try await repository.createEnrollmentCode(userId: user.id, validity: .seconds(600))
            let credentials = try await repository.exchangeEnrollmentCode(
                code.code, device: DeviceDescription(appVersion: "1.12.0", model: "Pixel 8"))
            devices.append(Device(userId: user.id, deviceId: credentials.device.id, token: credentials.token))
        }
        return LoadFleet(
            siteId: site.id, beacon: BeaconIdentity(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor),
            beaconId: beacon.id, devices: devices
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
