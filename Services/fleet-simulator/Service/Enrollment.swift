import AttendanceProtocol
import FleetSimulatorCore
import Foundation
import PresenceKit
import RegistryClient
import Synchronization

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

    /// Enrolls through the registry's REST API like any client: an organization and its namespace,
    /// the sites, gates with allocated minors and registered beacons, then per phone a user, a
    /// one-time enrollment code and the device's enrollment, which answers its token. The running
    /// registry publishes every change to the gateway's and the policy's caches.
    package static func enroll(
        plan: FleetPlan, registry: RegistryClient, progress: (@Sendable (Int, Int) -> Void)? = nil
    ) async throws -> EnrolledFleet {
        let tag = String(UUID().uuidString.prefix(8)).lowercased()
        let organization = try await registry.createOrganization(NewOrganization(name: "Fleet \(tag)")).value
        _ = try await registry.allocateNamespace(organizationId: organization.id)
        var sites: [SiteLayout] = []
        var siteIds: [String] = []
        for layout in plan.world.sites {
            let site = try await registry.createSite(
                NewSite(
                    organizationId: organization.id, name: "Fleet \(tag) \(layout.id)", timezone: "UTC",
                    geofence: AttendanceProtocol.Geofence(
                        latitude: layout.center.latitude, longitude: layout.center.longitude, radiusMeters: layout.geofenceRadiusMeters),
                    shift: ShiftSettings(
                        start: TimeOfDay(hour: 0, minute: 0)!, end: TimeOfDay(hour: 23, minute: 59)!,
                        checkInBeforeStartMinutes: 60, checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5
                    )
                )
            ).value
            var copy = layout
            copy.id = site.id
            for (g, gate) in layout.gates.enumerated() {
                let registered = try await registry.createGate(NewGate(siteId: site.id, name: gate.name)).value
                let minor = try await registry.allocateMinor(gateId: registered.id).value
                let beacon = try await registry.registerBeacon(
                    NewBeacon(
                        uuid: minor.uuid.uuidString, major: minor.major, minor: minor.minor,
                        serial: "FLEET-\(tag)-\(site.id.suffix(6))-\(g)",
                        mac: nil, txPower: Int(plan.world.radio.txPowerAt1m), advIntervalMs: layout.beacons[g].advertisingIntervalMs,
                        gateId: registered.id
                    )
                ).value
                copy.beacons[g].identity = PresenceKit.BeaconIdentity(
                    beacon.uuid.uuidString, major: UInt16(beacon.major), minor: UInt16(beacon.minor))
            }
            sites.append(copy)
            siteIds.append(site.id)
        }
        let people = plan.devicePeople
        var devices: [Device] = []
        for (n, person) in people.enumerated() {
            let user = try await registry.createUser(
                NewUser(name: "Fleet \(tag) person \(person.index)", siteIds: [siteIds[person.siteIndex]])
            ).value
            let code = try await registry.createEnrollmentCode(userId: user.id, validityMinutes: 10).value
            let model = plan.profiles[person.index]?.model ?? "iPhone14,5"
            let credentials = try await registry.enrollDevice(DeviceEnrollment(code: code.code, appVersion: "1.12.0", model: model)).value
            devices.append(Device(person: person.index, userId: user.id, deviceId: credentials.deviceId, token: credentials.token))
            progress?(n + 1, people.count)
        }
        return EnrolledFleet(world: World(sites: sites, radio: plan.world.radio), devices: devices)
    }

    /// Waits until the registry's own view of its change feed holds every beacon of the fleet (the
    /// registry answers lookups from the feed, as the gateway and the policy do), then a little for
    /// the other services' caches.
    package static func waitUntilPublished(
        _ fleet: EnrolledFleet, registry: RegistryClient, timeout: Duration = .seconds(120)
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        for beacon in fleet.world.sites.flatMap(\.beacons) {
            while try await !isKnown(beacon.identity, to: registry) {
                guard ContinuousClock.now < deadline else {
                    throw FleetError(
                        "the registry's feed did not carry the fleet's beacons within \(timeout) (is beacon-registry running?)")
                }
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        try await Task.sleep(for: .seconds(3))
    }

    /// Whether the registry's lookup finds the beacon (a 404 until its feed carries it).
    static func isKnown(_ identity: PresenceKit.BeaconIdentity, to registry: RegistryClient) async throws -> Bool {
        do {
            _ = try await registry.lookupBeacon(uuid: identity.uuid.uuidString, major: Int(identity.major), minor: Int(identity.minor))
            return true
        } catch {
            if case .problem(let problem) = error, problem.status == 404 { return false }
            throw error
        }
    }

    /// Sets `document` as every fleet site's detection settings, as an operator would
    /// (`attendancectl registry sites set-detection-config`).
    package func setDetectionSettings(_ document: Data, registry: RegistryClient) async throws {
        for site in world.sites {
            _ = try await registry.setDetectionConfig(siteId: site.id, document: document)
        }
    }

    /// What the phones know, as each fetched it with its own token (`GET /v1/devices/config`) after
    /// enrolling, as the app does.
    package struct ServedConfigurations: Sendable {
        /// By person: its sites (geofence, check-in points and the site's own detection settings) as
        /// PresenceKit knows them; the settings of the site a phone is at are in force there.
        package var directories: [Int: SiteDirectory] = [:]
        /// The highest version of the detection settings fetched.
        package var version = 0
        /// By device id: the `ETag` of the configuration it holds, for asking again.
        package var eTags: [String: String] = [:]
    }

    /// - Parameter adjust: what the run changes in every configuration (its heartbeat), applied to each
    ///   site's settings as to the phone's own.
    package func servedConfigurations(
        registry: RegistryClient, adjust: (PresenceConfig) -> PresenceConfig = { $0 }
    ) async throws -> ServedConfigurations {
        var served = ServedConfigurations()
        var directoryOf: [[String]: SiteDirectory] = [:] // one per set of sites: their phones share it
        for device in devices {
            let reply = try await registry.deviceConfiguration(
                deviceId: device.deviceId, token: device.token, configSchema: RemoteConfig.schemaVersion)
            let configuration = reply.value
            served.eTags[device.deviceId] = reply.eTag
            guard !configuration.sites.isEmpty else {
                throw FleetError("device \(device.deviceId) got no site in its configuration from the registry")
            }
            for site in configuration.sites { served.version = max(served.version, site.detectionConfig.version) }
            let ids = configuration.sites.map(\.site.id)
            let directory =
                try directoryOf[ids] ?? Self.directory(of: configuration, adjust: adjust)
            directoryOf[ids] = directory
            served.directories[device.person] = directory
        }
        return served
    }

    /// The sites of a served configuration as PresenceKit matches beacons to them, with their settings.
    package static func directory(
        of configuration: DeviceConfiguration, adjust: (PresenceConfig) -> PresenceConfig
    ) throws -> SiteDirectory {
        SiteDirectory(sites: try configuration.sites.map { try presenceSite($0, adjust: adjust) })
    }

    /// A served site as PresenceKit knows it: its geofence, its active beacons and, when the site has
    /// detection settings of its own (version above 0), those settings as the phone reads them
    /// (`RemoteConfig.decode`, on top of the defaults), passed through `adjust`.
    package static func presenceSite(
        _ served: DeviceSite, adjust: (PresenceConfig) -> PresenceConfig = { $0 }
    ) throws -> PresenceKit.Site {
        let geofence = served.site.geofence
        var settings: PresenceConfig?
        if served.detectionConfig.version > 0 {
            do {
                let document = try JSONEncoder().encode(served.detectionConfig.document)
                settings = adjust(try RemoteConfig.decode(Array(document)).presence)
            } catch {
                throw FleetError("the detection settings of site \(served.site.id) do not decode on the phone: \(error)")
            }
        }
        return PresenceKit.Site(
            id: served.site.id, center: GeoPoint(latitude: geofence.latitude, longitude: geofence.longitude),
            radiusMeters: geofence.radiusMeters,
            beacons: served.beacons.map {
                BeaconMatcher($0.uuid.uuidString, major: UInt16(clamping: $0.major), minor: UInt16(clamping: $0.minor))
            },
            settings: settings)
    }

    /// The admin API key enrollment uses: `ATTENDANCE_API_KEY`, else the file (default the local
    /// stack's `$RUN_DIR/secrets/admin-api-key`, which `deploy/local/admin-key.sh` keeps working).
    package static func adminKey(environment: [String: String] = ProcessInfo.processInfo.environment, keyFile: String?) throws -> String {
        if let key = environment["ATTENDANCE_API_KEY"], !key.isEmpty { return key }
        let path = keyFile ?? ((environment["RUN_DIR"] ?? ".local/run") + "/secrets/admin-api-key")
        guard let key = try? String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !key.isEmpty
        else {
            throw FleetError(
                "no ATTENDANCE_API_KEY and no admin API key in \(path) (deploy/local/admin-key.sh makes one on the local stack)")
        }
        return key
    }
}

package struct FleetError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// What a phone of the fleet does on a background wake: asks the registry for its configuration again
/// with the tag of the one it holds (`If-None-Match`). A changed configuration comes back as its new
/// site directory (the phone puts it in force while running); 304, a registry that cannot be asked, or
/// an answer the phone cannot read leave the phone with what it has.
package final class ConfigurationRefresh: Sendable {
    let registry: RegistryClient
    let tokens: [String: String]
    let adjust: @Sendable (PresenceConfig) -> PresenceConfig
    private let tags: Mutex<[String: String]>

    /// - Parameters:
    ///   - tokens: each device's token, by device id.
    ///   - tags: the `ETag` of the configuration each device holds, by device id.
    ///   - adjust: what the run changes in every configuration (its heartbeat).
    package init(
        registry: RegistryClient, tokens: [String: String], tags: [String: String],
        adjust: @escaping @Sendable (PresenceConfig) -> PresenceConfig
    ) {
        self.registry = registry
        self.tokens = tokens
        self.adjust = adjust
        self.tags = Mutex(tags)
    }

    /// The device's new directory when its configuration changed since the one it holds, else nil. A
    /// configuration held without a tag is asked for again in full.
    package func refreshed(deviceId: String) async -> SiteDirectory? {
        guard let token = tokens[deviceId] else { return nil }
        do {
            let reply: RegistryReply<DeviceConfiguration>
            if let tag = tags.withLock({ $0[deviceId] }) {
                guard
                    let changed = try await registry.deviceConfiguration(
                        deviceId: deviceId, token: token, configSchema: RemoteConfig.schemaVersion, ifNoneMatch: tag)
                else {
                    return nil
                }
                reply = changed
            } else {
                reply = try await registry.deviceConfiguration(
                    deviceId: deviceId, token: token, configSchema: RemoteConfig.schemaVersion)
            }
            let directory = try EnrolledFleet.directory(of: reply.value, adjust: adjust)
            tags.withLock { $0[deviceId] = reply.eTag }
            return directory
        } catch {
            return nil
        }
    }
}
