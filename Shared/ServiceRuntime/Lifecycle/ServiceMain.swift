import Foundation
import KafkaClient

/// The start of every executable: turns a command line it does not take into its usage and exit code
/// 64 (EX_USAGE), a configuration error into one readable line and exit code
/// 78 (EX_CONFIG), a client the broker no longer knows (its group member or producer id) into one
/// line and exit code 75 like `BrokerStateWatch`, and any other failure into one line and exit code 1. The services themselves run
/// in `ServiceKit.run`.
public enum ServiceMain {
    public static func run(_ body: () async throws -> Void) async {
        do {
            try await body()
        } catch let error as UsageError {
            exitWithMessage(error.description, code: 64)
        } catch let error as ConfigurationError {
            exitWithMessage(error.description, code: 78)
        } catch let error as KafkaError where error.meansBrokerStateLost {
            exitWithMessage(
                "broker state lost: \(error); exiting so that the supervisor starts this service afresh", code: BrokerStateWatch.exitCode)
        } catch {
            exitWithMessage("fatal: \(error)", code: 1)
        }
    }

    /// Ends a process whose command finished (`<service> migrate`).
    public static func finish() -> Never { exit(0) }

    public static func exitWithMessage(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(code)
    }
}

/// A command line the executable does not take; `description` is the usage.
public struct UsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
