import AsyncHTTPClient
import AttendanceProtocol
import Foundation
import NIOCore
import NIOHTTP1

/// One HTTP request to the registry, relative to its base URL.
public struct RegistryRequest: Sendable, Hashable {
    public enum Method: String, Sendable, Hashable {
        case get = "GET", post = "POST", patch = "PATCH", put = "PUT"
    }

    public var method: Method
    /// Starts with `/`; path segments already percent-encoded.
    public var path: String
    public var query: [String: String]
    /// JSON; `nil` sends no body.
    public var body: Data?
    /// The bearer token: an API key, or a device token on the device routes; `nil` for the routes that need none.
    public var apiKey: String?
    /// `X-Device-Id`, sent with a device token.
    public var deviceId: String?
    /// `If-None-Match`: the entity tag of the answer the caller already holds.
    public var ifNoneMatch: String?
    /// `X-Config-Schema`: the remote-config schema the device reads (the device configuration).
    public var configSchema: Int?

    public init(
        _ method: Method, _ path: String, query: [String: String] = [:], body: Data? = nil, apiKey: String? = nil, deviceId: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.apiKey = apiKey
        self.deviceId = deviceId
    }

    /// `path?query` with the query sorted by name and percent-encoded.
    public var target: String {
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
public struct RegistryResponse: Sendable, Hashable {
    public var status: Int
    public var contentType: String?
    public var body: Data
    /// The answer's `ETag`, if it had one.
    public var eTag: String?

    public init(status: Int, contentType: String? = nil, body: Data, eTag: String? = nil) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.eTag = eTag
    }
}

/// How `RegistryClient` talks to the registry: HTTP in the CLI and the fleet simulator, a fake in unit tests. Throws
/// `RegistryClientError.unreachable` when no answer came.
public protocol RegistryTransport: Sendable {
    func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse
}

/// HTTP over AsyncHTTPClient. Without a `client`, each request gets its own client that fails at
/// the first refused connection (AsyncHTTPClient's default retries connecting until the deadline:
/// an operator would wait 30 s to learn the URL is wrong), which suits a command's one or two
/// requests; a caller making many passes its own pooled client, which it shuts down.
public struct HTTPRegistryTransport: RegistryTransport {
    /// The longest connecting may take.
    public var connectTimeout: TimeAmount
    /// The longest a whole request may take.
    public var timeout: TimeAmount
    /// Answers larger than this are refused (a provisioning plan is about 10 KiB).
    public var maxResponseBytes: Int
    /// Who is calling, as the `User-Agent` header.
    public var userAgent: String
    let client: HTTPClient?

    public init(
        connectTimeout: TimeAmount = .seconds(10), timeout: TimeAmount = .seconds(30), maxResponseBytes: Int = 16 * 1024 * 1024,
        userAgent: String = "attendancectl", client: HTTPClient? = nil
    ) {
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.userAgent = userAgent
        self.client = client
    }

    public func send(_ request: RegistryRequest, to baseURL: String) async throws(RegistryClientError) -> RegistryResponse {
        var http = HTTPClientRequest(url: baseURL + request.target)
        http.method = HTTPMethod(rawValue: request.method.rawValue)
        http.headers.add(name: "Accept", value: "application/json, application/problem+json")
        http.headers.add(name: "User-Agent", value: userAgent)
        if let key = request.apiKey { http.headers.add(name: "Authorization", value: "Bearer \(key)") }
        if let deviceId = request.deviceId { http.headers.add(name: HTTPHeader.deviceId, value: deviceId) }
        if let tag = request.ifNoneMatch { http.headers.add(name: "If-None-Match", value: tag) }
        if let schema = request.configSchema { http.headers.add(name: HTTPHeader.configSchema, value: String(schema)) }
        if let body = request.body {
            http.headers.add(name: "Content-Type", value: "application/json")
            http.body = .bytes(body)
        }
        let client = self.client ?? Self.singleUseClient(connectTimeout: connectTimeout, timeout: timeout)
        let result: Result<RegistryResponse, any Error>
        do {
            let response = try await client.execute(http, timeout: timeout)
            let buffer = try await response.body.collect(upTo: maxResponseBytes)
            result = .success(
                RegistryResponse(
                    status: Int(response.status.code), contentType: response.headers.first(name: "Content-Type"),
                    body: Data(buffer.readableBytesView), eTag: response.headers.first(name: "ETag")
                ))
        } catch {
            result = .failure(error)
        }
        if self.client == nil { try? await client.shutdown() }
        switch result {
        case .success(let response): return response
        case .failure(let error): throw Self.failure(error, method: request.method, url: baseURL)
        }
    }

    static func singleUseClient(connectTimeout: TimeAmount, timeout: TimeAmount) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: connectTimeout, read: timeout)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// What a request that got no answer tells its caller: a change (not a GET) whose request may have
    /// reached the registry is `outcomeUnknown`; anything else, and a change that certainly was not sent
    /// (no connection made, no such host, no valid URL), is `unreachable`.
    static func failure(_ error: any Error, method: RegistryRequest.Method, url: String) -> RegistryClientError {
        let reason = reason(error)
        return method != .get && !neverSent(error) ? .outcomeUnknown(url: url, reason: reason) : .unreachable(url: url, reason: reason)
    }

    /// Whether the request certainly never left: the connection was not made.
    static func neverSent(_ error: any Error) -> Bool {
        if let http = error as? HTTPClientError {
            return http == .connectTimeout || http == .invalidURL || http == .emptyHost || http == .emptyScheme
        }
        let reason = reason(error)
        return reason == "connection refused" || reason == "the host name does not resolve" || reason == "connection timed out"
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
        return RegistryClientError.singleLine(text)
    }
}
