import AccessControl
import AttendanceProtocol
import Foundation

/// Everything the registry stores, behind one protocol so handlers and the CLI can be tested with a
/// fake. Every failure is a `RegistryError`. Every write but sightings and detection settings also
/// appends its change to the change outbox in the same transaction (see `PostgresRegistryRepository`).
package protocol RegistryRepository: Sendable {
    // MARK: Places and people

    func createOrganization(_ input: NewOrganization) async throws(RegistryError) -> Organization
    func createSite(_ input: NewSite) async throws(RegistryError) -> Site
    /// Moves or resizes the site's geofence (a correction) and publishes the site again; phones take
    /// it with their next configuration, the policy's geofence rule at once.
    func setSiteGeofence(siteId: String, _ geofence: Geofence) async throws(RegistryError) -> Site
    /// Gives the site `change.shift` for its local days from `change.from` on (default: the site's
    /// today); the days before keep the shift they had (`Site.shiftHistory`), so the daily report
    /// judges each day by its own. Publishes the site again.
    func setSiteShift(siteId: String, _ change: SiteShiftChange) async throws(RegistryError) -> Site
    func createGate(_ input: NewGate) async throws(RegistryError) -> Gate
    func createUser(_ input: NewUser) async throws(RegistryError) -> User
    /// Replaces the user's site assignment (a user who moves to another site keeps their id and history)
    /// and publishes the user again.
    func setUserSites(userId: String, siteIds: [String]) async throws(RegistryError) -> User
    /// Replaces the user's name (a correction) and publishes the user again; the registry keeps no
    /// earlier name (the compacted feed drops it when the broker compacts the topic).
    func renameUser(userId: String, name: String) async throws(RegistryError) -> User

    /// Replaces the site's detection settings, set by the API key `apiKeyId`, and returns them with the
    /// next version; the change is not published on the feed (devices fetch it, no service reads it).
    /// `.notFound` for no such site.
    func setDetectionConfig(
        siteId: String, _ document: DetectionConfigDocument, by apiKeyId: String
    ) async throws(RegistryError) -> SiteDetectionConfig

    // MARK: Shard allocation

    /// The organization's namespace: its existing one, or a shard UUID with the lowest unused major.
    /// Idempotent and safe to call concurrently.
    func allocateNamespace(organizationId: String) async throws(RegistryError) -> BusinessNamespace
    /// The lowest free minor (1...65535) of the gate's organization namespace, now allocated to the
    /// gate. Allocates the namespace first when the organization has none. Each call allocates a new
    /// minor (a gate may hold several beacons); concurrent calls never get the same one.
    func allocateMinor(gateId: String) async throws(RegistryError) -> MinorAllocation

    // MARK: Beacons

    /// Refuses banned UUIDs (`.bannedUUID`), a uuid/major/minor or MAC already registered
    /// (`.duplicateBeaconIdentity`, `.duplicateMAC`), and a minor allocated to another gate.
    func registerBeacon(_ input: NewBeacon) async throws(RegistryError) -> Beacon
    func updateBeaconStatus(beaconId: String, status: BeaconStatus) async throws(RegistryError) -> Beacon
    func beacon(id: String) async throws(RegistryError) -> Beacon
    /// A new random GATT key for the beacon (version + 1), published on the feed in the same
    /// transaction. The key it replaces keeps verifying for `graceHours` (0-720; 0 stops it at
    /// once, for a leaked key). While an earlier rotation's replaced key still verifies, a rotation
    /// with a grace is `.beaconKeyInGrace` unless `force` (the installer wrote the current key).
    /// `.beaconKeysNotConfigured` without a sealing key.
    func rotateBeaconKey(beaconId: String, graceHours: Int, force: Bool) async throws(RegistryError) -> BeaconKeyRotation
    /// The beacon's current GATT key in plain text, for the installer's provisioning plan; `nil`
    /// when the beacon has none yet. `.beaconKeysNotConfigured` without a sealing key,
    /// `.beaconKeySealedUnderAnotherKey` when the stored key does not open with it.
    func beaconGattKey(beaconId: String) async throws(RegistryError) -> BeaconGattKey?

    // MARK: Broadcast verification

    /// Telemetry rather than a registry change: the one write that appends nothing to the outbox.
    func recordSighting(_ sighting: BeaconSighting) async throws(RegistryError)
    /// Records many sightings in one statement; malformed ones are skipped. Returns how many were stored.
    @discardableResult
    func recordSightings(_ sightings: [BeaconSighting]) async throws(RegistryError) -> Int
    /// Deletes sightings older than `cutoff` (verification looks back at most a day). Returns how many.
    @discardableResult
    func pruneSightings(before cutoff: Date) async throws(RegistryError) -> Int
    /// Verified when at least one device heard the beacon within the last `minutes` (1...1440).
    func verifyBroadcast(_ beacon: BeaconIdentity, withinMinutes minutes: Int) async throws(RegistryError) -> BroadcastVerification

    // MARK: Devices

    /// A one-time code for the user, valid for `validity` (1 minute...30 days). The plaintext is
    /// returned once and never stored.
    func createEnrollmentCode(userId: String, validity: Duration) async throws(RegistryError) -> IssuedEnrollmentCode
    /// Enrolls a device for the code's user and returns its signed credentials. The code is spent:
    /// a second exchange fails with `.enrollmentCodeUsed`, an expired one with `.enrollmentCodeExpired`.
    func exchangeEnrollmentCode(_ code: String, device: DeviceDescription) async throws(RegistryError) -> DeviceCredentials
    /// A new token for an enrolled device still bound to `userId` (same device id, a full lifetime from
    /// now); a revoked device, or one now bound to another user, is `.deviceNotActive`.
    func refreshDeviceToken(deviceId: String, userId: String) async throws(RegistryError) -> DeviceCredentials
    /// Marks the device revoked (idempotent: an already revoked device is returned unchanged).
    func revokeDevice(id: String) async throws(RegistryError) -> Device
    func device(id: String) async throws(RegistryError) -> Device
    /// The devices enrolled for a user (revoked ones included), by id; `.notFound` for no such user.
    func listDevices(userId: String, after: String?, limit: Int) async throws(RegistryError) -> [Device]

    // MARK: Admin API keys

    /// A new key; its secret is returned once and stored only as a hash.
    func createAPIKey(name: String, role: APIRole) async throws(RegistryError) -> IssuedAPIKey
    /// An admin key, unless an unrevoked one exists (nil then): the first key of a fresh registry.
    /// Registries starting together create one between them.
    func createFirstAdminKey(name: String) async throws(RegistryError) -> IssuedAPIKey?
    /// The key a presented bearer secret belongs to, or `nil` when it is unknown, wrong or revoked.
    func verifyAPIKey(_ presented: String) async throws(RegistryError) -> APIKey?
    func revokeAPIKey(id: String) async throws(RegistryError) -> APIKey
}
