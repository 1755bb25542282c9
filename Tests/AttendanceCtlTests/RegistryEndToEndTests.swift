import AccessControl
import AttendanceCtlCommands
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryService
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Logging
import PostgresNIO
import Prometheus
import RegistryClient
import ServiceRuntime
import Testing

/// The real registry HTTP server (`buildApplication`) on a free port over the real local
/// PostgreSQL, with a fresh API key per role, driven through `attendancectl registry ...`.
struct LiveRegistry: Sendable {
    let url: String
    let admin: String
    let installer: String
    let viewer: String

    static let logger = LocalStack.logger(label: "attendancectl-tests")

    static func run(_ body: @escaping @Sendable (LiveRegistry) async throws -> Void) async throws {
        try LocalStack.ensureStarted()
        let configuration = try LocalStack.serviceConfiguration(service: "beacon-registry")
        let signer = try DeviceTokenSigner(activeKey: try DeviceSigningKey(id: "ctl-test", secret: Array(repeating: 7, count: 32)))
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_ctl") { postgres, _ in
            let repository = PostgresRegistryRepository(
                client: postgres, logger: logger, tokenSigner: signer,
                beaconKeySealer: BeaconKeySealer(sealingKey: Array("attendancectl-tests-seal-key-32b".utf8)))
            let admin = try await repository.createAPIKey(name: "ctl-test admin", role: .admin).secret
            let installer = try await repository.createAPIKey(name: "ctl-test installer", role: .installer).secret
            let viewer = try await repository.createAPIKey(name: "ctl-test viewer", role: .viewer).secret
            let app = buildApplication(
                configuration: configuration, repository: repository, devices: DeviceAuthentication(signer: signer),
                readiness: [PostgresReadinessCheck(client: postgres)],
                metrics: PrometheusCollectorRegistry(), logger: logger
            )
            try await app.test(.live) { client in
                let port = try #require(client.port)
                try await body(LiveRegistry(url: "http://127.0.0.1:\(port)", admin: admin, installer: installer, viewer: viewer))
            }
        }
    }

    /// `attendancectl registry <arguments> --url <live> [--api-key key]`.
    func ctl(_ arguments: [String], key: String?) async -> CLIRun {
        await runCLI(["registry"] + arguments + ["--url", url] + (key.map { ["--api-key", $0] } ?? []))
    }
}

func shortToken() -> String { String(UUID().uuidString.prefix(8)).lowercased() }

/// A MAC no other run registered (the database is shared by every run).
func randomMAC() -> String {
    (0..<6).map { _ in String(format: "%02X", UInt8.random(in: 0...255)) }.joined(separator: ":")
}

@Suite("attendancectl registry against the live registry", .serialized)
struct RegistryEndToEndTests {
    /// org → namespace → site → gate → minor → beacon → plan → user → enrollment code → enroll →
    /// revoke, reading the tables as an operator would.
    @Test func installingABeaconAndEnrollingAPhoneWithTables() async throws {
        try await LiveRegistry.run { r in
            let t = shortToken()
            let org = await r.ctl(["organizations", "create", "--name", "Acme \(t)"], key: r.admin)
            #expect(org.code == 0, "\(org)")
            let orgId = try org.field("id")
            #expect(try org.field("name") == "Acme \(t)")

            let namespace = await r.ctl(["namespaces", "allocate", orgId], key: r.admin)
            let namespaceUUID = try namespace.field("uuid")
            let major = try namespace.field("major")

            let site = await r.ctl(
                [
                    "sites", "create", "--org", orgId, "--name", "HQ", "--timezone", "Asia/Ho_Chi_Minh", "--latitude", "10.7769",
                    "--longitude", "106.7009", "--radius", "200", "--shift-start", "08:30", "--shift-end", "17:30",
                ], key: r.admin)
            #expect(site.code == 0, "\(site)")
            let siteId = try site.field("id")
            #expect(try site.field("shift") == "08:30-17:30")
            #expect(try site.field("geofence") == "10.7769, 106.7009 within 200 m")
            // Entered a few hundred metres off: moved, kept its id; a radius out of range is a 400 naming it.
            let placed = await r.ctl(
                ["sites", "set-geofence", siteId, "--latitude", "10.7772", "--longitude", "-106.7012", "--radius", "250"], key: r.admin)
            #expect(try placed.field("geofence") == "10.7772, -106.7012 within 250 m", "\(placed)")
            #expect(try await r.ctl(["sites", "get", siteId], key: r.viewer).field("geofence") == "10.7772, -106.7012 within 250 m")
            let tooWide = await r.ctl(
                ["sites", "set-geofence", siteId, "--latitude", "10.7772", "--longitude", "106.7012", "--radius", "9000"], key: r.admin)
            #expect(tooWide.code == 1 && tooWide.stderr.contains("radiusMeters"), "\(tooWide)")
            let byAViewer = await r.ctl(
                ["sites", "set-geofence", siteId, "--latitude", "10.7772", "--longitude", "106.7012", "--radius", "250"], key: r.viewer)
            #expect(byAViewer.code == 1 && byAViewer.stderr.contains("(HTTP 403)"), "\(byAViewer)")
            _ = try await r.ctl(
                ["sites", "set-geofence", siteId, "--latitude", "10.7769", "--longitude", "106.7009", "--radius", "200"], key: r.admin
            ).field("geofence")

            let gate = await r.ctl(["gates", "create", "--site", siteId, "--name", "Main entrance"], key: r.installer)
            #expect(gate.code == 0, "\(gate)")
            let gateId = try gate.field("id")

            let minor = await r.ctl(["minors", "allocate", gateId], key: r.installer)
            #expect(minor.code == 0, "\(minor)")
            #expect(try minor.field("uuid") == namespaceUUID && minor.field("major") == major)
            let minorValue = try minor.field("minor")

            let beacon = await r.ctl(
                [
                    "beacons", "register", "--gate", gateId, "--uuid", namespaceUUID, "--major", major, "--minor", minorValue,
                    "--serial", "SN-\(t)", "--tx-power", "-59",
                ], key: r.installer)
            #expect(beacon.code == 0, "\(beacon)")
            let beaconId = try beacon.field("id")
            #expect(try beacon.field("status") == "active")

            let plan = await r.ctl(["beacons", "plan", beaconId, "--device-name", "Gate1"], key: r.viewer)
            #expect(plan.code == 0, "\(plan)")
            #expect(try plan.field("device name") == "Gate1")
            let frameLines = plan.stdout.split(separator: "\n").filter { $0.contains("4E 4F ") }
            #expect(frameLines.count == 24, "\(plan.stdout)")
            let framesOnly = await r.ctl(["beacons", "plan", beaconId, "--device-name", "Gate1", "--frames-only"], key: r.viewer)
            #expect(framesOnly.stdout.split(separator: "\n").count == 24)
            #expect(framesOnly.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("4E 4F ") })
            // The GATT key: in the installer's plan, never in the viewer's.
            #expect(try plan.field("gatt key").hasPrefix("not sent: "), "\(plan)")
            let installerPlan = await r.ctl(["beacons", "plan", beaconId], key: r.installer)
            let keyLine = try installerPlan.field("gatt key")
            #expect(keyLine.hasPrefix("version 1, write after the frames: "))
            let key = await r.ctl(["beacons", "plan", beaconId, "--key-only"], key: r.installer)
            let hex = key.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(key.code == 0 && hex.count == 64 && keyLine.hasSuffix(hex), "\(key)")
            let noKey = await r.ctl(["beacons", "plan", beaconId, "--key-only"], key: r.viewer)
            #expect(noKey.code == 1 && noKey.stderr.contains("carries no GATT key"), "\(noKey)")
            // A rotation points at the command that prints the new key, and that command prints it.
            let rotated = await r.ctl(["beacons", "rotate-key", beaconId, "--grace-hours", "0"], key: r.admin)
            #expect(try rotated.field("next").contains("beacons plan \(beaconId) --key-only"), "\(rotated)")
            let newKey = await r.ctl(["beacons", "plan", beaconId, "--key-only"], key: r.installer)
            let newHex = newKey.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(newKey.code == 0 && newHex.count == 64 && newHex != hex, "\(newKey)")
            #expect(try await r.ctl(["beacons", "plan", beaconId], key: r.installer).field("gatt key").hasPrefix("version 2, "))

            let user = await r.ctl(["users", "create", "--name", "Nguyễn Văn An", "--site", siteId], key: r.admin)
            #expect(user.code == 0, "\(user)")
            let userId = try user.field("id")
            #expect(try user.field("sites") == siteId)
            // Moved to another site and back, keeping the id.
            let annex = try await r.ctl(
                [
                    "sites", "create", "--org", orgId, "--name", "Annex", "--timezone", "Asia/Ho_Chi_Minh", "--latitude", "10.78",
                    "--longitude", "106.70", "--radius", "150", "--shift-start", "08:30", "--shift-end", "17:30",
                ], key: r.admin
            ).field("id")
            let moved = await r.ctl(["users", "set-sites", userId, "--site", annex, "--site", siteId], key: r.admin)
            #expect(moved.code == 0, "\(moved)")
            let both = [annex, siteId].sorted().joined(separator: ", ") // the registry lists them by id
            #expect(try moved.field("sites") == both)
            #expect(try await r.ctl(["users", "get", userId], key: r.viewer).field("sites") == both)
            let notByAViewer = await r.ctl(["users", "set-sites", userId, "--site", siteId], key: r.viewer)
            #expect(notByAViewer.code == 1 && notByAViewer.stderr.contains("(HTTP 403)"), "\(notByAViewer)")
            let neither = await r.ctl(["users", "set-sites", userId], key: r.admin)
            #expect(neither.code != 0 && neither.stderr.contains("--no-sites"), "\(neither)")
            #expect(try await r.ctl(["users", "set-sites", userId, "--site", siteId], key: r.admin).field("sites") == siteId)
            // A misspelt name corrected; a blank one refused, naming the field; a viewer may not.
            let renamed = await r.ctl(["users", "rename", userId, "--name", "Nguyễn Văn Ân"], key: r.admin)
            #expect(try renamed.field("name") == "Nguyễn Văn Ân", "\(renamed)")
            #expect(try await r.ctl(["users", "get", userId], key: r.viewer).field("name") == "Nguyễn Văn Ân")
            let blank = await r.ctl(["users", "rename", userId, "--name", " "], key: r.admin)
            #expect(blank.code == 1 && blank.stderr.contains("name"), "\(blank)")
            let renamedByAViewer = await r.ctl(["users", "rename", userId, "--name", "X"], key: r.viewer)
            #expect(renamedByAViewer.code == 1 && renamedByAViewer.stderr.contains("(HTTP 403)"), "\(renamedByAViewer)")
            let nobody = await r.ctl(["users", "rename", "usr-nobody", "--name", "X"], key: r.admin)
            #expect(nobody.code == 1 && nobody.stderr.contains("(HTTP 404)"), "\(nobody)")

            let code = await r.ctl(["enrollment-codes", "create", "--user", userId, "--validity-minutes", "30"], key: r.admin)
            #expect(code.code == 0, "\(code)")
            let plaintext = try #require(try code.field("code").split(separator: " ").first.map(String.init))

            let enrolled = await r.ctl(
                ["devices", "enroll", "--code", plaintext, "--model", "Pixel 8", "--app-version", "1.2.3"], key: nil)
            #expect(enrolled.code == 0, "\(enrolled)")
            let deviceId = try enrolled.field("device")
            #expect(try enrolled.field("user") == userId && enrolled.field("status") == "enrolled")
            #expect(try enrolled.field("token").hasPrefix("v1."))
            // The code is spent: a second exchange is a conflict, as one line.
            let again = await r.ctl(["devices", "enroll", "--code", plaintext], key: nil)
            #expect(again.code == 1 && again.stderr.contains("(HTTP 409)") && !again.stderr.contains("\n"), "\(again)")

            let revoked = await r.ctl(["devices", "revoke", deviceId], key: r.admin)
            #expect(revoked.code == 0, "\(revoked)")
            #expect(try revoked.field("status") == "revoked")
            #expect(try revoked.field("revoked") != "-")
            let shown = await r.ctl(["devices", "get", deviceId], key: r.viewer)
            #expect(try shown.field("status") == "revoked" && shown.field("model") == "Pixel 8")
            // From the person to their phones, revoked ones included.
            let phones = await r.ctl(["users", "devices", userId], key: r.viewer)
            #expect(phones.code == 0 && phones.stdout.contains(deviceId) && phones.stdout.contains("revoked"), "\(phones)")
            let phonesJSON = try await r.ctl(["users", "devices", userId, "--json"], key: r.viewer).object()
            #expect((phonesJSON["items"] as? [[String: Any]])?.map { $0["id"] as? String } == [deviceId])
            let nobodys = await r.ctl(["users", "devices", "usr-nobody"], key: r.viewer)
            #expect(nobodys.code == 1 && nobodys.stderr.contains("(HTTP 404)"), "\(nobodys)")
        }
    }

    /// The same flow with `--json`, plus every other operation: lists and paging, reads, status,
    /// sighting and verification, API keys, service health.
    @Test func everyOperationWithJSON() async throws {
        try await LiveRegistry.run { r in
            let t = shortToken()
            let org = try await r.ctl(["orgs", "create", "--id", "org-ctl-\(t)", "--name", "Json \(t)", "--json"], key: r.admin).object()
            #expect(org["id"] as? String == "org-ctl-\(t)" && org["createdAt"] is String)
            #expect(try await r.ctl(["orgs", "get", "org-ctl-\(t)", "--json"], key: r.viewer).object()["name"] as? String == "Json \(t)")
            _ = try await r.ctl(["orgs", "create", "--name", "Second \(t)", "--json"], key: r.admin).object()
            let orgs = try await r.ctl(["orgs", "list", "--limit", "1", "--json"], key: r.viewer).object()
            #expect((orgs["items"] as? [Any])?.count == 1)
            let cursor = try #require(orgs["nextCursor"] as? String)
            let second = try await r.ctl(["orgs", "list", "--limit", "1", "--cursor", cursor, "--json"], key: r.viewer).object()
            #expect(
                (second["items"] as? [[String: Any]])?.first?["id"] as? String != (orgs["items"] as? [[String: Any]])?.first?["id"]
                    as? String)
            let table = await r.ctl(["orgs", "list", "--limit", "1"], key: r.viewer)
            #expect(table.stdout.hasPrefix("ID") && table.stdout.contains("more: --cursor "), "\(table)")

            let namespace = try await r.ctl(["namespaces", "allocate", "org-ctl-\(t)", "--json"], key: r.admin).object()
            let site = try await r.ctl(
                [
                    "sites", "create", "--org", "org-ctl-\(t)", "--id", "site-ctl-\(t)", "--name", "Plant", "--timezone", "Europe/Berlin",
                    "--latitude", "52.52", "--longitude", "13.405", "--radius", "300", "--shift-start", "22:00", "--shift-end", "06:00",
                    "--check-in-before", "30", "--check-out-after", "90", "--late-grace", "0", "--early-grace", "0", "--json",
                ], key: r.admin
            ).object()
            #expect(site["timezone"] as? String == "Europe/Berlin")
            #expect((site["shift"] as? [String: Any])?["start"] as? String == "22:00")
            #expect((site["geofence"] as? [String: Any])?["radiusMeters"] as? Double == 300)
            #expect(try await r.ctl(["sites", "get", "site-ctl-\(t)", "--json"], key: r.viewer).object()["name"] as? String == "Plant")
            let sites = try await r.ctl(["sites", "list", "--org", "org-ctl-\(t)", "--json"], key: r.viewer).object()
            #expect((sites["items"] as? [[String: Any]])?.map { $0["id"] as? String } == ["site-ctl-\(t)"])
            // New hours from a day on: the night shift stays the shift of the days before it.
            let day = await r.ctl(
                [
                    "sites", "set-shift", "site-ctl-\(t)", "--shift-start", "06:00", "--shift-end", "14:00", "--from", "2025-10-01",
                ], key: r.admin)
            #expect(try day.field("shift") == "06:00-14:00", "\(day)")
            #expect(try day.field("earlier shifts") == "22:00-06:00 until 2025-10-01", "\(day)")
            // The windows and graces not given stay as the site had them (30 / 90 / 0 / 0).
            #expect(try day.field("check-in from") == "30 min before start" && day.field("late after") == "0 min grace", "\(day)")
            let history = try await r.ctl(["sites", "get", "site-ctl-\(t)", "--json"], key: r.viewer).object()
            #expect((history["shiftHistory"] as? [[String: Any]])?.map { $0["until"] as? String } == ["2025-10-01"])
            let notADay = await r.ctl(
                ["sites", "set-shift", "site-ctl-\(t)", "--shift-start", "06:00", "--shift-end", "14:00", "--from", "2025-02-30"],
                key: r.admin)
            #expect(notADay.code == 64 && notADay.stderr.contains("--from"), "\(notADay)")

            let gate = try await r.ctl(
                ["gates", "create", "--site", "site-ctl-\(t)", "--id", "gate-ctl-\(t)", "--name", "Dock", "--json"], key: r.installer
            ).object()
            #expect(gate["siteId"] as? String == "site-ctl-\(t)")
            #expect(try await r.ctl(["gates", "get", "gate-ctl-\(t)", "--json"], key: r.viewer).object()["name"] as? String == "Dock")
            let gates = try await r.ctl(["gates", "list", "--site", "site-ctl-\(t)", "--json"], key: r.viewer).object()
            #expect((gates["items"] as? [Any])?.count == 1)

            let minor = try await r.ctl(["minors", "allocate", "gate-ctl-\(t)", "--json"], key: r.installer).object()
            #expect(minor["uuid"] as? String == namespace["uuid"] as? String)
            let uuid = try #require(minor["uuid"] as? String)
            let major = try #require(minor["major"] as? Int)
            let minorValue = try #require(minor["minor"] as? Int)

            let beacon = try await r.ctl(
                [
                    "beacons", "register", "--gate", "gate-ctl-\(t)", "--id", "bcn-ctl-\(t)", "--uuid", uuid, "--major", String(major),
                    "--minor", String(minorValue), "--mac", randomMAC(), "--adv-interval-ms", "500",
                    "--battery-replaced-on", "2025-09-18", "--json",
                ], key: r.installer
            ).object()
            #expect(beacon["status"] as? String == "active" && beacon["batteryReplacedOn"] as? String == "2025-09-18")
            #expect(
                try await r.ctl(["beacons", "get", "bcn-ctl-\(t)", "--json"], key: r.viewer).object()["gateId"] as? String
                    == "gate-ctl-\(t)")
            let beacons = try await r.ctl(["beacons", "list", "--site", "site-ctl-\(t)", "--json"], key: r.viewer).object()
            #expect((beacons["items"] as? [[String: Any]])?.map { $0["id"] as? String } == ["bcn-ctl-\(t)"])
            let listed = await r.ctl(["beacons", "list", "--site", "site-ctl-\(t)"], key: r.viewer)
            #expect(listed.stdout.split(separator: "\n").count == 2 && listed.stdout.contains("bcn-ctl-\(t)"), "\(listed)")

            let plan = try await r.ctl(["beacons", "plan", "bcn-ctl-\(t)", "--tx-power-index", "2", "--json"], key: r.viewer).object()
            let frames = try #require(plan["frames"] as? [String])
            #expect(frames.count == 24 && frames.allSatisfy { $0.hasPrefix("4E 4F ") })
            #expect((plan["settings"] as? [String: Any])?["advertisingIntervalUnits"] as? Int == 5)

            let before = try await r.ctl(["beacons", "verify", "bcn-ctl-\(t)", "--within-minutes", "5", "--json"], key: r.viewer).object()
            #expect(before["verified"] as? Bool == false)
            let sighting = await r.ctl(
                [
                    "beacons", "record-sighting", "--uuid", uuid, "--major", String(major), "--minor", String(minorValue), "--device",
                    "dev-\(t)",
                ], key: r.installer)
            #expect(sighting.code == 0 && sighting.stdout == "sighting recorded", "\(sighting)")
            let after = await r.ctl(["beacons", "verify", "bcn-ctl-\(t)"], key: r.viewer)
            #expect(try after.field("verified") == "yes" && after.field("devices") == "1 in the last 15 min", "\(after)")

            let lost = try await r.ctl(["beacons", "set-status", "bcn-ctl-\(t)", "lost", "--json"], key: r.installer).object()
            #expect(lost["status"] as? String == "lost")

            let user = try await r.ctl(
                ["users", "create", "--id", "emp-ctl-\(t)", "--name", "Tran Thi B", "--site", "site-ctl-\(t)", "--json"], key: r.admin
            ).object()
            #expect(user["siteIds"] as? [String] == ["site-ctl-\(t)"])
            let issued = try await r.ctl(["enrollment-codes", "create", "--user", "emp-ctl-\(t)", "--json"], key: r.admin).object()
            let code = try #require(issued["code"] as? String)
            let credentials = try await r.ctl(["devices", "enroll", "--code", code, "--app-version", "2.0", "--json"], key: nil).object()
            let deviceId = try #require(credentials["deviceId"] as? String)
            #expect(credentials["userId"] as? String == "emp-ctl-\(t)" && (credentials["token"] as? String)?.hasPrefix("v1.") == true)
            #expect(try await r.ctl(["devices", "get", deviceId, "--json"], key: r.viewer).object()["status"] as? String == "enrolled")
            // The device's configuration over HTTP, as the app fetches it: tagged, and not sent again
            // while the device holds it.
            let token = try #require(credentials["token"] as? String)
            let registry = try RegistryClient(baseURL: r.url, apiKey: nil)
            let configuration = try await registry.deviceConfiguration(deviceId: deviceId, token: token, configSchema: 1)
            #expect(configuration.value.sites.map(\.site.id) == ["site-ctl-\(t)"])
            let tag = try #require(configuration.eTag)
            #expect(try await registry.deviceConfiguration(deviceId: deviceId, token: token, configSchema: 1, ifNoneMatch: tag) == nil)
            let stale = try await registry.deviceConfiguration(deviceId: deviceId, token: token, configSchema: 1, ifNoneMatch: "\"stale\"")
            #expect(stale?.eTag == tag && stale?.value.deviceId == deviceId)
            // The schema goes out as `X-Config-Schema`: one the registry cannot read is refused.
            do {
                _ = try await registry.deviceConfiguration(deviceId: deviceId, token: token, configSchema: 0)
                Issue.record("X-Config-Schema 0 was not refused")
            } catch {
                guard case RegistryClientError.problem(let problem) = error else { throw error }
                #expect(problem.status == 400 && problem.errors?.first?.field == HTTPHeader.configSchema, "\(problem)")
            }
            let revoked = try await r.ctl(["devices", "revoke", deviceId, "--json"], key: r.admin).object()
            #expect(revoked["status"] as? String == "revoked" && revoked["revokedAt"] is String)

            // API keys: a new viewer key works until it is revoked.
            let key = try await r.ctl(["api-keys", "create", "--name", "ci \(t)", "--role", "viewer", "--json"], key: r.admin).object()
            let secret = try #require(key["secret"] as? String)
            let keyId = try #require((key["key"] as? [String: Any])?["id"] as? String)
            #expect(await r.ctl(["orgs", "get", "org-ctl-\(t)"], key: secret).code == 0)
            let revokedKey = await r.ctl(["api-keys", "revoke", keyId], key: r.admin)
            #expect(try revokedKey.field("role") == "viewer" && revokedKey.field("revoked") != "-", "\(revokedKey)")
            let refused = await r.ctl(["orgs", "get", "org-ctl-\(t)"], key: secret)
            #expect(refused.code == 1 && refused.stderr.contains("(HTTP 401)"), "\(refused)")

            let health = await r.ctl(["service", "health"], key: nil)
            #expect(health.code == 0, "\(health)")
            #expect(health.stdout.contains("ready") && health.stdout.contains("ok"))
            let document = await r.ctl(["service", "openapi"], key: nil)
            #expect(document.stdout.hasPrefix("openapi: 3.1.0"))
            let metrics = await r.ctl(["service", "metrics"], key: nil)
            #expect(metrics.code == 0, "\(metrics)")
        }
    }

    /// An operator sets a site's detection settings from a file, reads them back, and a document the
    /// app would refuse is one line naming each key.
    @Test func settingASitesDetectionSettingsFromAFile() async throws {
        try await LiveRegistry.run { r in
            let t = shortToken()
            let orgId = try await r.ctl(["organizations", "create", "--name", "Detect \(t)"], key: r.admin).field("id")
            let siteId = try await r.ctl(
                [
                    "sites", "create", "--org", orgId, "--name", "HQ \(t)", "--timezone", "Asia/Ho_Chi_Minh", "--latitude", "10.77",
                    "--longitude", "106.70", "--shift-start", "08:30", "--shift-end", "17:30",
                ], key: r.admin
            ).field("id")
            let unset = await r.ctl(["sites", "detection-config", siteId], key: r.viewer)
            #expect(try unset.field("version") == "0 (never set: the app's defaults)" && unset.field("document") == "{}", "\(unset)")

            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("detect-\(t)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let good = directory.appendingPathComponent("hold.json").path
            try #"{"thresholds": {"enter_hold_ms": 3000, "enter_at_once_rssi": -64}}"#.write(
                toFile: good, atomically: true, encoding: .utf8)
            let set = await r.ctl(["sites", "set-detection-config", siteId, "--file", good], key: r.admin)
            #expect(try set.field("version") == "1", "\(set)")
            #expect(try set.field("updated by") == String(r.admin.dropFirst(4).prefix(16)), "\(set)") // the admin key's id
            #expect(try set.field("document") == #"{"thresholds":{"enter_at_once_rssi":-64,"enter_hold_ms":3000}}"#)
            let json = try await r.ctl(["sites", "detection-config", siteId, "--json"], key: r.viewer).object()
            #expect(json["version"] as? Int == 1)
            // Saved as the RUNBOOK says, changed (a kill switch), then set back from the saved answer.
            let saved = directory.appendingPathComponent("saved.json").path
            try await r.ctl(["sites", "detection-config", siteId, "--json"], key: r.viewer).stdout.write(
                toFile: saved, atomically: true, encoding: .utf8)
            let killed = directory.appendingPathComponent("killed.json").path
            try #"{"feature_flags": {"kill_switch": true}}"#.write(toFile: killed, atomically: true, encoding: .utf8)
            #expect(try await r.ctl(["sites", "set-detection-config", siteId, "--file", killed], key: r.admin).field("version") == "2")
            let restored = await r.ctl(["sites", "set-detection-config", siteId, "--file", saved], key: r.admin)
            #expect(try restored.field("version") == "3", "\(restored)")
            #expect(try restored.field("document") == #"{"thresholds":{"enter_at_once_rssi":-64,"enter_hold_ms":3000}}"#, "\(restored)")

            let bad = directory.appendingPathComponent("typo.json").path
            try #"{"thresholds": {"max_stdev_db": 10}, "checkout_triger": "beacon_loss"}"#.write(
                toFile: bad, atomically: true, encoding: .utf8)
            let refused = await r.ctl(["sites", "set-detection-config", siteId, "--file", bad], key: r.admin)
            #expect(refused.code == 1 && refused.stderr.contains("(HTTP 400)"), "\(refused)")
            #expect(refused.stderr.contains("thresholds.max_stdev_db: ") && refused.stderr.contains("checkout_triger: "), "\(refused)")
            #expect(!refused.stderr.contains("\n"))
            let missingFile = await r.ctl(
                ["sites", "set-detection-config", siteId, "--file", directory.appendingPathComponent("none").path], key: r.admin)
            #expect(missingFile.code == 1 && missingFile.stderr.contains("cannot read the detection settings"), "\(missingFile)")
            #expect(try await r.ctl(["sites", "detection-config", siteId], key: r.viewer).field("version") == "3")
        }
    }

    @Test func errorsAreOneLineOnStderr() async throws {
        try await LiveRegistry.run { r in
            let t = shortToken()
            // A key the registry does not know: 401.
            let badKey = await r.ctl(["orgs", "list"], key: "brk_0123456789abcdef.not-a-real-secret-at-all-000000000000000")
            #expect(badKey.code == 1)
            #expect(badKey.stderr.hasPrefix("Error: Authentication is required (HTTP 401)"), "\(badKey)")
            #expect(!badKey.stderr.contains("\n") && badKey.stdout.isEmpty)

            // A viewer creating an organization: 403 naming the role needed.
            let forbidden = await r.ctl(["orgs", "create", "--name", "Nope \(t)"], key: r.viewer)
            #expect(forbidden.code == 1)
            #expect(forbidden.stderr.hasPrefix("Error: Not allowed (HTTP 403): this operation needs the admin role"), "\(forbidden)")
            #expect(!forbidden.stderr.contains("\n"))

            // Invalid input: 400 naming every failing field.
            let invalid = await r.ctl(
                [
                    "sites", "create", "--org", "no-such-org-\(t)", "--name", "X", "--timezone", "Mars/Olympus", "--latitude", "10",
                    "--longitude", "106", "--radius", "1", "--shift-start", "08:30", "--shift-end", "17:30",
                ], key: r.admin)
            #expect(invalid.code == 1)
            #expect(
                invalid.stderr.contains("(HTTP 400)") && invalid.stderr.contains("timezone: ")
                    && invalid.stderr.contains("geofence.radiusMeters: "), "\(invalid)")
            #expect(!invalid.stderr.contains("\n"))

            // Not found.
            let missing = await r.ctl(["beacons", "get", "no-such-beacon-\(t)"], key: r.viewer)
            #expect(missing.code == 1 && missing.stderr.contains("(HTTP 404)") && !missing.stderr.contains("\n"), "\(missing)")

            // No key at all: explained, nothing sent.
            let noKey = await r.ctl(["orgs", "list"], key: nil)
            #expect(noKey.code == 1 && noKey.stderr.hasPrefix("Error: no API key"), "\(noKey)")

            // Malformed arguments.
            let malformed = await r.ctl(["minors", "allocate"], key: r.installer)
            #expect(malformed.code == 64 && malformed.stderr.hasPrefix("Error: Missing expected argument '<gate>'"), "\(malformed)")
            #expect(!malformed.stderr.contains("\n"))
        }
    }

    @Test func anUnreachableRegistryIsOneLine() async {
        // Port 1 on loopback: nothing listens there. The refusal is reported at once, not retried.
        let start = ContinuousClock.now
        let run = await runCLI(["registry", "orgs", "list", "--url", "http://127.0.0.1:1", "--api-key", "k"])
        #expect(start.duration(to: .now) < .seconds(20), "reported at once, not retried")
        #expect(run.code == 1)
        #expect(run.stderr == "Error: cannot reach registry at http://127.0.0.1:1: connection refused", "\(run)")
        #expect(run.stdout.isEmpty)
    }
}
