import ArgumentParser
import Foundation
import RegistryClient

/// The options of every `attendancectl registry` command: where the registry is, the API key, and
/// JSON or table output.
package struct RegistryOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("The registry's base URL (default: $REGISTRY_URL or \(RegistryClient.defaultURL)).", valueName: "url"))
    package var url: String?

    @Option(name: .customLong("api-key"), help: ArgumentHelp("An admin API key (default: $ATTENDANCE_API_KEY).", valueName: "key"))
    package var apiKey: String?

    @Flag(name: .long, help: "Print the registry's JSON answer instead of a table.")
    package var json = false

    package init() {}

    /// The URL: `--url`, else `REGISTRY_URL`, else the default.
    package var resolvedURL: String {
        let environment = CLIContext.current.environment
        return url ?? environment["REGISTRY_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? RegistryClient.defaultURL
    }

    /// The key: `--api-key`, else `ATTENDANCE_API_KEY`.
    package var resolvedAPIKey: String? {
        apiKey ?? CLIContext.current.environment["ATTENDANCE_API_KEY"]
    }

    package func client() throws(RegistryClientError) -> RegistryClient {
        try RegistryClient(
            baseURL: resolvedURL, apiKey: resolvedAPIKey, transport: CLIContext.current.registryTransport ?? HTTPRegistryTransport())
    }

    /// Calls the registry and prints the answer: its JSON with `--json`, else `table(value)`.
    func show<Value>(
        _ table: (Value) -> String, _ call: (RegistryClient) async throws(RegistryClientError) -> RegistryReply<Value>
    ) async throws {
        let reply = try await call(try client())
        let out = CLIContext.current.out
        if json {
            if !reply.json.isEmpty { out(String(decoding: reply.json, as: UTF8.self)) }
        } else {
            out(table(reply.value))
        }
    }
}

/// `--limit` and `--cursor` of the list commands.
package struct PageOptions: ParsableArguments {
    @Option(help: "Items per page, 1-200 (the registry's default: 50).")
    package var limit: Int?

    @Option(help: "The page after this one: the cursor a previous page printed.")
    package var cursor: String?

    package init() {}

    var query: PageQuery { PageQuery(limit: limit, cursor: cursor) }
}

extension BeaconStatusArgument: ExpressibleByArgument {}
extension RoleArgument: ExpressibleByArgument {}

/// `active`, `retired` or `lost`.
package enum BeaconStatusArgument: String, CaseIterable, Sendable {
    case active, retired, lost
}

/// `viewer`, `installer` or `admin`.
package enum RoleArgument: String, CaseIterable, Sendable {
    case viewer, installer, admin
}
