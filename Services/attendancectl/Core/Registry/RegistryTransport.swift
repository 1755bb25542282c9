import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One HTTP request to the registry, relative to its base URL.
package struct RegistryRequest: Sendable, Hashable {
    package enum Method: String, Sendable, Hashable {
        case get = "GET", post = "POST", patch = "PATCH"
    }

    package var method: Method
    /// Starts with `/`; path segments already percent-encoded.
    package var path: String
    package var query: [String: String]
    /// JSON; `nil` sends no body.
    package var body: Data?
    /// The bearer token; `nil` for the routes that need none.
    package var apiKey: String?

    package init(_ method: Method, _ path: String, query: [String: String] = [:], body: Data? = nil, apiKey: String? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.apiKey = apiKey
    }

    /// `path?query` with the query sorted by name and percent-encoded.
    package var target: String {
        guard !query.isEmpty else { return path }
        let pairs = query.sorted { $0.key < $1.key }.map { "\(Self.encodeQuery($0.key))=\(Self.encodeQuery($0.value))" }
        return path + "?" + pairs.joined(separator: "&")
    }

    static func encodeQuery(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// The registry's answer: status, media type and the body as sent.
package struct RegistryResponse: Sendable, Hashable {
    package var status: Int
    package var contentType: String?
    package var body: Data

    package init(status: Int, contentType: String? = nil, body: Data) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// How `RegistryClient` talks to the registry: HTTP in the CLI, a fake in unit tests. Throws
/// `RegistryClientError.unreachable` when no answer came.
package protocol RegistryTransport: Sendable {
    func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse
}

/// HTTP over AsyncHTTPClient. A command makes one or two requests, so each request gets its own
/// client that fails at the first refused connection (AsyncHTTPClient's default retries
/// connecting until the deadline: an operator would wait 30 s to learn the URL is wrong).
package struct HTTPRegistryTransport: RegistryTransport {
    /// The longest connecting may take.
    package var connectTimeout: TimeAmount
    /// The longest a whole request may take.
    package var timeout: TimeAmount
    /// Answers larger than this are refused (a provisioning plan is about 10 KiB).
    package var maxResponseBytes: Int

    package init(connectTimeout: TimeAmount = .seconds(10), timeout: TimeAmount = .seconds(30), maxResponseBytes: Int = 16 * 1024 * 1024) {
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
    }

    package func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse {
        var http = HTTPClientRequest(url: baseURL + request.target)
        http.method = HTTPMethod(rawValue: request.method.rawValue)
        http.headers.add(name: "Accept", value: "application/json, application/problem+json")
        http.headers.add(name: "User-Agent", value: "attendancectl")
        if let key = request.apiKey { http.headers.add(name: "Authorization", value: "Bearer \(key)") }
        if let body = request.body {
            http.headers.add(name: "Content-Type", value: "application/json")
            http.body = .bytes(body)
        }
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: connectTimeout, read: timeout)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        let result: Result<RegistryResponse, any Error>
        do {
            let response = try await client.execute(http, timeout: timeout)
            let buffer = try await response.body.collect(upTo: maxResponseBytes)
            result = .success(
                RegistryResponse(
                    status: Int(response.status.code), contentType: response.headers.first(name: "Content-Type"),
                    body: Data(buffer.readableBytesView)
                ))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        switch result {
        case .success(let response): return response
        case .failure(let error): throw .unreachable(url: baseURL, reason: Self.reason(error))
        }
    }

    /// A short human reason for a transport failure (no type names, no errno noise).
    static func reason(_ error: any Error) -> String {
        if let http = error as? HTTPClientError {
            if http == .connectTimeout { return "connection timed out" }
            if http == .deadlineExceeded || http == .readTimeout || http == .writeTimeout { return "no answer in time" }
            if http == .remoteConnectionClosed { return "the connection was closed before an answer" }
            if http == .invalidURL || http == .emptyHost || http == .emptyScheme { return "not a valid http(s) URL" }
        }
        if error is NIOTooManyBytesError { return "the answer is too large" }
        let text = String(describing: error)
        let lowered = text.lowercased()
        if lowered.contains("connection refused") { return "connection refused" }
        if lowered.contains("connection reset") { return "connection reset" }
        if lowered.contains("no address") || lowered.contains("name or service not known") || lowered.contains("resolution") {
            return "the host name does not resolve"
        }
        if lowered.contains("timeout") || lowered.contains("timed out") { return "connection timed out" }
        return TableFormatter.singleLine(text)
    }
}
