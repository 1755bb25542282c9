import AttendanceCtlCommands
import AttendanceProtocol
import Foundation
import RegistryClient
import Testing

/// The command line → the request the registry receives, through a fake transport.
@Suite("Registry command arguments")
struct ArgumentParsingTests {
    @Test func siteCreateSendsTimezoneGeofenceAndShift() async throws {
        let transport = FakeTransport(status: 201, json: SampleJSON.site)
        let run = await runCLI(
            [
                "registry", "sites", "create", "--org", "org-1", "--name", "HQ", "--timezone", "Asia/Ho_Chi_Minh",
                "--latitude", "10.7769", "--longitude", "106.7009", "--radius", "250", "--shift-start", "08:30", "--shift-end", "17:30",
                "--late-grace", "15", "--api-key", "brk_k.s",
            ], transport: transport)
        #expect(run.code == 0, "\(run)")
        let request = try #require(transport.requests.first)
        #expect(request.method == .post && request.path == "/v1/admin/sites" && request.apiKey == "brk_k.s")
        let body = try transport.onlyBody()
        #expect(body["organizationId"] as? String == "org-1")
        #expect(body["timezone"] as? String == "Asia/Ho_Chi_Minh")
        #expect(body["id"] == nil)
        let geofence = try #require(body["geofence"] as? [String: Any])
        #expect(geofence["latitude"] as? Double == 10.7769 && geofence["radiusMeters"] as? Double == 250)
        let shift = try #require(body["shift"] as? [String: Any])
        #expect(shift["start"] as? String == "08:30" && shift["end"] as? String == "17:30")
        #expect(shift["lateEntryGraceMinutes"] as? Int == 15)
        #expect(shift["checkInBeforeStartMinutes"] as? Int == 60 && shift["earlyExitGraceMinutes"] as? Int == 5)
        // The table.
        #expect(try run.field("shift") == "08:30-17:30")
        #expect(try run.field("geofence") == "10.7769, 106.7009 within 200 m")
        #expect(try run.field("timezone") == "Asia/Ho_Chi_Minh")
    }

    /// Sydney and São Paulo: a minus sign starts the value, not an option.
    @Test func aSouthernOrWesternSiteIsTypedWithAMinusSign() async throws {
        let transport = FakeTransport(status: 201, json: SampleJSON.site)
        let run = await runCLI(
            [
                "registry", "sites", "create", "--org", "org-1", "--name", "Harbour", "--timezone", "Australia/Sydney",
                "--latitude", "-33.86", "--longitude", "-46.63", "--shift-start", "08:30", "--shift-end", "17:30", "--api-key", "brk_k.s",
            ], transport: transport)
        #expect(run.code == 0, "\(run)")
        let geofence = try #require(try transport.onlyBody()["geofence"] as? [String: Any])
        #expect(geofence["latitude"] as? Double == -33.86 && geofence["longitude"] as? Double == -46.63)
    }

    @Test func urlAndKeyComeFromTheEnvironmentUnlessGiven() async throws {
        let environment = ["REGISTRY_URL": "http://registry.test:9000/", "ATTENDANCE_API_KEY": "env-key"]
        let fromEnvironment = FakeTransport(json: SampleJSON.organization)
        #expect(await runCLI(["registry", "orgs", "get", "org-1"], environment: environment, transport: fromEnvironment).code == 0)
        #expect(fromEnvironment.baseURLs == ["http://registry.test:9000"])
        #expect(fromEnvironment.requests.first?.apiKey == "env-key")

        let fromFlags = FakeTransport(json: SampleJSON.organization)
        let run = await runCLI(
            ["registry", "orgs", "get", "org-1", "--url", "http://127.0.0.1:18083", "--api-key", "flag-key"],
            environment: environment, transport: fromFlags
        )
        #expect(run.code == 0)
        #expect(fromFlags.baseURLs == ["http://127.0.0.1:18083"])
        #expect(fromFlags.requests.first?.apiKey == "flag-key")

        let byDefault = FakeTransport(json: SampleJSON.organization)
        #expect(await runCLI(["registry", "orgs", "get", "org-1", "--api-key", "k"], transport: byDefault).code == 0)
        #expect(byDefault.baseURLs == [RegistryClient.defaultURL])
    }

    @Test func aMissingAPIKeyIsExplainedAndNothingIsSent() async {
        let transport = FakeTransport(json: SampleJSON.organization)
        let run = await runCLI(["registry", "orgs", "create", "--name", "Acme"], transport: transport)
        #expect(run.code == 1)
        #expect(run.stderr.hasPrefix("Error: no API key: pass --api-key KEY or set ATTENDANCE_API_KEY"))
        #expect(!run.stderr.contains("\n"))
        #expect(transport.requests.isEmpty)
    }

    @Test func enrollingADeviceNeedsNoAPIKey() async throws {
        let transport = FakeTransport(
            status: 201,
            json: """
                {"device":{"enrolledAt":"2025-09-18T08:30:00.000Z","id":"dev-1","model":"Pixel 8","status":"enrolled","tokenExpiresAt":"2026-09-18T08:30:00.000Z",\
                "tokenKeyId":"k1","userId":"u-1"},"deviceId":"dev-1","token":"v1.abc.def","tokenExpiresAt":"2026-09-18T08:30:00.000Z","userId":"u-1"}
                """)
        let run = await runCLI(["registry", "devices", "enroll", "--code", "ABCDE-FGHJK", "--model", "Pixel 8"], transport: transport)
        #expect(run.code == 0, "\(run)")
        let request = try #require(transport.requests.first)
        #expect(request.path == "/v1/devices/enroll" && request.apiKey == nil)
        #expect(try transport.onlyBody()["code"] as? String == "ABCDE-FGHJK")
        #expect(try run.field("token") == "v1.abc.def")
    }

    @Test func beaconOptionsAndQueries() async throws {
        let register = FakeTransport(status: 201, json: SampleJSON.beacon)
        let run = await runCLI(
            [
                "registry", "beacons", "register", "--gate", "gate-1", "--uuid", "e2c56db5dffb48d2b060d0f5a71096e0", "--major", "7",
                "--minor", "3", "--tx-power", "-59", "--battery-replaced-on", "2025-09-18", "--api-key", "k",
            ], transport: register)
        #expect(run.code == 0, "\(run)")
        let body = try register.onlyBody()
        #expect(body["gateId"] as? String == "gate-1" && body["major"] as? Int == 7 && body["minor"] as? Int == 3)
        #expect(body["txPower"] as? Int == -59 && body["batteryReplacedOn"] as? String == "2025-09-18")
        #expect(body["mac"] == nil)

        let status = FakeTransport(json: SampleJSON.beacon)
        #expect(await runCLI(["registry", "beacons", "set-status", "bcn-1", "lost", "--api-key", "k"], transport: status).code == 0)
        #expect(status.requests.first?.method == .patch && status.requests.first?.path == "/v1/admin/beacons/bcn-1")
        #expect(try status.onlyBody()["status"] as? String == "lost")

        let rotation = FakeTransport(json: #"{"beaconId":"bcn-1","version":3,"rotatedAt":"2026-11-22T10:00:00.000Z"}"#)
        let rotated = await runCLI(["registry", "beacons", "rotate-key", "bcn-1", "--api-key", "k"], transport: rotation)
        #expect(rotated.code == 0, "\(rotated)")
        #expect(rotation.requests.first?.method == .post && rotation.requests.first?.path == "/v1/admin/beacons/bcn-1/gatt-key/rotate")
        #expect(try rotated.field("key version") == "3")
        #expect(try rotated.field("previous key") == "stopped verifying")

        let graced = FakeTransport(
            json:
                #"{"beaconId":"bcn-1","version":4,"rotatedAt":"2026-11-22T10:00:00.000Z","previousKeyValidUntil":"2026-11-23T10:00:00.000Z"}"#
        )
        let rotatedWithGrace = await runCLI(
            ["registry", "beacons", "rotate-key", "bcn-1", "--grace-hours", "24", "--force", "--api-key", "k"], transport: graced)
        #expect(rotatedWithGrace.code == 0, "\(rotatedWithGrace)")
        #expect(graced.requests.first?.target == "/v1/admin/beacons/bcn-1/gatt-key/rotate?force=true&graceHours=24")
        #expect(try rotatedWithGrace.field("previous key").hasPrefix("verifies until 2026-11-23"))
        let outOfRange = FakeTransport(json: "{}")
        let refused = await runCLI(
            ["registry", "beacons", "rotate-key", "bcn-1", "--grace-hours", "721", "--api-key", "k"], transport: outOfRange)
        #expect(refused.code != 0 && refused.stderr.contains("--grace-hours must be 0-720"))
        #expect(outOfRange.requests.isEmpty)

        let plan = FakeTransport { _ in .failure(.unreachable(url: "x", reason: "not needed")) }
        _ = await runCLI(
            ["registry", "beacons", "plan", "bcn 1", "--tx-power-index", "2", "--device-name", "Lobby 1", "--api-key", "k"], transport: plan
        )
        #expect(plan.requests.first?.target == "/v1/admin/beacons/bcn%201/provisioning-plan?deviceName=Lobby%201&txPowerIndex=2")

        let list = FakeTransport(json: #"{"items":[],"nextCursor":"YzE6Yg"}"#)
        let listed = await runCLI(
            ["registry", "beacons", "list", "--site", "site-1", "--limit", "2", "--cursor", "YzE6YQ", "--api-key", "k"], transport: list)
        #expect(list.requests.first?.target == "/v1/admin/sites/site-1/beacons?cursor=YzE6YQ&limit=2")
        #expect(listed.stdout == "ID  UUID  MAJOR  MINOR  STATUS  GATE  SERIAL\n(none)\n\nmore: --cursor YzE6Yg")
    }

    @Test func lookupCommandsQueryTheCacheRoutes() async throws {
        let json =
            #"{"beaconId":"bcn-1","uuid":"8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34","major":7,"minor":3,"status":"active","gateId":"gate-1","siteId":"site-1","organizationId":"org-1"}"#
        let beacon = FakeTransport(json: json)
        let found = await runCLI(
            ["registry", "lookup", "beacon", "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34", "7", "3", "--api-key", "k"], transport: beacon)
        #expect(found.code == 0, "\(found)")
        #expect(beacon.requests.first?.path == "/v1/admin/lookup/beacon")
        #expect(try found.field("site") == "site-1" && found.field("status") == "active")

        let mac = FakeTransport(json: json)
        #expect(await runCLI(["registry", "lookup", "mac", "ac-23-3f-a1-b2-c3", "--api-key", "k"], transport: mac).code == 0)
        #expect(mac.requests.first?.path == "/v1/admin/lookup/mac/ac-23-3f-a1-b2-c3")

        let byUUID = FakeTransport(json: #"{"uuid":"U","beacons":[\#(json)]}"#)
        let listed = await runCLI(["registry", "lookup", "uuid", "U", "--api-key", "k"], transport: byUUID)
        #expect(listed.stdout.contains("bcn-1") && listed.stdout.hasPrefix("MAJOR"), "\(listed)")

        let business = FakeTransport(json: #"{"uuid":"U","major":7,"organizationId":"org-1","organizationName":"Acme"}"#)
        let owner = await runCLI(["registry", "lookup", "business", "U", "7", "--api-key", "k"], transport: business)
        #expect(try owner.field("name") == "Acme", "\(owner)")

        let notNumber = await runCLI(
            ["registry", "lookup", "beacon", "U", "seven", "3", "--api-key", "k"], transport: FakeTransport(json: "{}"))
        #expect(notNumber.code == 64 && !notNumber.stderr.contains("\n"), "\(notNumber)")
    }

    @Test func jsonPrintsTheRegistrysAnswerVerbatim() async {
        let transport = FakeTransport(json: SampleJSON.organization)
        let run = await runCLI(["registry", "orgs", "get", "org-1", "--api-key", "k", "--json"], transport: transport)
        #expect(run.stdout == SampleJSON.organization)
    }

    @Test(arguments: [
        (["registry", "orgs", "create", "--api-key", "k"], "Missing expected argument '--name <name>'"),
        (["registry", "beacons", "register", "--gate", "g", "--uuid", "u", "--major", "seven", "--minor", "1", "--api-key", "k"], "seven"),
        (["registry", "beacons", "set-status", "bcn-1", "broken", "--api-key", "k"], "broken"),
        (["registry", "api-keys", "create", "--name", "ci", "--role", "root", "--api-key", "k"], "root"),
        (
            [
                "registry", "beacons", "record-sighting", "--uuid", "u", "--major", "1", "--minor", "1", "--device", "d", "--seen-at",
                "yesterday",
            ], "RFC 3339"
        ),
        (["registry", "sites", "get"], "Missing expected argument '<id>'"),
        (
            [
                "registry", "sites", "create", "--org", "o", "--name", "HQ", "--timezone", "UTC", "--latitude", "nan", "--longitude",
                "1", "--shift-start", "08:00", "--shift-end", "17:00", "--api-key", "k",
            ], "--latitude must be a finite number"
        ),
        (["registry", "sites", "set-geofence", "s", "--latitude", "10", "--longitude", "106", "--api-key", "k"], "--radius"),
        (
            ["registry", "sites", "set-geofence", "s", "--latitude", "10", "--longitude", "inf", "--radius", "200", "--api-key", "k"],
            "--longitude must be a finite number"
        ),
        (["registry", "frobnicate"], "frobnicate"),
    ])
    func malformedArgumentsAreOneLineAndExit64(arguments: [String], expected: String) async {
        let transport = FakeTransport(json: "{}")
        let run = await runCLI(arguments, transport: transport)
        #expect(run.code == 64, "\(run)")
        #expect(run.stderr.hasPrefix("Error: ") && run.stderr.contains(expected), "\(run.stderr)")
        #expect(!run.stderr.contains("\n"), "\(run.stderr)")
        #expect(transport.requests.isEmpty)
    }

    /// Negative numbers are values, not options.
    @Test func negativePowerValues() async throws {
        let transport = FakeTransport { _ in .failure(.unreachable(url: "x", reason: "not needed")) }
        _ = await runCLI(["registry", "beacons", "plan", "b1", "--measured-power", "-62", "--api-key", "k"], transport: transport)
        #expect(transport.requests.first?.query["measuredPower"] == "-62")
    }

    @Test func anInvalidURLIsRefusedBeforeSending() async {
        let transport = FakeTransport(json: "{}")
        let run = await runCLI(["registry", "orgs", "list", "--url", "localhost:8083", "--api-key", "k"], transport: transport)
        #expect(run.code == 1)
        #expect(run.stderr == "Error: invalid registry URL \"localhost:8083\": expected http://HOST:PORT (--url or REGISTRY_URL)")
        #expect(transport.requests.isEmpty)
    }

    @Test func helpGoesToStdoutAndExitsZero() async {
        let run = await runCLI(["registry", "beacons", "plan", "--help"])
        #expect(run.code == 0)
        #expect(run.stdout.contains("--tx-power-index") && run.stdout.contains("--api-key") && run.stdout.contains("--json"))
        #expect(run.stderr.isEmpty)
    }
}
