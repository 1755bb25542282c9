import Foundation

extension LocalStack {
    /// Runs `executable` with `arguments` to its end and gives back its exit status and what it
    /// printed (standard output and error together). The caller's task is suspended, not its thread:
    /// a test that waited in `Process.waitUntilExit` held one of the cooperative pool's two threads
    /// here, and two such tests stalled every other suite for as long as their processes ran. The
    /// output goes to a file, so a chatty process never blocks on a full pipe.
    ///
    /// `environment` is the whole environment of the process (default: this one's).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> (status: Int32, output: String) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("process-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw ScriptFailure(output: "could not create \(log.path) for the output of \(executable)")
        }
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        try? output.close()
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }
}
