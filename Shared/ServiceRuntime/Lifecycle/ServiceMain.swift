import Foundation
import Logging
import ServiceLifecycle

/// The start of every executable: turns a configuration error into one readable line and exit code
/// 78 (EX_CONFIG), and runs the services until SIGTERM/SIGINT, shutting them down gracefully
/// (in reverse order: the HTTP server stops taking requests before the clients it uses close).
public enum ServiceMain {
    public static func run(_ body: () async throws -> Void) async {
        do {
            try await body()
        } catch let error as ConfigurationError {
            exitWithMessage(error.description, code: 78)
        } catch {
            exitWithMessage("fatal: \(error)", code: 1)
        }
    }

    /// Runs `services` in one group with graceful shutdown on SIGTERM and SIGINT.
    public static func runServices(_ services: [any Service], logger: Logger, gracefulShutdownTimeout: Duration = .seconds(30)) async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                cancellationSignals: [],
                logger: logger
            )
        )
        try await group.run()
    }

    public static func exitWithMessage(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(code)
    }
}
