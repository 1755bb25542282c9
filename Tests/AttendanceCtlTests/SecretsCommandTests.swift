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
