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
import Testing

/// Every `/v1/admin` route with the role it needs. `AuthTests.matrixCoversEveryAdminRoute` keeps
/// this list complete against the router.
let adminRouteRoles: [(method: HTTPRequest.Method, path: String, role: APIRole)] = [
    (.post, "/v1/admin/organizations", .admin),
    (.get, "/v1/admin/organizations", .viewer),
    (.get, "/v1/admin/organizations/{id}", .viewer),
    (.post, "/v1/admin/organizations/{id}/namespace", .admin),
    (.get, "/v1/admin/organizations/{id}/sites", .viewer),
    (.post, "/v1/admin/sites", .admin),
    (.get, "/v1/admin/sites/{id}", .viewer),
    (.get, "/v1/admin/sites/{id}/gates", .viewer),
    (.get, "/v1/admin/sites/{id}/beacons", .viewer),
    (.get, "/v1/admin/sites/{id}/detection-config", .viewer),
    (.put, "/v1/admin/sites/{id}/detection-config", .admin),
    (.post, "/v1/admin/gates", .installer),
    (.get, "/v1/admin/gates/{id}", .viewer),
    (.post, "/v1/admin/gates/{id}/minor", .installer),
    (.post, "/v1/admin/users", .admin),
    (.get, "/v1/admin/users/{id}", .viewer),
    (.get, "/v1/admin/users/{id}/devices", .viewer),
    (.put, "/v1/admin/sites/{id}/geofence", .admin),
    (.put, "/v1/admin/sites/{id}/shift", .admin),
    (.put, "/v1/admin/users/{id}/name", .admin),
    (.put, "/v1/admin/users/{id}/sites", .admin),
    (.post, "/v1/admin/users/{id}/enrollment-codes", .admin),
    (.post, "/v1/admin/beacons", .installer),
    (.get, "/v1/admin/beacons/{id}", .viewer),
    (.patch, "/v1/admin/beacons/{id}", .installer),
    (.get, "/v1/admin/beacons/{id}/provisioning-plan", .viewer),
    (.post, "/v1/admin/beacons/{id}/gatt-key/rotate", .admin),
    (.get, "/v1/admin/beacons/{id}/verification", .viewer),
    (.post, "/v1/admin/sightings", .installer),
    (.get, "/v1/admin/devices/{id}", .viewer),
    (.post, "/v1/admin/devices/{id}/revoke", .admin),
    (.post, "/v1/admin/api-keys", .admin),
    (.post, "/v1/admin/api-keys/{id}/revoke", .admin),
    (.get, "/v1/admin/lookup/beacon", .viewer),
    (.get, "/v1/admin/lookup/business", .viewer),
    (.get, "/v1/admin/lookup/uuid/{uuid}", .viewer),
    (.get, "/v1/admin/lookup/mac/{mac}", .viewer),
]

extension RegistryServiceTests {
    @Suite("Auth and roles", .serialized)
    struct AuthTests {
        @Test func matrixCoversEveryAdminRoute() throws {
            let router = buildRouter(repository: UnusedRepository(), devices: ServiceTestDatabase.devices)
            let routed = Set(router.routes.map { "\($0.method) \($0.path)" }.filter { $0.contains("/v1/admin") })
            let listed = Set(adminRouteRoles.map { "\($0.method) \($0.path)" })
            #expect(routed == listed)
        }

        @Test func missingMalformedUnknownAndRevokedKeysAre401() async throws {
            try await Harness.run { h, client in
                let noKey = try await client.send(.get, "/v1/admin/organizations", key: nil)
                let problem = try noKey.problem(.unauthorized)
                #expect(problem.problemType == .unauthorized)
                #expect(noKey.headers[.wwwAuthenticate] == "Bearer")

                try await client.send(.get, "/v1/admin/organizations", key: "rk_nonsense").problem(.unauthorized)
                try await client.send(.get, "/v1/admin/organizations", key: nil, headers: [.authorization: "Basic YWRtaW46YWRtaW4="])
                    .problem(.unauthorized)
                try await client.send(.get, "/v1/admin/organizations", key: nil, headers: [.authorization: "Bearer"]).problem(.unauthorized)
                // A well-formed secret of a key with one character changed.
                var tampered = Array(h.viewer)
                tampered[tampered.count - 1] = tampered.last == "A" ? "B" : "A"
                try await client.send(.get, "/v1/admin/organizations", key: String(tampered)).problem(.unauthorized)

                let issued = try await h.repository.createAPIKey(name: "to revoke", role: .admin)
                #expect(try await client.send(.get, "/v1/admin/organizations?limit=1", key: issued.secret).status == .ok)
                _ = try await h.repository.revokeAPIKey(id: issued.key.id)
                try await client.send(.get, "/v1/admin/organizations?limit=1", key: issued.secret).problem(.unauthorized)
            }
        }

        /// Every admin route: without a key 401; with each role, 403 below the route's role and
        /// never 401/403 at or above it (the unknown ids and empty bodies then give 400/404, so
        /// nothing is written).
        @Test func roleMatrixOnEveryAdminRoute() async throws {
            try await Harness.run { h, client in
                let keys: [(APIRole, String)] = [(.viewer, h.viewer), (.installer, h.installer), (.admin, h.admin)]
                for route in adminRouteRoles {
                    let path = route.path.replacingOccurrences(of: "{id}", with: "missing-\(token())")
                    let body: String? = route.method == .get ? nil : "{}"
                    let anonymous = try await client.send(route.method, path, key: nil, json: body)
                    try anonymous.problem(.unauthorized)
                    for (role, secret) in keys {
                        let response = try await client.send(route.method, path, key: secret, json: body)
                        if role.permits(route.role) {
                            #expect(
                                response.status != .unauthorized && response.status != .forbidden,
                                "\(role) \(route.method) \(path): \(response.text)")
                            #expect(response.status.code < 500, "\(route.method) \(path): \(response.text)")
                        } else {
                            let problem = try response.problem(.forbidden)
                            #expect(problem.problemType == .forbidden)
                            #expect(problem.detail?.contains(route.role.rawValue) == true, "\(problem)")
                        }
                    }
                }
            }
        }

        @Test func rolesOnRealWrites() async throws {
            try await Harness.run { h, client in
                let t = token()
                // viewer: reads yes, writes no.
                try await client.send(.post, "/v1/admin/organizations", key: h.viewer, json: #"{"name":"viewer \#(t)"}"#).problem(
                    .forbidden)
                #expect(try await client.send(.get, "/v1/admin/organizations?limit=1", key: h.viewer).status == .ok)
                // installer: no organizations, API keys or users.
                try await client.send(.post, "/v1/admin/organizations", key: h.installer, json: #"{"name":"installer \#(t)"}"#).problem(
                    .forbidden)
                try await client.send(.post, "/v1/admin/api-keys", key: h.installer, json: #"{"name":"x","role":"admin"}"#).problem(
                    .forbidden)
                try await client.send(.post, "/v1/admin/users", key: h.installer, json: #"{"name":"installer \#(t)"}"#).problem(.forbidden)
                #expect(try await h.count("SELECT count(*)::int FROM organizations WHERE name LIKE \("%" + t)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM users WHERE name LIKE \("%" + t)") == 0)
                // admin: yes; installer: gates yes.
                let organization = try await client.send(.post, "/v1/admin/organizations", key: h.admin, json: #"{"name":"admin \#(t)"}"#)
                    .decode(Organization.self, status: .created)
                let site = try await client.send(
                    .post, "/v1/admin/sites", key: h.admin, json: Sample.site(organizationId: organization.id, name: "S \(t)")
                )
                .decode(Site.self, status: .created)
                let gate = try await client.send(.post, "/v1/admin/gates", key: h.installer, json: #"{"siteId":"\#(site.id)","name":"G"}"#)
                    .decode(Gate.self, status: .created)
                #expect(gate.siteId == site.id)
            }
        }

        @Test func apiKeysAreCreatedOnceAndRevoked() async throws {
            try await Harness.run { h, client in
                struct Issued: Decodable { var secret: String; var key: APIKey }
                let issued = try await client.send(
                    .post, "/v1/admin/api-keys", key: h.admin, json: #"{"name":"ci viewer","role":"viewer"}"#
                )
                .decode(Issued.self, status: .created)
                #expect(issued.key.role == .viewer)
                #expect(try await client.send(.get, "/v1/admin/organizations?limit=1", key: issued.secret).status == .ok)
                try await client.send(.post, "/v1/admin/gates", key: issued.secret, json: "{}").problem(.forbidden)
                let revoked = try await client.send(.post, "/v1/admin/api-keys/\(issued.key.id)/revoke", key: h.admin).decode(APIKey.self)
                #expect(revoked.revokedAt != nil)
                try await client.send(.get, "/v1/admin/organizations?limit=1", key: issued.secret).problem(.unauthorized)
            }
        }

        @Test func bootstrapCreatesNothingWhenAnAdminKeyExists() async throws {
            try await Harness.run { h, _ in
                // The harness created an admin key, so there is one.
                let issued = try await BootstrapAdminKey.ensure(repository: h.repository)
                #expect(issued == nil)
            }
        }
    }
}

/// A repository the route-table tests never call.
struct UnusedRepository: AdminRegistryRepository {
    func organization(id: String) async throws(RegistryError) -> Organization { throw .storage("unused") }
    func site(id: String) async throws(RegistryError) -> Site { throw .storage("unused") }
    func gate(id: String) async throws(RegistryError) -> Gate { throw .storage("unused") }
    func user(id: String) async throws(RegistryError) -> User { throw .storage("unused") }
    func createFirstAdminKey(name: String) async throws(RegistryError) -> IssuedAPIKey? { throw .storage("unused") }
    func setUserSites(userId: String, siteIds: [String]) async throws(RegistryError) -> User { throw .storage("unused") }
    func renameUser(userId: String, name: String) async throws(RegistryError) -> User { throw .storage("unused") }
    func listDevices(userId: String, after: String?, limit: Int) async throws(RegistryError) -> [Device] { throw .storage("unused") }
    func detectionConfig(siteId: String) async throws(RegistryError) -> SiteDetectionConfig { throw .storage("unused") }
    func deviceConfiguration(deviceId: String, userId: String) async throws(RegistryError) -> DeviceConfiguration {
        throw .storage("unused")
    }
    func setDetectionConfig(
        siteId: String, _ document: DetectionConfigDocument, by apiKeyId: String
    ) async throws(RegistryError)
        -> SiteDetectionConfig
    {
        throw .storage("unused")
    }
    func listOrganizations(after: String?, limit: Int) async throws(RegistryError) -> [Organization] { throw .storage("unused") }
    func listSites(organizationId: String, after: String?, limit: Int) async throws(RegistryError) -> [Site] { throw .storage("unused") }
    func listGates(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Gate] { throw .storage("unused") }
    func listBeacons(siteId: String, after: String?, limit: Int) async throws(RegistryError) -> [Beacon] { throw .storage("unused") }
    func createOrganization(_ input: NewOrganization) async throws(RegistryError) -> Organization { throw .storage("unused") }
    func createSite(_ input: NewSite) async throws(RegistryError) -> Site { throw .storage("unused") }
    func setSiteGeofence(siteId: String, _ geofence: Geofence) async throws(RegistryError) -> Site { throw .storage("unused") }
    func setSiteShift(siteId: String, _ change: SiteShiftChange) async throws(RegistryError) -> Site { throw .storage("unused") }
    func createGate(_ input: NewGate) async throws(RegistryError) -> Gate { throw .storage("unused") }
    func createUser(_ input: NewUser) async throws(RegistryError) -> User { throw .storage("unused") }
    func allocateNamespace(organizationId: String) async throws(RegistryError) -> BusinessNamespace { throw .storage("unused") }
    func allocateMinor(gateId: String) async throws(RegistryError) -> MinorAllocation { throw .storage("unused") }
    func registerBeacon(_ input: NewBeacon) async throws(RegistryError) -> Beacon { throw .storage("unused") }
    func updateBeaconStatus(beaconId: String, status: BeaconStatus) async throws(RegistryError) -> Beacon { throw .storage("unused") }
    func beacon(id: String) async throws(RegistryError) -> Beacon { throw .storage("unused") }
    func rotateBeaconKey(beaconId: String, graceHours: Int, force: Bool) async throws(RegistryError) -> BeaconKeyRotation {
        throw .storage("unused")
    }
    func beaconGattKey(beaconId: String) async throws(RegistryError) -> BeaconGattKey? { throw .storage("unused") }
    func recordSighting(_ sighting: BeaconSighting) async throws(RegistryError) { throw .storage("unused") }
    func recordSightings(_ sightings: [BeaconSighting]) async throws(RegistryError) -> Int { throw .storage("unused") }
    func pruneSightings(before cutoff: Date) async throws(RegistryError) -> Int { throw .storage("unused") }
    func verifyBroadcast(_ beacon: BeaconIdentity, withinMinutes minutes: Int) async throws(RegistryError) -> BroadcastVerification {
        throw .storage("unused")
    }
    func createEnrollmentCode(userId: String, validity: Duration) async throws(RegistryError) -> IssuedEnrollmentCode {
        throw .storage("unused")
    }
    func exchangeEnrollmentCode(_ code: String, device: DeviceDescription) async throws(RegistryError) -> DeviceCredentials {
        throw .storage("unused")
    }
    func refreshDeviceToken(deviceId: String, userId: String) async throws(RegistryError) -> DeviceCredentials {
        throw .storage("unused")
    }
    func revokeDevice(id: String) async throws(RegistryError) -> Device { throw .storage("unused") }
    func device(id: String) async throws(RegistryError) -> Device { throw .storage("unused") }
    func createAPIKey(name: String, role: APIRole) async throws(RegistryError) -> IssuedAPIKey { throw .storage("unused") }
    func verifyAPIKey(_ presented: String) async throws(RegistryError) -> APIKey? { throw .storage("unused") }
    func revokeAPIKey(id: String) async throws(RegistryError) -> APIKey { throw .storage("unused") }
}
