import AccessControl
import ArgumentParser
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import ServiceRuntime

extension AttendanceCtl {
    /// Break-glass key minting, straight in the registry's PostgreSQL. `attendancectl registry
    /// api-keys create` is the normal way, but it needs an admin key already; this is for when none is
    /// at hand (a database the bootstrap key was never saved for, a lost key), for whoever holds the
    /// database credentials.
    struct APIKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "api-keys",
            abstract: "Admin API keys straight in the registry's database (break-glass; prefer 'registry api-keys').",
            subcommands: [Mint.self]
        )

        struct Mint: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create an API key in PostgreSQL and print its secret once."
            )
            @OptionGroup var options: GlobalOptions
            @Option(help: "A name that says whose key it is.") var name: String
            @Option(help: "admin, installer or viewer.") var role: String = APIRole.admin.rawValue
            @Option(help: "Also write the secret to this file (mode 600).") var secretFile: String?

            func validate() throws {
                guard APIRole(rawValue: role) != nil else {
                    throw ValidationError(
                        "--role must be one of \(APIRole.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(role)\"")
                }
                guard !name.trimmingCharacters(in: .whitespaces).isEmpty, name.count <= 200 else {
                    throw ValidationError("--name must be 1 to 200 characters")
                }
            }

            func run() async throws {
                var postgres = try options.postgres()
                postgres.searchPath = try RegistrySchema.searchPath(from: EnvironmentReader(options.environment))
                let settings = postgres
                let logger = options.logger
                let keyRole = APIRole(rawValue: role) ?? .admin
                let keyName = name
                // Device tokens are not signed here; the repository only needs a signer to exist.
                let signer = try DeviceTokenSigner(activeKey: .random(id: "unused"))
                let issued = try await PostgresAccess.withClient(settings, what: "creating the key", logger: logger) { client in
                    let repository = PostgresRegistryRepository(client: client, logger: logger, tokenSigner: signer)
                    return try await repository.createAPIKey(name: keyName, role: keyRole)
                }
                if let secretFile {
                    guard AccessControl.Secrets.writePrivately(issued.secret + "\n", to: secretFile) else {
                        throw CLIError("the key \(issued.key.id) was created but \(secretFile) cannot be written; revoke it")
                    }
                }
                Output.print(
                    rows: [[issued.key.id, issued.key.name, issued.key.role.rawValue, issued.secret]],
                    headers: ["ID", "NAME", "ROLE", "SECRET"], json: options.json)
            }
        }
    }
}
