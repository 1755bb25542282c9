import ArgumentParser
import Foundation

/// The platform's shared secrets, one file each, as the services read them through `KEY_FILE`
/// (`EnvironmentReader`). `docker-compose.yml` runs `attendancectl secrets init` once into a volume
/// the services mount read-only; `deploy/local/services.sh` runs it for the native stack.
package enum PlatformSecret: String, CaseIterable, Sendable {
    /// Device token signing keys, shared by the registry (signs) and the gateway (verifies).
    case deviceTokenKeys = "device-token-keys"
    /// Signs the gateway's GATT challenge nonces; the policy service checks them.
    case gattNonceKey = "gatt-nonce-key"
    /// Seals each beacon's GATT key in the registry's database and on the registry feed; only the
    /// registry and the policy service hold it.
    case beaconKeySealKey = "beacon-key-seal-key"

    /// The environment variable the services read (or `<it>_FILE` for the file's path).
    package var environmentKey: String {
        switch self {
        case .deviceTokenKeys: return "DEVICE_TOKEN_KEYS"
        case .gattNonceKey: return "GATT_NONCE_KEY"
        case .beaconKeySealKey: return "BEACON_KEY_SEAL_KEY"
        }
    }

    /// A fresh value: 32 random bytes in base64 (device token keys carry a key id in front, so a
    /// later rotation can add a second key beside it).
    func generate<G: RandomNumberGenerator>(using generator: inout G) -> String {
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let secret = Data(bytes).base64EncodedString()
        switch self {
        case .deviceTokenKeys: return "k1:\(secret)"
        case .gattNonceKey, .beaconKeySealKey: return secret
        }
    }
}

extension AttendanceCtl {
    struct Secrets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The platform's shared secrets (files the services read through KEY_FILE).",
            subcommands: [Init.self]
        )

        struct Init: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create every missing secret file in a directory; existing files are kept."
            )
            @Option(help: "Directory for the secret files (created with mode 700; files get 600).")
            var dir: String
            @Flag(name: .long, help: "Print JSON instead of a table.")
            var json = false

            func run() async throws {
                let rows = try SecretFiles.ensure(in: dir)
                Output.print(rows: rows, headers: ["SECRET", "VARIABLE", "FILE", "STATUS"], json: json)
            }
        }
    }
}

enum SecretFiles {
    /// Writes each missing secret (never overwrites: rotating a key is a deliberate act, and the
    /// services of a running stack hold the current values).
    static func ensure(in directory: String) throws -> [[String]] {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw CLIError("\(directory) exists and is not a directory") }
        } else {
            do {
                try manager.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw CLIError("cannot create \(directory): \(error.localizedDescription)")
            }
        }
        var generator = SystemRandomNumberGenerator()
        var rows: [[String]] = []
        for secret in PlatformSecret.allCases {
            let path = (directory as NSString).appendingPathComponent(secret.rawValue)
            if let existing = manager.contents(atPath: path), !existing.isEmpty {
                rows.append([secret.rawValue, secret.environmentKey, path, "kept"])
                continue
            }
            let value = secret.generate(using: &generator) + "\n"
            guard manager.createFile(atPath: path, contents: Data(value.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CLIError("cannot write \(path) (is \(directory) writable?)")
            }
            rows.append([secret.rawValue, secret.environmentKey, path, "created"])
        }
        return rows
    }
}
