import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A project script that failed, with what it printed.
public struct ScriptFailure: Error, CustomStringConvertible {
    public let output: String
    public init(output: String) { self.output = output }
    public var description: String { output }
}

extension LocalStack {
    /// Runs a project script (`deploy/local/services.sh start`, say) to completion, its output in a
    /// file. posix_spawn and waitpid on a thread of its own: Foundation's `Process.waitUntilExit`
    /// never returned here once the script had left background services running.
    public static func runScript(_ path: String, _ arguments: String...) async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("script-\(UUID().uuidString).log")
        let command = ([root.appendingPathComponent(path).path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let argv = ["/bin/bash", "-c", "\(command) >'\(log.path)' 2>&1 </dev/null"]
        let status: Int32 = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var pid: pid_t = 0
                var cArgs = argv.map { strdup($0) } + [nil]
                defer { cArgs.forEach { free($0) } }
                // The script and what it leaves running (the supervisors, the services) start with
                // every signal at its default and none blocked. A child inherits both from this thread
                // otherwise: the test runner's threads block signals and may ignore SIGTERM, and a
                // shell that starts with SIGTERM ignored cannot trap it, so `services.sh stop` could
                // not stop a supervisor gracefully and waited out its timeout for each service.
                var attributes = posix_spawnattr_t()
                posix_spawnattr_init(&attributes)
                defer { posix_spawnattr_destroy(&attributes) }
                var none = sigset_t(), all = sigset_t()
                sigemptyset(&none)
                sigfillset(&all)
                posix_spawnattr_setsigmask(&attributes, &none)
                posix_spawnattr_setsigdefault(&attributes, &all)
                posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
                guard posix_spawn(&pid, "/bin/bash", nil, &attributes, &cArgs, environ) == 0 else {
                    continuation.resume(returning: -1)
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: log)
        guard status == 0 else { throw ScriptFailure(output: "\(path) \(arguments.joined(separator: " ")) failed:\n\(output)") }
    }
}
