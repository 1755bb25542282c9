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
    /// Runs a project script (`deploy/local/services.sh start`, say) to completion; throws with what it
    /// printed when it fails.
    public static func runScript(_ path: String, _ arguments: String...) async throws {
        let (status, output) = try await run("/bin/bash", [root.appendingPathComponent(path).path] + arguments)
        guard status == 0 else { throw ScriptFailure(output: "\(path) \(arguments.joined(separator: " ")) failed:\n\(output)") }
    }

    /// Runs `executable` with `arguments` to its end: its exit status (128 + the signal's number when
    /// a signal ended it) and what it printed, standard output and error together.
    ///
    /// - The caller's task is suspended, never a thread of the cooperative pool: the process is
    ///   started with posix_spawn and waited for on a thread of its own (`runBlocking`).
    /// - Its output goes to a file, so it never blocks on a full pipe, and what it leaves running
    ///   (a script's supervisors and services) holds no pipe open that a read would wait on.
    /// - It starts with every signal at its default and none blocked. A child inherits both from the
    ///   spawning thread otherwise: the test runner's threads block signals and may ignore SIGTERM,
    ///   and a shell that starts with SIGTERM ignored cannot trap it, so `services.sh stop` could not
    ///   stop a supervisor gracefully and waited out its timeout for each service.
    /// - Standard input is `/dev/null`; `environment` is its whole environment (default: this one's).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil
    ) async throws -> (status: Int32, output: String) {
        let result = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: Result { try runBlocking(executable, arguments, environment: environment) })
            }
        }
        return try result.get()
    }

    /// `run`, waiting on the calling thread: only for what cannot wait otherwise (the stack's start,
    /// once per test process, in a static initializer).
    static func runBlocking(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil
    ) throws -> (status: Int32, output: String) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("process-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        var cArgs = ([executable] + arguments).map { strdup($0) } + [nil]
        var cEnv = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (cArgs + cEnv).forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, &cArgs, &cEnv)
        guard spawned == 0 else { throw ScriptFailure(output: "could not start \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        // The wait status: the exit code in bits 8-15 when it exited, else the signal in bits 0-6.
        let signal = status & 0x7f
        return (signal == 0 ? (status >> 8) & 0xff : 128 + signal, output)
    }
}
