import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation

/// The first admin API key of a fresh registry. Every admin route needs a key, and only an admin
/// can create keys, so the first one comes from here: the executable calls `ensure` at start when
/// `REGISTRY_BOOTSTRAP=1` and writes the secret once to `REGISTRY_BOOTSTRAP_KEY_PATH`
/// (`BootstrapKeyFile`), never to the log. When an unrevoked admin key exists already it creates
/// nothing (run it on every start safely, by every replica).
package enum BootstrapAdminKey {
    package static func ensure(
        repository: any AdminRegistryRepository, name: String = "bootstrap admin"
    ) async throws(RegistryError) -> IssuedAPIKey? {
        try await repository.createFirstAdminKey(name: name)
    }
}

/// Where the bootstrap admin key's secret goes: a file only its owner may read (mode 0600), written
/// whole or not at all (a temporary file renamed over it).
package struct BootstrapKeyFile: Sendable {
    package let path: String

    package init(path: String) { self.path = path }

    package struct Unwritable: Error, CustomStringConvertible {
        package let path: String
        package var description: String {
            "REGISTRY_BOOTSTRAP_KEY_PATH \(path): its directory cannot be created or written, so the first admin key would be lost; no key was created"
        }
    }

    /// Checked before a key is created: a key nobody can read would lock every admin out.
    package func checkWritable() throws {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory.isEmpty ? "." : directory, withIntermediateDirectories: true)
        } catch {
            throw Unwritable(path: path)
        }
        guard FileManager.default.isWritableFile(atPath: directory.isEmpty ? "." : directory) else { throw Unwritable(path: path) }
    }

    package func write(_ secret: String) throws {
        let temporary = path + ".tmp-\(ProcessInfo.processInfo.processIdentifier)"
        // Readable by its owner only from the first byte, then renamed over the file at once.
        guard Secrets.writePrivately(secret + "\n", to: temporary) else { throw Unwritable(path: path) }
        guard rename(temporary, path) == 0 else {
            try? FileManager.default.removeItem(atPath: temporary)
            throw Unwritable(path: path)
        }
    }
}
