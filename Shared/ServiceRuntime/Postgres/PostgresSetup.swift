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
        makeClient(maxConnections: maxConnections, name: applicationName, parameters: [], logger: logger)
    }

    /// The pool of the reads people ask for (reports, admin lists, the status page): `reportMaxConnections`
    /// connections apart from the pipeline's, each statement stopped by PostgreSQL after
    /// `reportTimeoutSeconds` (`statement_timeout`), read-only. However many or slow those reads are, they
    /// wait for their own connections and never for the pipeline's, nor the pipeline for theirs.
    public func makeReportClient(logger: Logger) -> PostgresClient {
        makeClient(
            maxConnections: reportMaxConnections, name: applicationName.map { $0 + "-reports" },
            parameters: [("statement_timeout", "\(reportTimeoutSeconds)s"), ("default_transaction_read_only", "on")], logger: logger)
    }

    private func makeClient(maxConnections: Int, name: String?, parameters: [(String, String)], logger: Logger) -> PostgresClient {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable
        )
        configuration.options.maximumConnections = maxConnections
        configuration.options.connectTimeout = .seconds(5)
        if !searchPath.isEmpty {
            // Unqualified table names resolve in these schemas, on every connection of the pool.
            configuration.options.additionalStartupParameters.append(("search_path", searchPath.joined(separator: ",")))
        }
        if let name { configuration.options.additionalStartupParameters.append(("application_name", name)) }
        configuration.options.additionalStartupParameters += parameters
        return PostgresClient(configuration: configuration, backgroundLogger: logger)
    }
}
