import AttendanceProtocol
import FleetSimulatorService
import Foundation
import PresenceKit
import RegistryClient
import Synchronization
import Testing

/// A site as the registry serves it to a device (`GET /v1/devices/config`) becomes the site PresenceKit
/// matches beacons to: its geofence, and exactly its active beacons (not the rest of the namespace).
@Suite("A served site as the phone knows it")
struct ServedSiteTests {
    static let uuid = UUID(uuidString: "3AA28898-81F4-4FED-9D7A-C0ED710805F8")!

    /// The site `site_hq` as the registry serves it, with these detection settings.
    static func served(_ detectionConfig: SiteDetectionConfig) -> DeviceSite {
        let uuid = Self.uuid
        let now = Date(timeIntervalSince1970: 1_764_000_000)
        return DeviceSite(
            site: AttendanceProtocol.Site(
                id: "site_hq", organizationId: "org_1", name: "HQ", timezone: "Asia/Ho_Chi_Minh",
                geofence: AttendanceProtocol.Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 220),
                shift: ShiftSettings(
                    start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!, checkInBeforeStartMinutes: 60,
                    checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5),
                createdAt: now),
            namespace: BusinessNamespace(organizationId: "org_1", uuid: uuid, major: 7, allocatedAt: now),
            beacons: [
                DeviceBeacon(uuid: uuid, major: 7, minor: 1, gateId: "gate_lobby"),
                DeviceBeacon(uuid: uuid, major: 7, minor: 3, gateId: "gate_back"),
            ],
            detectionConfig: detectionConfig)
    }

    @Test func theServedGeofenceAndBeaconsAreWhatThePhoneMatches() throws {
        let uuid = Self.uuid
        let served = Self.served(SiteDetectionConfig(siteId: "site_hq", version: 0, updatedAt: nil, document: [:]))
        let site = try EnrolledFleet.presenceSite(served)
        #expect(site.id == "site_hq" && site.radiusMeters == 220)
        #expect(site.settings == nil) // never set: the phone's own configuration applies there
        #expect(site.center == GeoPoint(latitude: 10.7769, longitude: 106.7009))
        let directory = SiteDirectory(sites: [site])
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 1)) == 0)
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 3)) == 0)
        // Another site's beacon in the same namespace is not this site's check-in point.
        #expect(directory.siteIndex(for: PresenceKit.BeaconIdentity(uuid.uuidString, major: 7, minor: 2)) == nil)
    }

    @Test func aSitesOwnSettingsAreReadAsThePhoneReadsThemWithTheRunsAdjustment() throws {
        let served = Self.served(
            SiteDetectionConfig(
                siteId: "site_hq", version: 2, updatedAt: nil, document: ["thresholds": ["enter_hold_ms": 3_000]]))
        let site = try EnrolledFleet.presenceSite(served) {
            var config = $0
            config.heartbeatIntervalMs = 60_000
            return config
        }
        var expected = PresenceConfig()
        expected.enterHoldMs = 3_000
        expected.heartbeatIntervalMs = 60_000
        #expect(site.settings == expected)
    }

    @Test func settingsThePhoneCannotReadStopTheRunNamingTheSite() throws {
        let served = Self.served(
            SiteDetectionConfig(siteId: "site_hq", version: 1, updatedAt: nil, document: ["thresholds": ["enter_hold": 3_000]]))
        #expect {
            try EnrolledFleet.presenceSite(served)
        } throws: { error in
            "\(error)".contains("the detection settings of site site_hq do not decode on the phone")
                && "\(error)".contains("enter_hold")
        }
    }

    /// A phone waking in a real-stack run asks for its configuration again with the tag it holds: 304
    /// leaves it as it is; a changed configuration comes back as the new directory, its tag kept for
    /// the next wake; a registry that cannot be asked, or a device without a token, leaves it as it is.
    @Test func aWakingPhoneGetsANewDirectoryOnlyWhenItsConfigurationChanged() async throws {
        let configuration = DeviceConfiguration(
            deviceId: "dev_1", userId: "usr_1",
            sites: [
                Self.served(
                    SiteDetectionConfig(siteId: "site_hq", version: 3, updatedAt: nil, document: ["feature_flags": ["kill_switch": true]]))
            ])
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(WireTimestamp.string(from: date))
        }
        let registry = ScriptedRegistry([
            RegistryResponse(status: 304, body: Data(), eTag: "\"a\""),
            RegistryResponse(status: 200, contentType: "application/json", body: try encoder.encode(configuration), eTag: "\"b\""),
        ])
        let refresh = ConfigurationRefresh(
            registry: try RegistryClient(baseURL: "http://127.0.0.1:9", apiKey: nil, transport: registry), tokens: ["dev_1": "tok"],
            tags: ["dev_1": "\"a\""], adjust: { $0 })
        #expect(await refresh.refreshed(deviceId: "dev_1") == nil)
        let directory = try #require(await refresh.refreshed(deviceId: "dev_1"))
        #expect(directory.sites.map(\.id) == ["site_hq"] && directory.settings(ofSite: 0)?.flags.killSwitch == true)
        #expect(await refresh.refreshed(deviceId: "dev_1") == nil) // the registry is down now
        #expect(await refresh.refreshed(deviceId: "dev_unknown") == nil)
        #expect(registry.requests.map(\.ifNoneMatch) == ["\"a\"", "\"a\"", "\"b\""])
        #expect(registry.requests.allSatisfy { $0.deviceId == "dev_1" && $0.apiKey == "tok" && $0.path == "/v1/devices/config" })
        // Each asks for the settings its PresenceKit reads, as the app does.
        #expect(registry.requests.allSatisfy { $0.configSchema == RemoteConfig.schemaVersion })

        // A configuration held without a tag (an answer that carried none) is asked for in full, and
        // the tag of that answer is kept.
        let untagged = ScriptedRegistry([
            RegistryResponse(status: 200, contentType: "application/json", body: try encoder.encode(configuration), eTag: "\"c\""),
            RegistryResponse(status: 304, body: Data(), eTag: "\"c\""),
        ])
        let fresh = ConfigurationRefresh(
            registry: try RegistryClient(baseURL: "http://127.0.0.1:9", apiKey: nil, transport: untagged), tokens: ["dev_1": "tok"],
            tags: [:], adjust: { $0 })
        #expect(await fresh.refreshed(deviceId: "dev_1")?.sites.map(\.id) == ["site_hq"])
        #expect(await fresh.refreshed(deviceId: "dev_1") == nil)
        #expect(untagged.requests.map(\.ifNoneMatch) == [nil, "\"c\""])
        #expect(untagged.requests.map(\.configSchema) == [RemoteConfig.schemaVersion, RemoteConfig.schemaVersion])
    }
}

/// Answers each request with the next of its answers, then as a registry that cannot be reached.
final class ScriptedRegistry: RegistryTransport {
    private let state: Mutex<(answers: [RegistryResponse], requests: [RegistryRequest])>

    init(_ answers: [RegistryResponse]) { state = Mutex((answers, [])) }

    var requests: [RegistryRequest] { state.withLock { $0.requests } }

    func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse {
        let answer = state.withLock { state -> RegistryResponse? in
            state.requests.append(request)
            return state.answers.isEmpty ? nil : state.answers.removeFirst()
        }
        guard let answer else { throw .unreachable(url: baseURL, reason: "connection refused") }
        return answer
    }
}
