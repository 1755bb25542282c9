import Foundation

/// An RFC 9457 problem+json body: every 4xx/5xx answer of the platform.
///
/// Besides the standard members it carries the extension members the app acts on: `errors` (which
/// fields failed validation), `reasons` and `action` (a policy refusal), `retryAfterSeconds`
/// (mirrors the `Retry-After` header). Problem types are URNs from `ProblemType`, not URLs of a
/// host, so they never depend on where the platform is deployed.
public struct ProblemDetails: Error, Codable, Hashable, Sendable {
    public static let mediaType = "application/problem+json"

    /// A URI identifying the problem type; `about:blank` when absent (RFC 9457 sec. 4.2.1).
    public var type: String
    public var title: String
    public var status: Int
    public var detail: String?
    /// The request path or request id the problem is about.
    public var instance: String?
    public var errors: [FieldError]?
    public var reasons: [String]?
    public var action: AppAction?
    public var retryAfterSeconds: Int?

    public init(
        type: String, title: String, status: Int, detail: String? = nil, instance: String? = nil,
        errors: [FieldError]? = nil, reasons: [String]? = nil, action: AppAction? = nil, retryAfterSeconds: Int? = nil
    ) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.instance = instance
        self.errors = errors
        self.reasons = reasons
        self.action = action
        self.retryAfterSeconds = retryAfterSeconds
    }

    public init(
        _ problemType: ProblemType, detail: String? = nil, instance: String? = nil, errors: [FieldError]? = nil,
        reasons: [String]? = nil, action: AppAction? = nil, retryAfterSeconds: Int? = nil
    ) {
        self.init(
            type: problemType.uri, title: problemType.title, status: problemType.status, detail: detail,
            instance: instance, errors: errors, reasons: reasons, action: action, retryAfterSeconds: retryAfterSeconds
        )
    }

    /// The catalogue entry for `type`, when it is one of ours.
    public var problemType: ProblemType? { ProblemType.all.first { $0.uri == type } }

    enum CodingKeys: String, CodingKey {
        case type, title, status, detail, instance, errors, reasons, action, retryAfterSeconds
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decodeIfPresent(String.self, forKey: .type) ?? "about:blank"
        title = try c.decode(String.self, forKey: .title)
        status = try c.decode(Int.self, forKey: .status)
        detail = try c.decodeIfPresent(String.self, forKey: .detail)
        instance = try c.decodeIfPresent(String.self, forKey: .instance)
        errors = try c.decodeIfPresent([FieldError].self, forKey: .errors)
        reasons = try c.decodeIfPresent([String].self, forKey: .reasons)
        action = try c.decodeIfPresent(AppAction.self, forKey: .action)
        retryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds)
    }
}

/// The catalogue of problem types. Each has a stable URN, a fixed title and its HTTP status.
/// Two 409s are distinct types on purpose: a policy refusal is final, a request still in flight is
/// retried with the same key.
public struct ProblemType: Hashable, Sendable {
    public let uri: String
    public let title: String
    public let status: Int

    private init(_ name: String, _ title: String, _ status: Int) {
        uri = "urn:problem:attendance:\(name)"
        self.title = title
        self.status = status
    }

    public static let validation = ProblemType("validation", "The request is not valid", 400)
    public static let missingIdempotencyKey = ProblemType("missing-idempotency-key", "The Idempotency-Key header is required", 400)
    public static let unauthorized = ProblemType("unauthorized", "Authentication is required", 401)
    public static let forbidden = ProblemType("forbidden", "Not allowed", 403)
    public static let notFound = ProblemType("not-found", "Not found", 404)
    public static let policyConflict = ProblemType("policy-conflict", "Refused by attendance policy", 409)
    public static let inFlight = ProblemType("in-flight", "A request with this Idempotency-Key is still being processed", 409)
    /// A registry resource conflict (e.g. the namespace is taken), for admin endpoints.
    public static let conflict = ProblemType("conflict", "Conflicts with the current state", 409)
    public static let payloadTooLarge = ProblemType("payload-too-large", "The request body is too large", 413)
    /// The body is not `application/json` (the device API reads nothing else).
    public static let unsupportedMediaType = ProblemType("unsupported-media-type", "The request body must be application/json", 415)
    public static let payloadMismatch = ProblemType("payload-mismatch", "The Idempotency-Key was used with a different payload", 422)
    /// The beacon UUID is a factory default on the ban list
    /// (docs/SPECIFICATION.md, "7. Registry, provisioning and enrollment").
    public static let bannedBeaconUUID = ProblemType("banned-beacon-uuid", "The beacon UUID is a factory default", 422)
    /// The event's times lie ahead of the server's clock by more than the skew allowed, by less than a
    /// day: a phone clock set wrong between two runs of the app. Not final: the same request is taken
    /// once the server's clock has caught up (`Retry-After`).
    public static let tooEarly = ProblemType("too-early", "The event's time is ahead of the server's clock", 425)
    public static let rateLimited = ProblemType("rate-limited", "Too many requests", 429)
    public static let unavailable = ProblemType("unavailable", "The service is temporarily unavailable", 503)

    public static let all: [ProblemType] = [
        .validation, .missingIdempotencyKey, .unauthorized, .forbidden, .notFound, .policyConflict, .inFlight,
        .conflict, .payloadTooLarge, .payloadMismatch, .bannedBeaconUUID, .rateLimited, .unavailable,
        .unsupportedMediaType, .tooEarly,
    ]
}

extension ProblemDetails {
    /// 400 listing every failing field.
    public static func validation(_ errors: [FieldError], detail: String? = nil, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(
            .validation,
            detail: detail ?? errors.first.map { "\($0.field.isEmpty ? "body" : $0.field): \($0.reason)" },
            instance: instance, errors: errors
        )
    }

    /// 400 for a body that did not decode, naming the field.
    public static func decodingFailed(_ error: ProtocolDecodingError, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.validation, detail: error.description, instance: instance, errors: [error.fieldError])
    }

    public static func missingIdempotencyKey(instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.missingIdempotencyKey, detail: "send a 64-hex Idempotency-Key header", instance: instance)
    }

    public static func unauthorized(_ detail: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.unauthorized, detail: detail, instance: instance)
    }

    public static func forbidden(_ detail: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.forbidden, detail: detail, instance: instance)
    }

    public static func notFound(_ detail: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.notFound, detail: detail, instance: instance)
    }

    /// 409: refused by policy; final, the device drops the event and shows the action.
    public static func policyConflict(
        reasons: [String], action: AppAction, retryAfterSeconds: Int? = nil, instance: String? = nil
    ) -> ProblemDetails {
        ProblemDetails(
            .policyConflict, detail: reasons.first, instance: instance, reasons: reasons, action: action,
            retryAfterSeconds: retryAfterSeconds
        )
    }

    /// 409: the first request with this key has no outcome yet; retry with the same key.
    public static func inFlight(retryAfterSeconds: Int, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.inFlight, instance: instance, action: .retryAfter, retryAfterSeconds: retryAfterSeconds)
    }

    public static func conflict(_ detail: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.conflict, detail: detail, instance: instance)
    }

    /// 415: the body is not JSON by its `Content-Type`.
    public static func unsupportedMediaType(_ received: String?, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(
            .unsupportedMediaType, detail: "Content-Type must be application/json, is \(received ?? "absent")", instance: instance,
            errors: [FieldError(field: "Content-Type", reason: "must be application/json")]
        )
    }

    public static func payloadTooLarge(limitBytes: Int, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.payloadTooLarge, detail: "the limit is \(limitBytes) bytes", instance: instance)
    }

    /// 422: the key was first used with a different payload; final.
    public static func payloadMismatch(instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.payloadMismatch, detail: "the payload differs from the first request with this key", instance: instance)
    }

    public static func bannedBeaconUUID(prefix: String, vendor: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(
            .bannedBeaconUUID, detail: "UUID prefix \(prefix) is the \(vendor) factory default", instance: instance,
            errors: [FieldError(field: "uuid", reason: "factory default of \(vendor)")]
        )
    }

    public static func tooEarly(retryAfterSeconds: Int, detail: String, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.tooEarly, detail: detail, instance: instance, action: .retryAfter, retryAfterSeconds: retryAfterSeconds)
    }

    public static func rateLimited(retryAfterSeconds: Int, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(.rateLimited, instance: instance, action: .retryAfter, retryAfterSeconds: retryAfterSeconds)
    }

    public static func unavailable(_ detail: String? = nil, retryAfterSeconds: Int? = nil, instance: String? = nil) -> ProblemDetails {
        ProblemDetails(
            .unavailable, detail: detail, instance: instance, action: retryAfterSeconds == nil ? nil : .retryAfter,
            retryAfterSeconds: retryAfterSeconds
        )
    }
}
