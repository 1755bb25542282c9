import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import PresenceKit
import RegistryTestFixtures
import Testing

extension RegistryServiceTests {
    /// A site's settings reach an older app without the keys a later library introduced, which that
    /// app would refuse together with the whole document (its kill switch included).
    @Suite("Detection settings for the app's remote-config schema", .serialized)
    struct ConfigSchemaTests {
        @Test func keysOfLaterSchemasAreLeftOutAndFlagsStay() throws {
            let document = try JSONDecoder().decode(
                JSONValue.self,
                from: Data(
                    #"{"checkout_trigger": "geofence_exit", "new_top": 5, "thresholds": {"enter_rssi": -70, "new_sub": 1}, "gatt_challenge": {"new_sub": true}, "feature_flags": {"kill_switch": true, "brand_new_flag": true}}"#
                        .utf8))
            let later = RemoteConfig.keySchemaVersions.merging(["new_top": 2, "thresholds.new_sub": 2, "gatt_challenge.new_sub": 2]) { $1 }
            let forOne = DetectionConfigDocument.readable(bySchema: 1, document, keySchemas: later)
            #expect(forOne["new_top"] == nil && forOne["gatt_challenge"] == nil)
            #expect(forOne["thresholds"] == ["enter_rssi": -70] && forOne["checkout_trigger"] == "geofence_exit")
            #expect(forOne["feature_flags"] == ["kill_switch": true, "brand_new_flag": true])
            #expect(DetectionConfigDocument.readable(bySchema: 2, document, keySchemas: later) == document)
            // With today's library's own key schemas: the first schema's keys all stay.
            #expect(DetectionConfigDocument.readable(bySchema: 1, forOne) == forOne)
            // Keys this build does not list (a later registry stored them during a rolling upgrade) reach no
            // app: an app of any schema this build knows would refuse the whole document for them.
            let fromALaterRegistry = DetectionConfigDocument.readable(bySchema: 2, document)
            #expect(fromALaterRegistry["new_top"] == nil && fromALaterRegistry["gatt_challenge"] == nil)
            #expect(fromALaterRegistry["thresholds"] == ["enter_rssi": -70])
            #expect(fromALaterRegistry["feature_flags"] == ["kill_switch": true, "brand_new_flag": true])
        }

        @Test func theHeaderIsCheckedAndEachAppGetsTheKeysOfItsSchema() async throws {
            try await Harness.run { h, client in
                let f = try await BeaconedSite.make(h.repository)
                _ = try await client.send(
                    .put, "/v1/admin/sites/\(f.site.id)/detection-config", key: h.admin,
                    json: #"{"thresholds": {"enter_hold_ms": 3000, "session_resume_limit_ms": 3600000}}"#
                )
                .decode(SiteDetectionConfig.self)
                let (_, credentials) = try await h.repository.enrolledUser(name: "Trịnh Văn Nam", siteIds: [f.site.id])
                let device = credentials.device.id
                // `session_resume_limit_ms` came with schema 2: an app of schema 1 (or one that does not
                // say) would refuse it, and the whole document with it.
                let expected: [String?: JSONValue] = [
                    nil: ["thresholds": ["enter_hold_ms": 3000]], "1": ["thresholds": ["enter_hold_ms": 3000]],
                    "2": ["thresholds": ["enter_hold_ms": 3000, "session_resume_limit_ms": 3_600_000]],
                ]
                #expect(RemoteConfig.schemaVersion == 2)
                for (schema, document) in expected {
                    var headers: HTTPFields = [.deviceId: device]
                    if let schema { headers[DeviceConfigurationControllerHeader.name] = schema }
                    let answer = try await client.send(.get, "/v1/devices/config", key: credentials.token, headers: headers)
                        .decode(DeviceConfiguration.self)
                    #expect(answer.sites.first?.detectionConfig.document == document, "X-Config-Schema \(schema ?? "absent")")
                    // What the app receives, its own reader takes.
                    if let received = answer.sites.first?.detectionConfig.document {
                        let bytes = try JSONEncoder().encode(received)
                        let config = try RemoteConfig.decode(Array(bytes))
                        #expect(config.presence.enterHoldMs == 3000)
                    }
                }
                for bad in ["0", "abc", "1001"] {
                    let problem = try await client.send(
                        .get, "/v1/devices/config", key: credentials.token,
                        headers: [.deviceId: device, DeviceConfigurationControllerHeader.name: bad]
                    ).problem(.badRequest)
                    #expect(problem.errors?.first?.field == HTTPHeader.configSchema)
                }
            }
        }
    }
}

enum DeviceConfigurationControllerHeader {
    static let name = HTTPFields.Element.Name(HTTPHeader.configSchema)!
}
