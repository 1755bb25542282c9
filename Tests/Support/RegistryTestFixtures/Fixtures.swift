import AttendanceProtocol
import BeaconRegistryCore
import Foundation

/// An organization with a day-shift site, its main entrance and one user of the site, all new, made
/// through the repository: what a registry test needs when the places themselves are not its subject.
package struct RegistryFixture: Sendable {
    package let organization: Organization
    package let site: Site
    package let gate: Gate
    package let user: User

    package static func make(_ repository: some RegistryRepository, userName: String = "Nguyễn Văn An") async throws -> RegistryFixture {
        let organization = try await repository.createOrganization(NewOrganization(name: "Org \(UUID().uuidString.prefix(8))"))
        let site = try await repository.createSite(NewSite.dayShift(organizationId: organization.id))
        let gate = try await repository.createGate(NewGate(siteId: site.id, name: "Main entrance"))
        let user = try await repository.createUser(NewUser(name: userName, siteIds: [site.id]))
        return RegistryFixture(organization: organization, site: site, gate: gate, user: user)
    }
}

/// An organization with its namespace, a day-shift site and its main entrance, with an active
/// beacon registered on the minor the registry allocated to the gate: a check-in point as an
/// installer sets one up. Users come from `RegistryRepository.enrolledUser`.
package struct BeaconedSite: Sendable {
    package let organization: Organization
    package let namespace: BusinessNamespace
    package let site: Site
    package let gate: Gate
    package let minor: MinorAllocation
    package let beacon: Beacon

    /// The beacon as a device reports it.
    package var identity: BeaconIdentity { BeaconIdentity(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor) }

    /// `name` names the organization and the site; the beacon's serial is `serialPrefix-<minor>`.
    package static func make(
        _ repository: some RegistryRepository, name: String = "Org \(UUID().uuidString.prefix(8))",
        serialPrefix: String = "CP28", advIntervalMs: Int = 350, mac: String? = nil
    ) async throws -> BeaconedSite {
        let organization = try await repository.createOrganization(NewOrganization(name: name))
        let namespace = try await repository.allocateNamespace(organizationId: organization.id)
        let site = try await repository.createSite(NewSite.dayShift(organizationId: organization.id, name: "\(name) site"))
        let gate = try await repository.createGate(NewGate(siteId: site.id, name: "Main entrance"))
        let minor = try await repository.allocateMinor(gateId: gate.id)
        let beacon = try await repository.registerBeacon(
            NewBeacon(
                uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor, serial: "\(serialPrefix)-\(minor.minor)",
                mac: mac, txPower: -59, advIntervalMs: advIntervalMs, gateId: gate.id
            ))
        return BeaconedSite(organization: organization, namespace: namespace, site: site, gate: gate, minor: minor, beacon: beacon)
    }
}

extension RegistryRepository {
    /// A new user of `siteIds` whose phone (a Pixel 8 on app 1.12.0) exchanged a fresh enrollment code.
    package func enrolledUser(name: String, siteIds: [String]) async throws -> (user: User, credentials: DeviceCredentials) {
        let user = try await createUser(NewUser(name: name, siteIds: siteIds))
        let code = try await createEnrollmentCode(userId: user.id, validity: .seconds(600))
        let credentials = try await exchangeEnrollmentCode(code.code, device: DeviceDescription(appVersion: "1.12.0", model: "Pixel 8"))
        return (user, credentials)
    }
}
