import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryServiceTests {
    /// Bad JSON, missing fields, wrong types, out-of-range values and unknown ids on every endpoint:
    /// each is a clear 4xx problem+json (never a 500), and none writes anything.
    @Suite("Malformed input", .serialized)
    struct MalformedInputTests {
        struct Case: Sendable {
            var method: HTTPRequest.Method
            var path: String
            var body: String?
            var status: HTTPResponse.Status
            /// A field the problem's `errors` must name (400s).
            var field: String?
            var key: Key = .admin
            enum Key: Sendable { case admin, none }
        }

        /// Query parameters are checked strictly: an unknown, repeated or blank one is a 400 naming it.
        static func strictQueryCases(beaconId: String, missing: String, uuid: String) -> [Case] {
            [
                ("/v1/admin/organizations?lmit=5", "lmit"), ("/v1/admin/organizations?limit=5&limit=6", "limit"),
                ("/v1/admin/organizations?cursor=", "cursor"), ("/v1/admin/sites/\(missing)/beacons?sort=name", "sort"),
                ("/v1/admin/beacons/\(beaconId)/verification?within=5", "within"),
                ("/v1/admin/beacons/\(beaconId)/provisioning-plan?txPower=5", "txPower"),
                ("/v1/admin/beacons/\(beaconId)/provisioning-plan?deviceName=%20%20", "deviceName"),
                ("/v1/admin/lookup/beacon?uuid=\(uuid)&major=1&minor=1&mac=x", "mac"),
                ("/v1/admin/lookup/business?uuid=\(uuid)&major=1&minor=1", "minor"),
            ].map { Case(method: .get, path: $0.0, status: .badRequest, field: $0.1) }
                // An id in the path that no stored id can have is a 400 naming it, not a lookup that finds nothing.
                + [
                    "/v1/admin/organizations/\(String(repeating: "o", count: 300))", "/v1/admin/sites/-site",
                    "/v1/admin/sites/a%20b/gates", "/v1/admin/users/u%3Bx", "/v1/admin/beacons/%2E%2E",
                    "/v1/admin/devices/\(String(repeating: "d", count: 129))",
                ].map { Case(method: .get, path: $0, status: .badRequest, field: "id") }
                + [Case(method: .post, path: "/v1/admin/api-keys/-key/revoke", status: .badRequest, field: "id")]
        }

        /// An opaque page cursor carrying `text` (base64url without padding).
        static func cursor(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }

        static func cases(t: String, f: RegistryFixture, beaconId: String) -> [Case] {
            let org = f.organization.id, site = f.site.id, gate = f.gate.id, user = f.user.id
            let missing = "missing-\(t)"
            let uuid = allowedUUID().uuidString
            func siteBody(_ change: (inout [String: Any]) -> Void) -> String {
                var body: [String: Any] = [
                    "id": "site-\(t)", "organizationId": org, "name": "Site \(t)", "timezone": "Asia/Ho_Chi_Minh",
                    "geofence": ["latitude": 10.7, "longitude": 106.7, "radiusMeters": 200],
                    "shift": [
                        "start": "08:30", "end": "17:30", "checkInBeforeStartMinutes": 60, "checkOutAfterEndMinutes": 60,
                        "lateEntryGraceMinutes": 5, "earlyExitGraceMinutes": 5,
                    ],
                ]
                change(&body)
                return String(decoding: try! JSONSerialization.data(withJSONObject: body), as: UTF8.self)
            }
            /// A site whose shift has `changes` over the default one.
            func siteBody(shift changes: [String: Any]) -> String {
                siteBody {
                    var shift = $0["shift"] as? [String: Any] ?? [:]
                    shift.merge(changes) { $1 }
                    $0["shift"] = shift
                }
            }
            func beaconBody(_ change: (inout [String: Any]) -> Void) -> String {
                var body: [String: Any] = ["id": "bcn-\(t)", "uuid": uuid, "major": 1, "minor": 1, "gateId": gate, "serial": "S-\(t)"]
                change(&body)
                return String(decoding: try! JSONSerialization.data(withJSONObject: body), as: UTF8.self)
            }
            return [
                // organizations
                Case(method: .post, path: "/v1/admin/organizations", body: #"{"name": "#, status: .badRequest, field: ""),
                Case(method: .post, path: "/v1/admin/organizations", body: nil, status: .badRequest, field: ""),
                Case(method: .post, path: "/v1/admin/organizations", body: "[1,2]", status: .badRequest),
                Case(method: .post, path: "/v1/admin/organizations", body: #"{"id":"org-\#(t)"}"#, status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"id":"org-\#(t)","name":5}"#, status: .badRequest,
                    field: "name"),
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"id":"org-\#(t)","name":"   "}"#, status: .badRequest,
                    field: "name"),
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"id":"org \#(t)!","name":"Org \#(t)"}"#, status: .badRequest,
                    field: "id"),
                Case(method: .post, path: "/v1/admin/organizations", body: #"{"id":"\#(org)","name":"Org \#(t)"}"#, status: .conflict),
                Case(method: .get, path: "/v1/admin/organizations?limit=0", status: .badRequest, field: "limit"),
                Case(method: .get, path: "/v1/admin/organizations?cursor=not*a*cursor", status: .badRequest, field: "cursor"),
                Case(method: .get, path: "/v1/admin/organizations/\(missing)", status: .notFound),
                Case(method: .post, path: "/v1/admin/organizations/\(missing)/namespace", status: .notFound),
                Case(method: .post, path: "/v1/admin/organizations/\(org)/namespace", body: "{oops", status: .badRequest, field: ""),
                Case(method: .get, path: "/v1/admin/organizations/\(missing)/sites", status: .notFound),
                Case(method: .get, path: "/v1/admin/organizations/\(org)/sites?limit=201", status: .badRequest, field: "limit"),
                // sites
                Case(method: .post, path: "/v1/admin/sites", body: "{", status: .badRequest, field: ""),
                Case(
                    method: .post, path: "/v1/admin/sites", body: siteBody { $0["geofence"] = nil }, status: .badRequest, field: "geofence"),
                Case(
                    method: .post, path: "/v1/admin/sites",
                    body: siteBody { $0["geofence"] = ["latitude": 10.7, "longitude": 106.7, "radiusMeters": "big"] },
                    status: .badRequest, field: "geofence.radiusMeters"),
                Case(
                    method: .post, path: "/v1/admin/sites",
                    body: siteBody { $0["geofence"] = ["latitude": 91, "longitude": 106.7, "radiusMeters": 5] },
                    status: .badRequest, field: "geofence.latitude"),
                Case(
                    method: .post, path: "/v1/admin/sites", body: siteBody { $0["timezone"] = "Mars/Olympus" }, status: .badRequest,
                    field: "timezone"),
                Case(
                    method: .post, path: "/v1/admin/sites", body: siteBody(shift: ["start": "25:00"]), status: .badRequest,
                    field: "shift.start"),
                Case(
                    method: .post, path: "/v1/admin/sites", body: siteBody(shift: ["checkInBeforeStartMinutes": 2000]), status: .badRequest,
                    field: "shift.checkInBeforeStartMinutes"),
                // 90 minutes of graces in an hour's shift: daily attendance could not judge by it.
                Case(
                    method: .post, path: "/v1/admin/sites",
                    body: siteBody(shift: ["start": "09:00", "end": "10:00", "lateEntryGraceMinutes": 60, "earlyExitGraceMinutes": 30]),
                    status: .badRequest, field: "shift.earlyExitGraceMinutes"),
                Case(method: .post, path: "/v1/admin/sites", body: siteBody { $0["organizationId"] = missing }, status: .notFound),
                Case(method: .post, path: "/v1/admin/sites", body: siteBody { $0["id"] = "default" }, status: .badRequest, field: "id"),
                Case(method: .get, path: "/v1/admin/sites/\(missing)", status: .notFound),
                Case(method: .get, path: "/v1/admin/sites/\(missing)/gates", status: .notFound),
                Case(method: .get, path: "/v1/admin/sites/\(site)/gates?limit=abc", status: .badRequest, field: "limit"),
                Case(method: .get, path: "/v1/admin/sites/\(missing)/beacons", status: .notFound),
                Case(method: .get, path: "/v1/admin/sites/\(site)/beacons?cursor=Zm9v", status: .badRequest, field: "cursor"),
                // gates
                Case(method: .post, path: "/v1/admin/gates", body: "nope", status: .badRequest, field: ""),
                Case(
                    method: .post, path: "/v1/admin/gates", body: #"{"id":"gate-\#(t)","name":"G"}"#, status: .badRequest, field: "siteId"),
                Case(
                    method: .post, path: "/v1/admin/gates", body: #"{"id":"gate-\#(t)","siteId":"\#(site)","name":["G"]}"#,
                    status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/gates", body: #"{"id":"gate-\#(t)","siteId":"\#(site)","name":""}"#,
                    status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/gates", body: #"{"id":"gate-\#(t)","siteId":"\#(missing)","name":"G"}"#,
                    status: .notFound),
                Case(method: .get, path: "/v1/admin/gates/\(missing)", status: .notFound),
                Case(method: .post, path: "/v1/admin/gates/\(missing)/minor", status: .notFound),
                Case(method: .post, path: "/v1/admin/gates/\(gate)/minor", body: "[", status: .badRequest, field: ""),
                // users and enrollment codes
                Case(method: .post, path: "/v1/admin/users", body: "{", status: .badRequest, field: ""),
                Case(method: .post, path: "/v1/admin/users", body: #"{"id":"usr-\#(t)"}"#, status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/users", body: #"{"id":"usr-\#(t)","name":"U","siteIds":"\#(site)"}"#,
                    status: .badRequest, field: "siteIds"),
                Case(
                    method: .post, path: "/v1/admin/users", body: #"{"id":"usr-\#(t)","name":"U","siteIds":[7]}"#, status: .badRequest,
                    field: "siteIds[0]"),
                Case(
                    method: .post, path: "/v1/admin/users", body: #"{"id":"usr-\#(t)","name":"U","siteIds":["\#(missing)"]}"#,
                    status: .notFound),
                Case(method: .post, path: "/v1/admin/users/\(missing)/enrollment-codes", status: .notFound),
                Case(method: .get, path: "/v1/admin/users/\(missing)", status: .notFound),
                Case(method: .put, path: "/v1/admin/users/\(missing)/sites", body: #"{"siteIds":["\#(site)"]}"#, status: .notFound),
                Case(method: .put, path: "/v1/admin/users/\(user)/sites", body: "{}", status: .badRequest, field: "siteIds"),
                Case(
                    method: .put, path: "/v1/admin/users/\(user)/sites", body: #"{"siteIds":"\#(site)"}"#, status: .badRequest,
                    field: "siteIds"),
                Case(
                    method: .put, path: "/v1/admin/users/\(user)/sites", body: #"{"siteIds":["\#(missing)"]}"#, status: .notFound),
                Case(
                    method: .put, path: "/v1/admin/users/\(user)/sites", body: #"{"siteIds":[],"name":"x"}"#, status: .badRequest,
                    field: "name"),
                Case(
                    method: .post, path: "/v1/admin/users/\(user)/enrollment-codes", body: #"{"validityMinutes":0}"#, status: .badRequest,
                    field: "validityMinutes"),
                Case(
                    method: .post, path: "/v1/admin/users/\(user)/enrollment-codes", body: #"{"validityMinutes":"1h"}"#,
                    status: .badRequest, field: "validityMinutes"),
                // beacons
                Case(method: .post, path: "/v1/admin/beacons", body: "{", status: .badRequest, field: ""),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["gateId"] = nil }, status: .badRequest, field: "gateId"),
                Case(method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["major"] = "1" }, status: .badRequest, field: "major"),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["major"] = 70_000 }, status: .badRequest, field: "major"
                ),
                Case(method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["minor"] = -1 }, status: .badRequest, field: "minor"),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["uuid"] = "not-a-uuid" }, status: .badRequest,
                    field: "uuid"),
                Case(method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["mac"] = "AA:BB" }, status: .badRequest, field: "mac"),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["txPower"] = 99 }, status: .badRequest, field: "txPower"
                ),
                // 40 flags are 40 characters but 80 code points, as the database and `maxLength` count.
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["serial"] = String(repeating: "🇻🇳", count: 40) },
                    status: .badRequest, field: "serial"),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["batteryReplacedOn"] = "2025-13-01" },
                    status: .badRequest, field: "batteryReplacedOn"),
                Case(method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["gateId"] = missing }, status: .notFound),
                Case(method: .get, path: "/v1/admin/beacons/\(missing)", status: .notFound),
                Case(
                    method: .patch, path: "/v1/admin/beacons/\(beaconId)", body: #"{"status":"broken"}"#, status: .badRequest,
                    field: "status"),
                Case(method: .patch, path: "/v1/admin/beacons/\(beaconId)", body: "{}", status: .badRequest, field: "status"),
                Case(method: .patch, path: "/v1/admin/beacons/\(beaconId)", body: nil, status: .badRequest, field: ""),
                Case(method: .patch, path: "/v1/admin/beacons/\(missing)", body: #"{"status":"lost"}"#, status: .notFound),
                Case(method: .get, path: "/v1/admin/beacons/\(missing)/provisioning-plan", status: .notFound),
                Case(
                    method: .get, path: "/v1/admin/beacons/\(beaconId)/provisioning-plan?txPowerIndex=9", status: .badRequest,
                    field: "txPowerIndex"),
                Case(
                    method: .get, path: "/v1/admin/beacons/\(beaconId)/provisioning-plan?deviceName=ThisNameIsFarTooLongForACP28",
                    status: .badRequest),
                Case(method: .get, path: "/v1/admin/beacons/\(missing)/verification", status: .notFound),
                Case(
                    method: .get, path: "/v1/admin/beacons/\(beaconId)/verification?withinMinutes=0", status: .badRequest,
                    field: "withinMinutes"),
                Case(
                    method: .get, path: "/v1/admin/beacons/\(beaconId)/verification?withinMinutes=1441", status: .badRequest,
                    field: "withinMinutes"),
                // sightings
                Case(method: .post, path: "/v1/admin/sightings", body: "{", status: .badRequest, field: ""),
                Case(
                    method: .post, path: "/v1/admin/sightings", body: #"{"beacon":{"uuid":"\#(uuid)","major":1,"minor":1}}"#,
                    status: .badRequest, field: "deviceId"),
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"\#(uuid)","major":70000,"minor":1},"deviceId":"dev-\#(t)"}"#,
                    status: .badRequest, field: "beacon.major"),
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"zz","major":1,"minor":1},"deviceId":"dev-\#(t)"}"#,
                    status: .badRequest, field: "beacon.uuid"),
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"\#(uuid)","major":1,"minor":1},"deviceId":"dev-\#(t)","seenAt":"yesterday"}"#,
                    status: .badRequest, field: "seenAt"),
                // a time far ahead would keep the beacon "verified" for years; a year-old one is no proof
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"\#(uuid)","major":1,"minor":1},"deviceId":"dev-\#(t)","seenAt":"2099-01-01T00:00:00Z"}"#,
                    status: .badRequest, field: "seenAt"),
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"\#(uuid)","major":1,"minor":1},"deviceId":"dev-\#(t)","seenAt":"2001-01-01T00:00:00Z"}"#,
                    status: .badRequest, field: "seenAt"),
                // devices
                Case(method: .post, path: "/v1/devices/enroll", body: "{", status: .badRequest, field: "", key: .none),
                Case(
                    method: .post, path: "/v1/devices/enroll", body: #"{"model":"Pixel"}"#, status: .badRequest, field: "code", key: .none),
                Case(method: .post, path: "/v1/devices/enroll", body: #"{"code":12345}"#, status: .badRequest, field: "code", key: .none),
                Case(method: .post, path: "/v1/devices/enroll", body: #"{"code":"ABCD-EFGH-JKLM"}"#, status: .unauthorized, key: .none),
                Case(method: .get, path: "/v1/admin/devices/\(missing)", status: .notFound),
                Case(method: .post, path: "/v1/admin/devices/\(missing)/revoke", status: .notFound),
                // API keys
                Case(method: .post, path: "/v1/admin/api-keys", body: "{", status: .badRequest, field: ""),
                Case(method: .post, path: "/v1/admin/api-keys", body: #"{"name":"k-\#(t)"}"#, status: .badRequest, field: "role"),
                Case(
                    method: .post, path: "/v1/admin/api-keys", body: #"{"name":"k-\#(t)","role":"superuser"}"#, status: .badRequest,
                    field: "role"),
                Case(method: .post, path: "/v1/admin/api-keys", body: #"{"name":"","role":"viewer"}"#, status: .badRequest, field: "name"),
                // a field the request does not have is refused by name, at any depth (never ignored)
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"name":"Org \#(t)","nmae":"typo"}"#, status: .badRequest,
                    field: "nmae"),
                Case(
                    method: .post, path: "/v1/admin/sites",
                    body: siteBody { $0["geofence"] = ["latitude": 10.7, "longitude": 106.7, "radiusMeters": 200, "radius": 5] },
                    status: .badRequest, field: "geofence.radius"),
                Case(
                    method: .post, path: "/v1/admin/api-keys", body: #"{"name":"k-\#(t)","role":"viewer","expires":"never"}"#,
                    status: .badRequest, field: "expires"),
                Case(
                    method: .post, path: "/v1/admin/sightings",
                    body: #"{"beacon":{"uuid":"\#(uuid)","major":1,"minor":1,"rssi":-60},"deviceId":"dev-\#(t)"}"#,
                    status: .badRequest, field: "beacon.rssi"),
                // A phone's unknown member is ignored (a newer app, an older registry): the code decides.
                Case(
                    method: .post, path: "/v1/devices/enroll", body: #"{"code":"ABCDE-FGHJK","platform":"ios"}"#, status: .unauthorized,
                    key: .none),
                // a MAC's separators sit between octets; a time of day and a date are digits
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["mac"] = "AABB:CC:DD:EE:F:F" }, status: .badRequest,
                    field: "mac"),
                Case(
                    method: .post, path: "/v1/admin/beacons", body: beaconBody { $0["batteryReplacedOn"] = "+202-01-01" },
                    status: .badRequest, field: "batteryReplacedOn"),
                Case(
                    method: .post, path: "/v1/admin/sites",
                    body: siteBody {
                        $0["shift"] = [
                            "start": "+8:30", "end": "17:30", "checkInBeforeStartMinutes": 60, "checkOutAfterEndMinutes": 60,
                            "lateEntryGraceMinutes": 5, "earlyExitGraceMinutes": 5,
                        ]
                    }, status: .badRequest, field: "shift.start"),
                Case(method: .post, path: "/v1/admin/api-keys/\(missing)/revoke", status: .notFound),
                // control characters, refused at the edge with the field named (a NUL used to reach
                // PostgreSQL and come back as a 503 with the database's message)
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"id":"org-n-\#(t)","name":"x\u0000"}"#, status: .badRequest,
                    field: "name"),
                Case(
                    method: .post, path: "/v1/admin/organizations", body: #"{"id":"org-n-\#(t)","name":"line\nbreak"}"#,
                    status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/users", body: #"{"id":"usr-n-\#(t)","name":"U","siteIds":["\#(site)\u0000"]}"#,
                    status: .badRequest, field: "siteIds[0]"),
                Case(
                    method: .post, path: "/v1/admin/gates", body: #"{"id":"gate-n-\#(t)","siteId":"\#(site)","name":"G\u001f"}"#,
                    status: .badRequest, field: "name"),
                Case(
                    method: .post, path: "/v1/admin/api-keys", body: #"{"name":"k\u007f","role":"viewer"}"#, status: .badRequest,
                    field: "name"),
                Case(
                    method: .get, path: "/v1/admin/organizations?cursor=\(Self.cursor("c1:a\u{0}b"))", status: .badRequest, field: "cursor"),
                Case(method: .get, path: "/v1/admin/organizations/a%00b", status: .badRequest, field: "path"),
                Case(method: .get, path: "/v1/admin/organizations?limit=1%00", status: .badRequest, field: "limit"),
                // unknown routes
                Case(method: .get, path: "/v1/admin/nothing-here", status: .notFound),
            ] + strictQueryCases(beaconId: beaconId, missing: missing, uuid: uuid)
        }

        @Test func everyEndpointAnswersBadInputWithAProblemAndWritesNothing() async throws {
            try await Harness.run { h, client in
                let t = token()
                let f = try await RegistryFixture.make(h.repository)
                let beacon = try await h.repository.registerBeacon(
                    NewBeacon(uuid: allowedUUID().uuidString, major: 2, minor: 2, gateId: f.gate.id))
                let cases = Self.cases(t: t, f: f, beaconId: beacon.id)
                // Every endpoint has at least one case.
                let covered = Set(cases.map { "\($0.method) " + $0.path.split(separator: "?")[0] })
                #expect(cases.count >= 80 && covered.count >= 26, "\(cases.count) cases over \(covered.count) routes")
                for c in cases {
                    let response = try await client.send(c.method, c.path, key: c.key == .admin ? h.admin : nil, json: c.body)
                    let label = "\(c.method) \(c.path) \(c.body ?? "-")"
                    #expect(response.status == c.status, "\(label) -> \(response.status) \(response.text)")
                    #expect(response.headers[.contentType] == ProblemDetails.mediaType, "\(label)")
                    guard let problem = try? JSONDecoder().decode(ProblemDetails.self, from: Data(response.text.utf8)) else {
                        Issue.record("\(label): not problem+json: \(response.text)")
                        continue
                    }
                    #expect(problem.status == c.status.code, "\(label)")
                    #expect(problem.detail?.isEmpty == false, "\(label)")
                    if let field = c.field {
                        #expect(problem.errors?.contains { $0.field == field } == true, "\(label): \(problem)")
                    }
                }
                // Nothing written: no entity with this test's ids or names, nothing under the fixture.
                let like = "%\(t)%"
                #expect(
                    try await h.count("SELECT count(*)::int FROM organizations WHERE id LIKE \(like) OR name LIKE \(like)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM sites WHERE id LIKE \(like) OR name LIKE \(like)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM gates WHERE id LIKE \(like) OR site_id = \(f.site.id)") == 1)
                #expect(try await h.count("SELECT count(*)::int FROM users WHERE id LIKE \(like)") == 0)
                #expect(
                    try await h.count("SELECT count(*)::int FROM beacons WHERE id LIKE \(like) OR gate_id = \(f.gate.id)") == 1)
                #expect(try await h.count("SELECT count(*)::int FROM beacon_sightings WHERE device_id LIKE \(like)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM api_keys WHERE name LIKE \(like)") == 0)
                #expect(
                    try await h.count("SELECT count(*)::int FROM namespaces WHERE organization_id = \(f.organization.id)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM minor_allocations WHERE gate_id = \(f.gate.id)") == 0)
                #expect(try await h.count("SELECT count(*)::int FROM enrollment_codes WHERE user_id = \(f.user.id)") == 0)
                let unchanged = try await h.repository.beacon(id: beacon.id)
                #expect(unchanged.status == .active)
            }
        }

        @Test func bodyOverTheLimitIs413() async throws {
            try await Harness.run { h, client in
                let t = token()
                let name = String(repeating: "x", count: RegistryLimits.maxBodyBytes)
                let response = try await client.send(.post, "/v1/admin/organizations", key: h.admin, json: #"{"name":"\#(t)\#(name)"}"#)
                let problem = try response.problem(.contentTooLarge)
                #expect(problem.problemType == .payloadTooLarge)
                #expect(try await h.count("SELECT count(*)::int FROM organizations WHERE name LIKE \(t + "%")") == 0)
            }
        }

        @Test func bannedUUIDIs422NamingTheVendor() async throws {
            try await Harness.run { h, client in
                let f = try await RegistryFixture.make(h.repository)
                for entry in BanList.entries {
                    let uuid = entry.prefix + "-A4E2-4FB1-AFCF-C6EB07647825"
                    let response = try await client.send(
                        .post, "/v1/admin/beacons", key: h.installer,
                        json: #"{"uuid":"\#(uuid)","major":1,"minor":1,"gateId":"\#(f.gate.id)"}"#
                    )
                    let problem = try response.problem(.unprocessableContent)
                    #expect(problem.problemType == .bannedBeaconUUID)
                    #expect(problem.detail?.contains(entry.vendor) == true, "\(problem)")
                    #expect(problem.errors?.first?.field == "uuid")
                }
                #expect(try await h.count("SELECT count(*)::int FROM beacons WHERE gate_id = \(f.gate.id)") == 0)
            }
        }
    }
}
