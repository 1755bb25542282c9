import AccessControl
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
        let secret = Self.randomSecret(using: &generator)
        switch self {
        case .deviceTokenKeys: return "k1:\(secret)"
        case .gattNonceKey, .beaconKeySealKey: return secret
        }
    }

    /// 32 random bytes in base64: every secret's value, and each device token key's.
    static func randomSecret<G: RandomNumberGenerator>(using generator: inout G) -> String {
        Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).base64EncodedString()
    }
}

extension AttendanceCtl {
    struct Secrets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The platform's shared secrets (files the services read through KEY_FILE).",
            subcommands: [Init.self, DeviceTokenKeys.self]
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

extension AttendanceCtl.Secrets {
    /// Rotating the device token signing keys in place, in the order that never has a token refused:
    /// `add` (restart the gateway: it verifies both), `activate` (restart the registry: it signs with
    /// the new one), `retire` once the old key's tokens have expired (restart both).
    struct DeviceTokenKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "device-token-keys",
            abstract: "Rotate the device token signing keys: list, add, activate, retire (deploy/RUNBOOK.md).",
            subcommands: [List.self, Add.self, Activate.self, Retire.self]
        )

        /// The options every subcommand takes, and how each prints the resulting list.
        struct KeyFileOptions: ParsableArguments {
            @Option(help: "Directory of the secret files.") var dir: String
            @Flag(name: .long, help: "Print JSON instead of a table.") var json = false

            func show(_ entries: [DeviceTokenKeyFile.Entry]) {
                Output.print(rows: DeviceTokenKeyFile.rows(entries), headers: ["ID", "ROLE"], json: json)
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "The key ids and which one signs new tokens (never the secrets).")
            @OptionGroup var file: KeyFileOptions

            func run() async throws { file.show(try DeviceTokenKeyFile.read(in: file.dir).entries) }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a new key that verifies but does not sign yet; then restart the gateway.")
            @OptionGroup var file: KeyFileOptions

            func run() async throws {
                var generator = SystemRandomNumberGenerator()
                file.show(try DeviceTokenKeyFile.add(in: file.dir, using: &generator))
            }
        }

        /// The options of the subcommands that act on one key.
        struct KeyOptions: ParsableArguments {
            @OptionGroup var file: KeyFileOptions
            @Option(help: "The key id, such as k2.") var id: String
        }

        struct Activate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Make a key the one new tokens are signed with; then restart the registry.")
            @OptionGroup var key: KeyOptions

            func run() async throws { key.file.show(try DeviceTokenKeyFile.activate(id: key.id, in: key.file.dir)) }
        }

        struct Retire: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove a key that no longer signs, once its tokens have expired; then restart the gateway and registry.")
            @OptionGroup var key: KeyOptions

            func run() async throws { key.file.show(try DeviceTokenKeyFile.retire(id: key.id, in: key.file.dir)) }
        }
    }
}

/// The `device-token-keys` secret: `id:base64secret` entries separated by commas. Every key verifies;
/// the first signs new tokens (the services' `DEVICE_TOKEN_ACTIVE_KEY` default).
enum DeviceTokenKeyFile {
    struct Entry: Equatable {
        var id: String
        var secret: String
    }

    static func read(in directory: String) throws -> (path: String, entries: [Entry]) {
        let path = (directory as NSString).appendingPathComponent(PlatformSecret.deviceTokenKeys.rawValue)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("no \(path): run `attendancectl secrets init --dir \(directory)` first")
        }
        var entries: [Entry] = []
        for item in String(decoding: data, as: UTF8.self).split(separator: ",") {
            let text = item.trimmingCharacters(in: .whitespacesAndNewlines)
            let parts = text.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, Data(base64Encoded: String(parts[1])) != nil else {
                throw CLIError("\(path) is not a list of id:base64secret entries")
            }
            entries.append(Entry(id: String(parts[0]), secret: String(parts[1])))
        }
        guard !entries.isEmpty else { throw CLIError("\(path) holds no key") }
        return (path, entries)
    }

    static func rows(_ entries: [Entry]) -> [[String]] {
        entries.enumerated().map { [$0.element.id, $0.offset == 0 ? "signs and verifies" : "verifies"] }
    }

    /// Appends a new key `k<n+1>` (after the highest `k<n>` id), so that the signing key stays the same.
    static func add<G: RandomNumberGenerator>(in directory: String, using generator: inout G) throws -> [Entry] {
        var (path, entries) = try read(in: directory)
        let highest = entries.compactMap { $0.id.hasPrefix("k") ? Int($0.id.dropFirst()) : nil }.max() ?? 0
        let (next, overflow) = highest.addingReportingOverflow(1)
        guard !overflow else { throw CLIError("\(path) holds key k\(highest): no id follows it; remove or rename that key") }
        entries.append(Entry(id: "k\(next)", secret: PlatformSecret.randomSecret(using: &generator)))
        try write(entries, to: path)
        return entries
    }

    /// Moves `id` to the front: the key new tokens are signed with.
    static func activate(id: String, in directory: String) throws -> [Entry] {
        var (path, entries) = try read(in: directory)
        guard let index = entries.firstIndex(where: { $0.id == id }) else { throw unknown(id, path, entries) }
        entries.insert(entries.remove(at: index), at: 0)
        try write(entries, to: path)
        return entries
    }

    /// Removes `id`, which must not be the signing key.
    static func retire(id: String, in directory: String) throws -> [Entry] {
        var (path, entries) = try read(in: directory)
        guard let index = entries.firstIndex(where: { $0.id == id }) else { throw unknown(id, path, entries) }
        guard index > 0 else { throw CLIError("\(id) signs new tokens: add and activate another key before retiring it") }
        entries.remove(at: index)
        try write(entries, to: path)
        return entries
    }

    private static func unknown(_ id: String, _ path: String, _ entries: [Entry]) -> CLIError {
        CLIError("no key \(id) in \(path) (its keys: \(entries.map(\.id).joined(separator: ", ")))")
    }

    /// Replaces the file at once (a new file renamed over it, mode 600): a service starting meanwhile
    /// reads the old list or the new one, never half of one.
    private static func write(_ entries: [Entry], to path: String) throws {
        let text = entries.map { "\($0.id):\($0.secret)" }.joined(separator: ",") + "\n"
        let temporary = path + ".new-\(UUID().uuidString)"
        guard AccessControl.Secrets.writePrivately(text, to: temporary) else {
            throw CLIError("cannot write \(temporary) (is the directory writable?)")
        }
        guard rename(temporary, path) == 0 else {
            try? FileManager.default.removeItem(atPath: temporary)
            throw CLIError("cannot replace \(path): \(String(cString: strerror(errno)))")
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
            guard AccessControl.Secrets.writePrivately(value, to: path) else {
                throw CLIError("cannot write \(path) (is \(directory) writable?)")
            }
            rows.append([secret.rawValue, secret.environmentKey, path, "created"])
        }
        return rows
    }
}
