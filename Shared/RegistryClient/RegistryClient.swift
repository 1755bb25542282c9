import AttendanceProtocol
import Foundation

/// A decoded answer and the JSON the registry sent (printed verbatim by `--json`).
public struct RegistryReply<Value: Sendable>: Sendable {
    public var value: Value
    public var json: Data
    /// The answer's `ETag`, where the route sends one (the device configuration).
    public var eTag: String? = nil
}

/// A client of the beacon registry's REST API (the registry's OpenAPI document): one method
/// per operation, bodies and answers as the document describes them. Every failure is a
/// `RegistryClientError`; admin operations without an API key fail before any request is sent.
public struct RegistryClient: Sendable {
    /// `http://host:port`, without a trailing slash.
    public let baseURL: String
    public let apiKey: String?
    let transport: any RegistryTransport

    public static let defaultURL = "http://127.0.0.1:8083"

    public init(baseURL: String, apiKey: String?, transport: any RegistryTransport = HTTPRegistryTransport()) throws(RegistryClientError) {
        var url = baseURL.trimmingCharacters(in: .whitespaces)
        while url.hasSuffix("/") { url.removeLast() }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            components.query == nil, components.fragment == nil
        else { throw .invalidURL(baseURL) }
        self.baseURL = url
        let key = apiKey?.trimmingCharacters(in: .whitespacesAndNewlines)
        self.apiKey = key?.isEmpty == false ? key : nil
        self.transport = transport
    }

    // MARK: Organizations

    public func createOrganization(_ body: NewOrganization) async throws(RegistryClientError) -> RegistryReply<Organization> {
        try await admin(.post, "/v1/admin/organizations", body: body)
    }

    public func listOrganizations(
        _ page: PageQuery = PageQuery()
    ) async throws(RegistryClientError) -> RegistryReply<RegistryPage<Organization>> {
        try await admin(.get, "/v1/admin/organizations", query: page.query)
    }

    public func organization(id: String) async throws(RegistryClientError) -> RegistryReply<Organization> {
        try await admin(.get, "/v1/admin/organizations/\(Self.segment(id))")
    }

    /// The organization's shard UUID and major (allocated on first call, the same afterwards).
    public func allocateNamespace(organizationId: String) async throws(RegistryClientError) -> RegistryReply<BusinessNamespace> {
        try await admin(.post, "/v1/admin/organizations/\(Self.segment(organizationId))/namespace")
    }

    public func listSites(
        organizationId: String, _ page: PageQuery = PageQuery()
    ) async throws(RegistryClientError) -> RegistryReply<RegistryPage<Site>> {
        try await admin(.get, "/v1/admin/organizations/\(Self.segment(organizationId))/sites", query: page.query)
    }

    // MARK: Sites

    public func createSite(_ body: NewSite) async throws(RegistryClientError) -> RegistryReply<Site> {
        try await admin(.post, "/v1/admin/sites", body: body)
    }

    public func site(id: String) async throws(RegistryClientError) -> RegistryReply<Site> {
        try await admin(.get, "/v1/admin/sites/\(Self.segment(id))")
    }

    /// Gives the site a new shift from a local day on (default: the site's today).
    public func setSiteShift(siteId: String, _ change: SiteShiftChange) async throws(RegistryClientError) -> RegistryReply<Site> {
        try await admin(.put, "/v1/admin/sites/\(Self.segment(siteId))/shift", body: change)
    }

    /// Moves or resizes the site's geofence.
    public func setSiteGeofence(siteId: String, _ geofence: Geofence) async throws(RegistryClientError) -> RegistryReply<Site> {
        try await admin(.put, "/v1/admin/sites/\(Self.segment(siteId))/geofence", body: geofence)
    }

    public func listGates(
        siteId: String, _ page: PageQuery = PageQuery()
    ) async throws(RegistryClientError) -> RegistryReply<RegistryPage<Gate>> {
        try await admin(.get, "/v1/admin/sites/\(Self.segment(siteId))/gates", query: page.query)
    }

    public func listBeacons(
        siteId: String, _ page: PageQuery = PageQuery()
    ) async throws(RegistryClientError) -> RegistryReply<RegistryPage<Beacon>> {
        try await admin(.get, "/v1/admin/sites/\(Self.segment(siteId))/beacons", query: page.query)
    }

    /// The site's detection settings (version 0 and `{}` when never set).
    public func detectionConfig(siteId: String) async throws(RegistryClientError) -> RegistryReply<SiteDetectionConfig> {
        try await admin(.get, "/v1/admin/sites/\(Self.segment(siteId))/detection-config")
    }

    /// Replaces the site's detection settings with `document` (a remote-config JSON object, sent as
    /// given); the registry refuses, naming each key, what the app would refuse.
    public func setDetectionConfig(siteId: String, document: Data) async throws(RegistryClientError) -> RegistryReply<SiteDetectionConfig> {
        try await call(
            RegistryRequest(.put, "/v1/admin/sites/\(Self.segment(siteId))/detection-config", body: document, apiKey: try requireKey()))
    }

    // MARK: Gates

    public func createGate(_ body: NewGate) async throws(RegistryClientError) -> RegistryReply<Gate> {
        try await admin(.post, "/v1/admin/gates", body: body)
    }

    public func gate(id: String) async throws(RegistryClientError) -> RegistryReply<Gate> {
        try await admin(.get, "/v1/admin/gates/\(Self.segment(id))")
    }

    /// The next free minor of the organization's namespace, for the gate.
    public func allocateMinor(gateId: String) async throws(RegistryClientError) -> RegistryReply<MinorAllocation> {
        try await admin(.post, "/v1/admin/gates/\(Self.segment(gateId))/minor")
    }

    // MARK: Users and enrollment

    public func createUser(_ body: NewUser) async throws(RegistryClientError) -> RegistryReply<User> {
        try await admin(.post, "/v1/admin/users", body: body)
    }

    public func user(id: String) async throws(RegistryClientError) -> RegistryReply<User> {
        try await admin(.get, "/v1/admin/users/\(Self.segment(id))")
    }

    /// The devices enrolled for the user, revoked ones included.
    public func listDevices(
        userId: String, _ page: PageQuery = PageQuery()
    ) async throws(RegistryClientError) -> RegistryReply<RegistryPage<Device>> {
        try await admin(.get, "/v1/admin/users/\(Self.segment(userId))/devices", query: page.query)
    }

    /// Replaces the user's name.
    public func renameUser(userId: String, name: String) async throws(RegistryClientError) -> RegistryReply<User> {
        try await admin(.put, "/v1/admin/users/\(Self.segment(userId))/name", body: UserName(name: name))
    }

    /// Replaces the sites the user is assigned to.
    public func setUserSites(userId: String, siteIds: [String]) async throws(RegistryClientError) -> RegistryReply<User> {
        try await admin(.put, "/v1/admin/users/\(Self.segment(userId))/sites", body: UserSites(siteIds: siteIds))
    }

    /// A one-time code for the user's phone (the plaintext is in this answer only).
    public func createEnrollmentCode(
        userId: String, validityMinutes: Int? = nil
    ) async throws(RegistryClientError) -> RegistryReply<IssuedEnrollmentCode> {
        try await admin(
            .post, "/v1/admin/users/\(Self.segment(userId))/enrollment-codes",
            body: EnrollmentCodeRequest(validityMinutes: validityMinutes))
    }

    /// Exchanges a one-time code for device credentials, as the phone app does (no API key).
    public func enrollDevice(_ body: DeviceEnrollment) async throws(RegistryClientError) -> RegistryReply<DeviceCredentialsResponse> {
        try await call(RegistryRequest(.post, "/v1/devices/enroll", body: try Self.encode(body)))
    }

    /// The device's sites and their detection settings, as the phone app fetches them (its token, no API
    /// key). `configSchema` is the remote-config schema the device's library reads (PresenceKit's
    /// `RemoteConfig.schemaVersion`): the settings leave out the keys of later schemas.
    public func deviceConfiguration(
        deviceId: String, token: String, configSchema: Int
    ) async throws(RegistryClientError) -> RegistryReply<DeviceConfiguration> {
        try await call(Self.deviceConfigurationRequest(deviceId: deviceId, token: token, configSchema: configSchema))
    }

    /// The same, unless the device still holds it: `eTag` is the `eTag` of the answer it holds; nil
    /// when the registry answered 304 Not Modified.
    public func deviceConfiguration(
        deviceId: String, token: String, configSchema: Int, ifNoneMatch eTag: String
    ) async throws(RegistryClientError) -> RegistryReply<DeviceConfiguration>? {
        var request = Self.deviceConfigurationRequest(deviceId: deviceId, token: token, configSchema: configSchema)
        request.ifNoneMatch = eTag
        let response = try await transport.send(request, to: baseURL)
        if response.status == 304 { return nil }
        guard (200..<300).contains(response.status) else { throw RegistryClientError.from(response) }
        return RegistryReply(
            value: try Self.decode(DeviceConfiguration.self, response.body, path: request.path), json: response.body,
            eTag: response.eTag)
    }

    static func deviceConfigurationRequest(deviceId: String, token: String, configSchema: Int) -> RegistryRequest {
        var request = RegistryRequest(.get, "/v1/devices/config", apiKey: token, deviceId: deviceId)
        request.configSchema = configSchema
        return request
    }

    // MARK: Beacons

    public func registerBeacon(_ body: NewBeacon) async throws(RegistryClientError) -> RegistryReply<Beacon> {
        try await admin(.post, "/v1/admin/beacons", body: body)
    }

    public func beacon(id: String) async throws(RegistryClientError) -> RegistryReply<Beacon> {
        try await admin(.get, "/v1/admin/beacons/\(Self.segment(id))")
    }

    public func setBeaconStatus(id: String, status: BeaconStatus) async throws(RegistryClientError) -> RegistryReply<Beacon> {
        try await admin(.patch, "/v1/admin/beacons/\(Self.segment(id))", body: BeaconStatusChange(status: status))
    }

    /// A new GATT key for the beacon (admin). The installer writes it into the beacon from the
    /// provisioning plan; the policy verifies with it as soon as it reads the change, and with the
    /// replaced key for `graceHours` more (server default a week; 0 for a leaked key). Within an
    /// earlier rotation's grace the server answers 409 unless `force`.
    public func rotateBeaconKey(
        id: String, graceHours: Int? = nil, force: Bool = false
    ) async throws(RegistryClientError) -> RegistryReply<BeaconKeyRotation> {
        var query: [String: String] = [:]
        if let graceHours { query["graceHours"] = String(graceHours) }
        if force { query["force"] = "true" }
        return try await admin(.post, "/v1/admin/beacons/\(Self.segment(id))/gatt-key/rotate", query: query)
    }

    /// The DX-Smart CP28 write sequence for the beacon, as hex frames.
    public func provisioningPlan(
        beaconId: String, _ options: ProvisioningPlanQuery = ProvisioningPlanQuery()
    ) async throws(RegistryClientError) -> RegistryReply<ProvisioningPlanResponse> {
        try await admin(.get, "/v1/admin/beacons/\(Self.segment(beaconId))/provisioning-plan", query: options.query)
    }

    /// Whether devices reported the beacon within the last `withinMinutes` (server default 15).
    public func verifyBroadcast(
        beaconId: String, withinMinutes: Int? = nil
    ) async throws(RegistryClientError) -> RegistryReply<BeaconVerificationResponse> {
        try await admin(
            .get, "/v1/admin/beacons/\(Self.segment(beaconId))/verification",
            query: withinMinutes.map { ["withinMinutes": String($0)] } ?? [:])
    }

    /// Records that a device heard a beacon (202, no body).
    public func recordSighting(_ body: BeaconSightingReport) async throws(RegistryClientError) -> RegistryReply<Accepted> {
        let response = try await send(RegistryRequest(.post, "/v1/admin/sightings", body: try Self.encode(body), apiKey: try requireKey()))
        return RegistryReply(value: Accepted(status: response.status), json: response.body)
    }

    // MARK: Lookups (answered from the registry's in-memory feed cache)

    public func lookupBeacon(uuid: String, major: Int, minor: Int) async throws(RegistryClientError) -> RegistryReply<BeaconLookupResponse>
    {
        try await admin(.get, "/v1/admin/lookup/beacon", query: ["uuid": uuid, "major": String(major), "minor": String(minor)])
    }

    public func lookupBusiness(uuid: String, major: Int) async throws(RegistryClientError) -> RegistryReply<BusinessLookupResponse> {
        try await admin(.get, "/v1/admin/lookup/business", query: ["uuid": uuid, "major": String(major)])
    }

    public func lookupBeacons(uuid: String) async throws(RegistryClientError) -> RegistryReply<BeaconsByUUIDResponse> {
        try await admin(.get, "/v1/admin/lookup/uuid/\(Self.segment(uuid))")
    }

    public func lookupBeacon(mac: String) async throws(RegistryClientError) -> RegistryReply<BeaconLookupResponse> {
        try await admin(.get, "/v1/admin/lookup/mac/\(Self.segment(mac))")
    }

    // MARK: Devices

    public func device(id: String) async throws(RegistryClientError) -> RegistryReply<Device> {
        try await admin(.get, "/v1/admin/devices/\(Self.segment(id))")
    }

    public func revokeDevice(id: String) async throws(RegistryClientError) -> RegistryReply<Device> {
        try await admin(.post, "/v1/admin/devices/\(Self.segment(id))/revoke")
    }

    // MARK: API keys

    /// A new key; its secret is in this answer only.
    public func createAPIKey(name: String, role: APIRole) async throws(RegistryClientError) -> RegistryReply<IssuedAPIKey> {
        try await admin(.post, "/v1/admin/api-keys", body: NewAPIKey(name: name, role: role))
    }

    public func revokeAPIKey(id: String) async throws(RegistryClientError) -> RegistryReply<APIKey> {
        try await admin(.post, "/v1/admin/api-keys/\(Self.segment(id))/revoke")
    }

    // MARK: Service

    /// `/health/live` and `/health/ready` (503 when a dependency fails: not an error here).
    public func health() async throws(RegistryClientError) -> (live: RegistryReply<HealthBody>, ready: RegistryReply<HealthBody>) {
        func check(_ path: String) async throws(RegistryClientError) -> RegistryReply<HealthBody> {
            let response = try await transport.send(RegistryRequest(.get, path), to: baseURL)
            guard (200..<300).contains(response.status) || response.status == 503 else { throw RegistryClientError.from(response) }
            return RegistryReply(value: try Self.decode(HealthBody.self, response.body, path: path), json: response.body)
        }
        return (try await check("/health/live"), try await check("/health/ready"))
    }

    /// The OpenAPI document (YAML) the registry serves.
    public func openAPIDocument() async throws(RegistryClientError) -> String {
        try await text("/openapi.yaml")
    }

    /// The registry's Prometheus metrics (text format).
    public func metrics() async throws(RegistryClientError) -> String {
        try await text("/metrics")
    }

    // MARK: Plumbing

    func admin<Value: Decodable & Sendable>(
        _ method: RegistryRequest.Method, _ path: String, query: [String: String] = [:]
    ) async throws(RegistryClientError) -> RegistryReply<Value> {
        try await call(RegistryRequest(method, path, query: query, apiKey: try requireKey()))
    }

    func admin<Value: Decodable & Sendable>(
        _ method: RegistryRequest.Method, _ path: String, body: some Encodable
    ) async throws(RegistryClientError) -> RegistryReply<Value> {
        let key = try requireKey()
        return try await call(RegistryRequest(method, path, body: try Self.encode(body), apiKey: key))
    }

    func call<Value: Decodable & Sendable>(_ request: RegistryRequest) async throws(RegistryClientError) -> RegistryReply<Value> {
        let response = try await send(request)
        return RegistryReply(
            value: try Self.decode(Value.self, response.body, path: request.path), json: response.body, eTag: response.eTag)
    }

    /// Sends `request`; any status outside 2xx becomes its problem.
    func send(_ request: RegistryRequest) async throws(RegistryClientError) -> RegistryResponse {
        let response = try await transport.send(request, to: baseURL)
        guard (200..<300).contains(response.status) else { throw RegistryClientError.from(response) }
        return response
    }

    func text(_ path: String) async throws(RegistryClientError) -> String {
        String(decoding: try await send(RegistryRequest(.get, path)).body, as: UTF8.self)
    }

    func requireKey() throws(RegistryClientError) -> String {
        guard let apiKey else { throw .missingAPIKey }
        return apiKey
    }

    /// One path segment, percent-encoded (ids are `[A-Za-z0-9._-]`, but a typo must not change the route).
    static func segment(_ id: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id
    }

    static func encode(_ body: some Encodable) throws(RegistryClientError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(WireTimestamp.string(from: date))
        }
        do {
            return try encoder.encode(body)
        } catch EncodingError.invalidValue(let value, let context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .unsendable("\(path.isEmpty ? "the body" : path) cannot be \(value) in JSON")
        } catch {
            throw .unsendable("\(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data, path: String) throws(RegistryClientError) -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = WireTimestamp.date(from: text) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not an RFC 3339 timestamp"))
            }
            return date
        }
        do { return try decoder.decode(T.self, from: data) } catch {
            throw .unexpectedAnswer("\(path) did not return the documented JSON (\(Self.describe(error)))")
        }
    }

    static func describe(_ error: any Error) -> String {
        guard let decoding = error as? DecodingError else { return String(describing: error) }
        func path(_ keys: [any CodingKey]) -> String { keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".") }
        switch decoding {
        case .keyNotFound(let key, let context): return "\(path(context.codingPath + [key])) is missing"
        case .valueNotFound(_, let context): return "\(path(context.codingPath)) is null"
        case .typeMismatch(_, let context): return "\(path(context.codingPath)) has the wrong type"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "does not decode"
        }
    }
}
