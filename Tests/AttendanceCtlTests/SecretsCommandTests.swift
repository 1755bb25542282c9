import AccessControl
import AttendanceCtlCommands
import AttendanceProtocol
import Foundation
import ServiceRuntime
import Testing

/// `attendancectl secrets init`: the files docker-compose's services read through `KEY_FILE`.
@Suite("Secrets command")
struct SecretsCommandTests {
    private func temporaryDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)").path
    }

    @Test func createsEverySecretOnceThenKeepsThem() async throws {
        let dir = temporaryDirectory() + "/nested"
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }

        let first = await runCLI(["secrets", "init", "--dir", dir, "--json"])
        #expect(first.code == 0, "\(first)")
        #expect(first.stdout.components(separatedBy: "\"created\"").count - 1 == PlatformSecret.allCases.count, "\(first)")
        var values: [PlatformSecret: String] = [:]
        for secret in PlatformSecret.allCases {
            let path = dir + "/" + secret.rawValue
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            values[secret] = try String(contentsOfFile: path, encoding: .utf8)
        }
        // The services read them through KEY_FILE, and the values are usable.
        let env = EnvironmentReader(
            Dictionary(uniqueKeysWithValues: PlatformSecret.allCases.map { ($0.environmentKey + "_FILE", dir + "/" + $0.rawValue) }))
        try env.checkFileReferences()
        let gatt = try #require(env.optionalString("GATT_NONCE_KEY"))
        #expect(Data(base64Encoded: gatt)?.count == 32)
        let tokenKeys = try #require(env.optionalString("DEVICE_TOKEN_KEYS"))
        #expect(tokenKeys.hasPrefix("k1:") && Data(base64Encoded: String(tokenKeys.dropFirst(3)))?.count == 32)

        let second = await runCLI(["secrets", "init", "--dir", dir, "--json"])
        #expect(second.code == 0 && !second.stdout.contains("\"created\""), "\(second)")
        for secret in PlatformSecret.allCases {
            #expect(try String(contentsOfFile: dir + "/" + secret.rawValue, encoding: .utf8) == values[secret])
        }
    }

    /// The signer the registry and the gateway load from the directory, as at their start.
    private func signer(_ dir: String) throws -> DeviceTokenSigner {
        try DeviceTokenSigner.load(from: EnvironmentReader(["DEVICE_TOKEN_KEYS_FILE": dir + "/device-token-keys"]))
    }

    @Test("a key id with no next id is an error line, not a crash")
    func aKeyIdAtTheLimitIsAnError() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(await runCLI(["secrets", "init", "--dir", dir]).code == 0)
        let path = (dir as NSString).appendingPathComponent(PlatformSecret.deviceTokenKeys.rawValue)
        try "k\(Int.max):\(Data(repeating: 7, count: 32).base64EncodedString())".write(toFile: path, atomically: true, encoding: .utf8)
        let added = await runCLI(["secrets", "device-token-keys", "add", "--dir", dir])
        #expect(added.code == 1 && added.stderr.contains("no id follows it"), "\(added)")
    }

    @Test func deviceTokenKeysRotateWithoutATokenRefused() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(await runCLI(["secrets", "init", "--dir", dir]).code == 0)
        let now = Date()
        let before = try signer(dir).sign(deviceId: "d_1", userId: "u_1", issuedAt: now, lifetime: .seconds(3_600)).token

        // Add: the registry still signs with k1; a gateway restarted now verifies k1 and k2.
        let added = await runCLI(["secrets", "device-token-keys", "add", "--dir", dir, "--json"])
        #expect(added.code == 0, "\(added)")
        #expect(added.stdout.contains("\"k2\"") && !added.stdout.contains("secret"), "\(added)")
        let afterAdd = try signer(dir)
        #expect(afterAdd.keyIds == ["k1", "k2"])
        #expect(try afterAdd.verify(before, now: now).keyId == "k1")
        #expect(
            try afterAdd.verify(afterAdd.sign(deviceId: "d_1", userId: "u_1", issuedAt: now, lifetime: .seconds(60)).token, now: now).keyId
                == "k1")

        // Activate: new tokens are signed with k2, the old ones still verify.
        #expect(await runCLI(["secrets", "device-token-keys", "activate", "--dir", dir, "--id", "k2"]).code == 0)
        let afterActivate = try signer(dir)
        #expect(try afterActivate.verify(before, now: now).keyId == "k1")
        #expect(afterActivate.sign(deviceId: "d_1", userId: "u_1", issuedAt: now, lifetime: .seconds(60)).claims.keyId == "k2")
        let list = await runCLI(["secrets", "device-token-keys", "list", "--dir", dir])
        #expect(list.stdout.contains("k2") && list.stdout.contains("signs and verifies"), "\(list)")

        // The signing key cannot be retired; k1 can, and its tokens then stop verifying.
        let refused = await runCLI(["secrets", "device-token-keys", "retire", "--dir", dir, "--id", "k2"])
        #expect(refused.code == 1 && refused.stderr.contains("k2 signs new tokens"), "\(refused)")
        #expect(await runCLI(["secrets", "device-token-keys", "retire", "--dir", dir, "--id", "k1"]).code == 0)
        let afterRetire = try signer(dir)
        #expect(afterRetire.keyIds == ["k2"])
        #expect(throws: DeviceTokenError.self) { try afterRetire.verify(before, now: now) }
        let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/device-token-keys")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.contains(".new-") }.isEmpty)
    }

    @Test func rotatingAKeyThatIsNotThereIsOneErrorLine() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = await runCLI(["secrets", "device-token-keys", "add", "--dir", dir])
        #expect(missing.code == 1 && missing.stderr.contains("secrets init"), "\(missing)")
        #expect(await runCLI(["secrets", "init", "--dir", dir]).code == 0)
        let unknown = await runCLI(["secrets", "device-token-keys", "activate", "--dir", dir, "--id", "k9"])
        #expect(unknown.code == 1 && unknown.stderr.contains("no key k9") && unknown.stderr.contains("k1"), "\(unknown)")
        #expect(FileManager.default.createFile(atPath: dir + "/device-token-keys", contents: Data("not a key list".utf8)))
        let garbled = await runCLI(["secrets", "device-token-keys", "list", "--dir", dir])
        #expect(garbled.code == 1 && garbled.stderr.contains("not a list of id:base64secret entries"), "\(garbled)")
    }

    @Test func aFileWhereTheDirectoryShouldBeIsOneErrorLine() async throws {
        let path = temporaryDirectory()
        #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let run = await runCLI(["secrets", "init", "--dir", path])
        #expect(run.code == 1, "\(run)")
        #expect(run.stderr.hasPrefix("Error: ") && run.stderr.contains("is not a directory"), "\(run)")
    }

    @Test func theDirectoryIsRequired() async {
        let run = await runCLI(["secrets", "init"])
        #expect(run.code == 64, "\(run)")
        #expect(run.stderr.contains("--dir"), "\(run)")
    }
}
