import Logging
import PostgresNIO

extension PostgresSettings {
    /// A pooled client for these settings (loopback and compose networks: no TLS).
    public func makeClient(logger: Logger) -> PostgresClient {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable
        )
        configuration.options.maximumConnections = maxConnections
        configuration.options.connectTimeout = .seconds(5)
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }
}
