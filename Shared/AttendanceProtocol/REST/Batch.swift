/// `POST /v1/attendance/events/batch`: many events in one request, for the short background window
/// (docs/SPECIFICATION.md, "2. The device outbox and delivery"). Each event carries its own
/// `idempotencyKey`; there is no `Idempotency-Key` header for the batch as a whole.
public struct BatchEventsRequest: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var events: [AttendanceEvent]

    public init(events: [AttendanceEvent]) {
        self.events = events
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, events
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        events = try c.decode([AttendanceEvent].self, forKey: .events)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(events, forKey: .events)
    }
}

/// The answer to a batch: one result per event, in request order, each exactly what the single
/// endpoint would have answered (status and body).
public struct BatchEventsResponse: SchemaVersioned, Codable, Hashable, Sendable {
    public static let schemaVersion = 1

    public var results: [BatchItemResult]

    public init(results: [BatchItemResult]) {
        self.results = results
    }

    enum CodingKeys: String, CodingKey {
        case schemaVersion, results
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        _ = try c.decodeSchemaVersion(forKey: .schemaVersion, supported: Self.schemaVersion, required: false)
        results = try c.decode([BatchItemResult].self, forKey: .results)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(results, forKey: .results)
    }
}

public struct BatchItemResult: Codable, Hashable, Sendable {
    public var idempotencyKey: String
    /// The HTTP status this event would have had on its own (201, 200, 202, 409, 422, 400...).
    public var status: Int
    public var body: BatchItemBody

    public init(idempotencyKey: String, status: Int, body: BatchItemBody) {
        self.idempotencyKey = idempotencyKey
        self.status = status
        self.body = body
    }

    enum CodingKeys: String, CodingKey {
        case idempotencyKey, status, body
    }

    /// The body's shape follows the status: 2xx is an `AcceptedResponse`, anything else a problem.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        idempotencyKey = try c.decode(String.self, forKey: .idempotencyKey)
        status = try c.decode(Int.self, forKey: .status)
        if (200..<300).contains(status) {
            body = .accepted(try c.decode(AcceptedResponse.self, forKey: .body))
        } else {
            body = .problem(try c.decode(ProblemDetails.self, forKey: .body))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(idempotencyKey, forKey: .idempotencyKey)
        try c.encode(status, forKey: .status)
        switch body {
        case .accepted(let accepted): try c.encode(accepted, forKey: .body)
        case .problem(let problem): try c.encode(problem, forKey: .body)
        }
    }
}

public enum BatchItemBody: Hashable, Sendable {
    case accepted(AcceptedResponse)
    case problem(ProblemDetails)
}
