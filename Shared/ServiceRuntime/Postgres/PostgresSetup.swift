import Logging
import PostgresNIO

extension PostgresConfiguration {
    /// One connection's settings (no TLS, as the pool's), for a tool that checks it can connect at all
    /// before it starts a pool.
    public var connectionConfiguration: PostgresConnection.Configuration {
        PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable)
    }

    /// A pooled client for these settings (loopback and compose networks: no TLS).
    public func makeClient(logger: Logger) -> PostgresClient {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable
        )
        configuration.options.maximumConnections = maxConnections
        configuration.options.connectTimeout = .seconds(5)
        if !searchPath.isEmpty {
            // Unqualified table names resolve in these schemas, on every connection of the pool.
            configuration.options.additionalStartupParameters.append(("search_path", searchPath.joined(separator: ",")))
        }
        if let applicationName {
            configuration.options.additionalStartupParameters.append(("application_name", applicationName))
        }
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }
}
