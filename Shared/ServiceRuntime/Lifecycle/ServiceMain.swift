import Foundation

/// The start of every executable: turns a configuration error into one readable line and exit code
/// 78 (EX_CONFIG), and any other failure into one line and exit code 1. The services themselves run
/// in `ServiceKit.run`.
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

    public static func exitWithMessage(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(code)
    }
}
