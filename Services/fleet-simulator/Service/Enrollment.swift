import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import FleetSimulatorCore
import Foundation
import Logging
import PostgresNIO
import PresenceKit
import ServiceRuntime

/// The fleet as the registry knows it: sites with gates and beacons laid out like the simulated
/// world, and one user with one enrolled device (and its token) per simulated phone.
package struct EnrolledFleet: Sendable {
    package struct Device: Sendable {
        package let person: Int
        package let userId: String
        package let deviceId: String
        package let token: String
    }

    /// The world with the registry's site ids and allocated beacon identities.
    package let world: World
    package let devices: [Device]

    /// Enrolls through the registry's repository on the shared PostgreSQL, exactly as the app does
    /// (a one-time enrollment code exchanged for a device token); the running beacon-registry
    /// service publishes the changes to the gateway's and the policy's caches.
    package static func enroll(
        plan: FleetPlan, client: PostgresClient, signer: DeviceTokenSigner, logger: Logger,
        progress: (@Sendable (Int, Int) -> Void)? = nil
    ) async throws -> EnrolledFleet {
        let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer)
        let tag = String(UUID().uuidString.prefix(8)).lowercased()
        let organization = try await repository.createOrganization(NewOrganization(name: "Fleet \(tag)"))
        _ = try await repository.allocateNamespace(organizationId: organization.id)
        var sites: [SiteLayout] = []
        var siteIds: [String] = []
        for layout in plan.world.sites {
            let site = try await repository.createSite(
                NewSite(
                    organizationId: organization.id, name: "Fleet \(tag) \(layout.id)", timezone: "UTC",
                    geofence: AttendanceProtocol.Geofence(
                        latitude: layout.center.latitude, longitude: layout.center.longitude, radiusMeters: layout.geofenceRadiusMeters),
                    shift: ShiftSettings(
                        start: TimeOfDay(hour: 0, minute: 0)!, end: TimeOfDay(hour: 23, minute: 59)!,
                        checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5
                    )
                ))
            var copy = layout
            copy.id = site.id
            for (g, gate) in layout.gates.enumerated() {
                let registered = try await repository.createGate(NewGate(siteId: site.id, name: gate.name))
                let minor = try await repository.allocateMinor(gateId: registered.id)
                let beacon = try await repository.registerBeacon(
                    NewBeacon(
                        uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor,
                        serial: "FLEET-\(tag)-\(site.id.suffix(6))-\(g)",
                        mac: nil, txPower: Int(plan.world.radio.txPowerAt1m), advIntervalMs: layout.beacons[g].advertisingIntervalMs,
                        gateId: registered.id
                    ))
                copy.beacons[g].identity = PresenceKit.BeaconIdentity(
                    beacon.uuid.uuidString, major: UInt16(beacon.major), minor: UInt16(beacon.minor))
            }
            sites.append(copy)
            siteIds.append(site.id)
        }
        let people = plan.devicePeople
        var devices: [Device] = []
        for (n, person) in people.enumerated() {
            let user = try await repository.createUser(
                NewUser(name: "Fleet \(tag) person \(person.index)", siteIds: [siteIds[person.siteIndex]]))
            let code = try await repository.createEnrollmentCode(userId: user.id, validity: .seconds(600))
            let model = plan.profiles[person.index]?.model ?? "iPhone14,5"
            let credentials = try await repository.exchangeEnrollmentCode(
                code.code, device: DeviceDescription(appVersion: "1.12.0", model: model))
            devices.append(Device(person: person.index, userId: user.id, deviceId: credentials.device.id, token: credentials.token))
            progress?(n + 1, people.count)
        }
        return EnrolledFleet(world: World(sites: sites, radio: plan.world.radio), devices: devices)
    }

    /// Waits until the registry service has published every change, then a little for the caches.
    package static func waitUntilPublished(client: PostgresClient, logger: Logger, timeout: Duration = .seconds(120)) async throws {
        guard try await RegistryChangePublisher.waitUntilPublished(client: client, logger: logger, timeout: timeout) else {
            throw FleetError("the registry did not publish its changes within \(timeout) (is beacon-registry running?)")
        }
        try await Task.sleep(for: .seconds(3))
    }

    /// The device-token signing keys: `DEVICE_TOKEN_KEYS`, else the local stack's secrets file.
    package static func signer(
        environment: [String: String] = ProcessInfo.processInfo.environment, keysFile: String?
    ) throws -> DeviceTokenSigner {
        var env = environment
        if (env["DEVICE_TOKEN_KEYS"] ?? "").isEmpty {
            let path = keysFile ?? ((env["RUN_DIR"] ?? ".local/run") + "/secrets/device-token-keys")
            guard let keys = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw FleetError("no DEVICE_TOKEN_KEYS and no key file at \(path) (start the services with deploy/local/services.sh first)")
            }
            env["DEVICE_TOKEN_KEYS"] = keys.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return try DeviceTokenSigner.load(from: EnvironmentReader(env))
    }
}

package struct FleetError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
