import AccessControl
import AttendanceProtocol
import Foundation

/// The reads the admin REST service needs beyond `RegistryRepository`: single lookups and keyset
/// pages. Every list is ordered by id; `after` is the last id of the previous page (exclusive) and
/// `limit` the most rows returned. A list under a parent that does not exist fails with `.notFound`
/// (an empty page would hide a typo in the id).
package protocol RegistryListing: Sendable {
    func organization(id: String) async throws(RegistryError) -> Organization
    func site(id: String) async throws(RegistryError) -> Site
    func gate(id: String) async throws(RegistryError) -> Gate
    func user(id: String) async throws(RegistryError) -> User
    /// The site's detection settings: version 0 with an empty document when none were ever set.
    func detectionConfig(siteId: String) async throws(RegistryError) -> SiteDetectionConfig
    /// What the device needs (`GET /v1/devices/config`): every site of its user, with the namespace, its
    /// active beacons and its detection settings. `userId` is the one its token names: a device revoked or now bound to
    /// another user, or unknown here, is `.deviceNotActive`.
    func deviceConfiguration(deviceId: String, userId: String) async throws(RegistryError) -> DeviceConfiguration

    func listOrganizations(after: String?, limit: Int) async throws(RegistryError) -> [Organization]
    func listSites(organizationId: String, after: String?, limit: Int) async throws(RegistryError) -> [Site]
    func listGates(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Gate]
    /// The beacons of every gate of the site.
    func listBeacons(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Beacon]
}

/// What the admin REST service runs on.
package typealias AdminRegistryRepository = RegistryListing & RegistryRepository
