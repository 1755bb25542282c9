import LocalStackTesting
import Foundation
import Testing

/// docker-compose.yml cannot be run here (no container engine), so it is validated instead: the
/// Compose Specification schema and consistency with the code (deploy/compose/check.py).
@Suite("docker-compose.yml")
struct ComposeFileTests {
    func runCheck(composeFile: String? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [LocalStack.root.appendingPathComponent("deploy/compose/check.sh").path]
        var environment = ProcessInfo.processInfo.environment
        if let composeFile { environment["COMPOSE_FILE"] = composeFile }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test func composeFileIsValidAndMatchesTheCode() throws {
        let (status, output) = try runCheck()
        #expect(status == 0, "\(output)")
        #expect(output.contains("0 failed"))
    }

    @Test func checkCatchesAnUnknownCommandAnUnreadVariableAndABadKey() throws {
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("compose-\(UUID().uuidString).yml")
        defer { try? FileManager.default.removeItem(at: broken) }
        try """
            services:
              topics:
                build: {context: ., dockerfile: deploy/docker/Dockerfile, target: runtime}
                image: beacon-attendance:dev
                command: ["no-such-binary"]
                environment:
                  NOT_READ_ANYWHERE: "1"
                restartt: always
              db:
                image: postgres
            """.write(to: broken, atomically: true, encoding: .utf8)
        let (status, output) = try runCheck(composeFile: broken.path)
        #expect(status != 0)
        #expect(output.contains("compose schema"))
        #expect(output.contains("command 'no-such-binary' is a product"))
        #expect(output.contains("env NOT_READ_ANYWHERE is read by the code"))
        #expect(output.contains("db: image pinned"))
    }
}
