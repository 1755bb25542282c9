import AttendanceProtocol
import BeaconRegistryService
import Foundation
import Testing

/// The first admin key goes to a file only its owner reads, never to the log.
@Suite("Bootstrap key file")
struct BootstrapKeyFileTests {
    @Test func theSecretIsWrittenWholeWithOwnerOnlyPermissions() throws {
        let directory = NSTemporaryDirectory() + "bootstrap-\(UUID().uuidString)/secrets"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let file = BootstrapKeyFile(path: directory + "/admin-api-key")
        try file.checkWritable()
        try file.write("brk_abc.secret")
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "brk_abc.secret\n")
        let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        // A second key replaces the first (a fresh database behind an old secrets directory).
        try file.write("brk_def.secret")
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "brk_def.secret\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["admin-api-key"])
    }

    @Test func anUnwritablePlaceIsRefusedBeforeAnyKeyIsCreated() throws {
        let blocker = NSTemporaryDirectory() + "bootstrap-blocker-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data("a file, not a directory".utf8)))
        defer { try? FileManager.default.removeItem(atPath: blocker) }
        let file = BootstrapKeyFile(path: blocker + "/secrets/admin-api-key")
        #expect(throws: BootstrapKeyFile.Unwritable.self) { try file.checkWritable() }
    }
}
