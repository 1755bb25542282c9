import Foundation
import Testing

@testable import ServiceRuntime

@Suite("Migration files")
struct MigrationFilesTests {
    func directory(_ files: [String: String]) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, sql) in files { try sql.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return dir
    }

    @Test func loadsSQLFilesInVersionOrderAndIgnoresOthers() throws {
        let dir = try directory(["0010_later.sql": "SELECT 2;", "0002_first.sql": "SELECT 1;", "README.md": "not a migration"])
        defer { try? FileManager.default.removeItem(at: dir) }
        let migrations = try MigrationRunner.load(directory: dir)
        #expect(migrations.map(\.version) == [2, 10])
        #expect(migrations.map(\.name) == ["first", "later"])
        try #require(migrations.count == 2)
        #expect(migrations[0].checksum != migrations[1].checksum)
    }

    @Test(arguments: [
        (["create.sql": "SELECT 1;"], "must be named NNNN_description.sql"),
        (["0000_zero.sql": "SELECT 1;"], "must be named NNNN_description.sql"),
        (["0001_a.sql": "SELECT 1;", "001_b.sql": "SELECT 2;"], "have the same version 1"),
    ])
    func badFileNamesAreRefusedClearly(files: [String: String], expected: String) throws {
        let dir = try directory(files)
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            _ = try MigrationRunner.load(directory: dir)
            Issue.record("expected an error")
        } catch let error as MigrationError {
            #expect(error.description.contains(expected), "\(error)")
        }
    }
}
