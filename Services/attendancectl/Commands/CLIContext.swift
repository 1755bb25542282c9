import Foundation
import RegistryClient
import Synchronization

/// Where a command writes and what it reads from its surroundings: standard output and error, the
/// environment variables, and how registry commands reach the registry. Commands read
/// `CLIContext.current`; tests bind their own with `CLIContext.$current.withValue(...)` to capture
/// output, set variables or put a fake transport in place of HTTP.
package struct CLIContext: Sendable {
    /// Writes one line (a newline is added) to standard output.
    package var out: @Sendable (String) -> Void
    /// Writes one line (a newline is added) to standard error.
    package var err: @Sendable (String) -> Void
    package var environment: [String: String]
    /// The transport registry commands use; `nil` is HTTP (`HTTPRegistryTransport`).
    package var registryTransport: (any RegistryTransport)?

    /// The process's own standard output, standard error and environment.
    package static let standard = CLIContext(
        out: { line in print(line) },
        err: { line in FileHandle.standardError.write(Data((line + "\n").utf8)) },
        environment: ProcessInfo.processInfo.environment
    )

    @TaskLocal package static var current: CLIContext = .standard
}

/// Collects what a command printed (for tests and for callers that want the text).
package final class CapturedOutput: Sendable {
    private let state = Mutex<(out: [String], err: [String])>(([], []))

    package init() {}

    /// A context writing into this capture; `environment` replaces the process's.
    package func context(environment: [String: String] = [:], registryTransport: (any RegistryTransport)? = nil) -> CLIContext {
        CLIContext(
            out: { line in self.state.withLock { $0.out.append(line) } },
            err: { line in self.state.withLock { $0.err.append(line) } },
            environment: environment, registryTransport: registryTransport
        )
    }

    /// Everything written to standard output, one line per write.
    package var stdout: String { state.withLock { $0.out.joined(separator: "\n") } }
    /// Everything written to standard error.
    package var stderr: String { state.withLock { $0.err.joined(separator: "\n") } }
}

/// A file a command reads, `-` for standard input; a missing, unreadable or empty one is a readable error.
enum CLIInput {
    static func read(_ path: String, what: String) throws -> Data {
        let data = path == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: path)
        guard let data else { throw CLIError("cannot read \(what) from \(path)") }
        guard !data.isEmpty else { throw CLIError("\(path) is empty: \(what) must be a JSON object") }
        return data
    }
}
