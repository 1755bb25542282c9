import AttendanceProtocol
import Foundation
import Hummingbird
import IngestGatewayCore
import Logging
import ServiceRuntime

/// The device's attendance routes (docs/SPECIFICATION.md, "3. Device API"):
/// - `POST /v1/attendance/events` (header `Idempotency-Key` required, equal to the body's key),
///   `POST /v1/attendance/events/batch` (each event's own key);
/// - `POST /v1/attendance/check-in`, `/check-out`, `/heartbeat` (key from the header, or derived
///   from the session key, see `IdempotencyKeys`);
/// - `GET /v1/attendance/events/{idempotencyKey}`: this device's earlier request;
/// - `GET /v1/attendance/pending?since=`: this device's requests and the user's open sessions.
struct AttendanceController {
    let pipeline: IngestPipeline
    let repository: any AttendanceReadRepository
    let now: @Sendable () -> Date

    var settings: GatewayConfiguration { pipeline.settings }

    func addRoutes(to group: RouterGroup<GatewayRequestContext>) {
        group.post("attendance/events", use: postEvent)
        group.post("attendance/events/batch", use: postBatch)
        group.get("attendance/events/:idempotencyKey", use: getEvent)
        group.post("attendance/check-in") { request, context in
            try await postContract(request, context, as: CheckInRequest.self) { .checkIn($0) }
        }
        group.post("attendance/check-out") { request, context in
            try await postContract(request, context, as: CheckOutRequest.self) { .checkOut($0) }
        }
        group.post("attendance/heartbeat") { request, context in
            try await postContract(request, context, as: HeartbeatRequest.self) { .heartbeat($0) }
        }
        group.get("attendance/pending", use: getPending)
    }

    // MARK: POST

    @Sendable func postEvent(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        guard let rawKey = request.headers[.idempotencyKey] else { throw ProblemDetails.missingIdempotencyKey() }
        let key = try Self.parseKey(rawKey)
        let appVersion = try Self.appVersion(request)
        let bytes = try await DeviceBody.read(request, maxBytes: settings.limits.maxBodyBytes)
        let event = try DeviceBody.decode(AttendanceEvent.self, from: bytes)
        try check(event, device: device, at: now())
        guard event.idempotencyKey == key else {
            throw ProblemDetails.validation([FieldError(field: "idempotencyKey", reason: "must equal the Idempotency-Key header")])
        }
        let answer = await pipeline.submit(
            .init(
                idempotencyKey: key, payload: .event(event), device: device, appVersion: appVersion, requestId: context.requestId
            ), now: now())
        return Self.render(answer)
    }

    @Sendable func postBatch(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        let appVersion = try Self.appVersion(request)
        let bytes = try await DeviceBody.read(request, maxBytes: settings.limits.maxBodyBytes)
        let batch = try DeviceBody.decode(BatchEventsRequest.self, from: bytes)
        if batch.events.isEmpty {
            throw ProblemDetails.validation([FieldError(field: "events", reason: "must not be empty")])
        }
        if batch.events.count > settings.limits.maxBatchEvents {
            throw ProblemDetails.validation([
                FieldError(
                    field: "events", reason: "must have at most \(settings.limits.maxBatchEvents) events, has \(batch.events.count)"
                )
            ])
        }
        let at = now()
        // Each item is judged alone: an invalid one is a 400 item, the others go ahead. A key that
        // appears twice is processed once; its repeats get the same answer (or 422 when their
        // payload differs).
        var results = [BatchItemResult?](repeating: nil, count: batch.events.count)
        var firstIndex: [String: Int] = [:]
        var toSubmit: [(Int, AttendanceEvent)] = []
        for (index, event) in batch.events.enumerated() {
            do throws(ProblemDetails) {
                try check(event, device: device, at: at, prefix: "events[\(index)]")
            } catch {
                results[index] = BatchItemResult(idempotencyKey: event.idempotencyKey, status: error.status, body: .problem(error))
                continue
            }
            if firstIndex[event.idempotencyKey] == nil {
                firstIndex[event.idempotencyKey] = index
                toSubmit.append((index, event))
            }
        }
        let answers = await withTaskGroup(of: (Int, IngestPipeline.Answer).self) { group in
            for (index, event) in toSubmit {
                let submission = IngestPipeline.Submission(
                    idempotencyKey: event.idempotencyKey, payload: .event(event), device: device, appVersion: appVersion,
                    requestId: "\(context.requestId)-\(index)"
                )
                group.addTask { (index, await pipeline.submit(submission, now: at)) }
            }
            var answers: [Int: IngestPipeline.Answer] = [:]
            for await (index, answer) in group { answers[index] = answer }
            return answers
        }
        for (index, event) in batch.events.enumerated() where results[index] == nil {
            let first = firstIndex[event.idempotencyKey]!
            var answer = answers[first]!
            if first != index {
                if batch.events[first] != event {
                    answer = .problem(.payloadMismatch(instance: APIPath.event(idempotencyKey: event.idempotencyKey)), replayed: false)
                } else if case .accepted(let body, let status, _) = answer, status == AcceptanceStatus.accepted.httpStatus {
                    answer = .accepted(body, status: 200, replayed: true)
                }
            }
            results[index] = Self.item(event.idempotencyKey, answer)
        }
        return GatewayReply.json(BatchEventsResponse(results: results.map { $0! }), status: 200)
    }

    func postContract<T: Decodable & Validatable & Sendable>(
        _ request: Request, _ context: GatewayRequestContext, as type: T.Type, wrap: (T) -> RawEventPayload
    ) async throws -> Response {
        let device = try context.requireDevice()
        let header = try request.headers[.idempotencyKey].map(Self.parseKey)
        let appVersion = try Self.appVersion(request)
        let bytes = try await DeviceBody.read(request, maxBytes: settings.limits.maxBodyBytes)
        let body = try DeviceBody.decode(T.self, from: bytes)
        let at = now()
        let errors = body.validate(now: at, limits: settings.limits)
        let early = errors.isEmpty ? nil : earlyProblem(body, at: at)
        if early == nil && !errors.isEmpty { throw ProblemDetails.validation(errors) }
        if let checkIn = body as? CheckInRequest, checkIn.userId != device.userId {
            throw Self.notYours("userId", "must be the user the device is bound to")
        }
        if let early { throw early }
        let payload = wrap(body)
        let key = IdempotencyKeys.key(for: payload, userId: device.userId, deviceId: device.deviceId, header: header)!
        let answer = await pipeline.submit(
            .init(
                idempotencyKey: key, payload: payload, device: device, appVersion: appVersion, requestId: context.requestId
            ), now: now())
        var response = Self.render(answer)
        response.headers[.idempotencyKey] = header ?? key
        return response
    }

    // MARK: GET

    @Sendable func getEvent(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        guard let raw = context.pathParameter("idempotencyKey"), let key = IdempotencyKeys.parseHeader(raw) else {
            throw ProblemDetails.validation([FieldError(field: "idempotencyKey", reason: "is not an idempotency key")])
        }
        // The key as a session contract's header (scoped to the device), else as the event's own.
        let keys = [IdempotencyKeys.scoped(header: key, userId: device.userId, deviceId: device.deviceId), key]
        let at = now()
        let remembered = keys.compactMap { pipeline.table.lookup(key: $0, deviceId: device.deviceId, now: at) }
        if let finished = remembered.first(where: { $0.outcome != nil }) {
            return GatewayReply.json(finished.response, status: 200)
        }
        let stored: EventOutcomeResponse?
        do {
            stored = try await repository.outcome(idempotencyKeys: keys, deviceId: device.deviceId)
        } catch {
            // In flight here: pending is still a true answer without the database.
            if let pending = remembered.first { return GatewayReply.json(pending.response, status: 200) }
            pipeline.outcomeStoreFailureLog.log(
                .warning, "outcome lookup failed", metadata: ["error": .string(PostgresFailure.description(of: error))],
                logger: context.logger)
            throw ProblemDetails.unavailable("the outcome store is not reachable", retryAfterSeconds: settings.retryAfterSeconds)
        }
        if let outcome = stored ?? remembered.first?.response { return GatewayReply.json(outcome, status: 200) }
        throw ProblemDetails.notFound("no request with this Idempotency-Key from this device")
    }

    @Sendable func getPending(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        guard let text = try StrictQuery(request, allowed: ["since"]).string("since") else {
            throw ProblemDetails.validation([FieldError(field: "since", reason: "is required (an RFC 3339 timestamp)")])
        }
        guard let since = WireTimestamp.date(from: text) else {
            throw ProblemDetails.validation([
                FieldError(field: "since", reason: "must be an RFC 3339 timestamp such as 2025-09-18T06:35:12Z")
            ])
        }
        // Down to its millisecond: a request received after this poll, in the same millisecond, is in the next.
        let asOf = WireTimestamp.flooredToWirePrecision(now())
        let limit = settings.pendingMaxEvents
        let stored: [EventOutcomeResponse]
        let sessions: [SessionSummary]
        do {
            stored = try await repository.events(deviceId: device.deviceId, since: since, limit: limit)
            sessions = try await repository.openSessions(userId: device.userId)
        } catch {
            pipeline.outcomeStoreFailureLog.log(
                .warning, "pending lookup failed", metadata: ["error": .string(PostgresFailure.description(of: error))],
                logger: context.logger)
            throw ProblemDetails.unavailable("the outcome store is not reachable", retryAfterSeconds: settings.retryAfterSeconds)
        }
        // Requests still in flight here (or decided but not yet read back) join the stored ones.
        let storedKeys = Set(stored.map(\.idempotencyKey))
        let inMemory = pipeline.table.entries(deviceId: device.deviceId, since: since, now: asOf)
            .filter { !storedKeys.contains($0.key) }.map(\.response)
        var events = (stored + inMemory).sorted { ($0.receivedAt, $0.idempotencyKey) < ($1.receivedAt, $1.idempotencyKey) }
        var next = asOf
        if events.count > limit || stored.count == limit {
            events = Array(events.prefix(limit))
            // Truncated: the next page starts at the last event returned.
            next = events.last?.receivedAt ?? asOf
        }
        // `asOf` is the next `since`: it never passes a request still pending, whose outcome a later
        // poll must show (it keeps its receipt time, which is before now).
        // (Down to its millisecond, the precision `asOf` travels with.)
        if let oldestPending = events.first(where: { $0.status == .pending }) {
            next = min(next, WireTimestamp.flooredToWirePrecision(oldestPending.receivedAt))
        }
        let body = PendingResponse(deviceId: device.deviceId, since: since, asOf: next, events: events, openSessions: sessions)
        return GatewayReply.json(body, status: 200)
    }

    // MARK: Checks and rendering

    /// Validation (400, every failing field), ownership (403: the body's device and user must be the
    /// authenticated ones), then earliness (425: valid but for times ahead of the server's clock). An
    /// event of another device or user is refused as such first, so its phone can set it aside.
    func check(_ event: AttendanceEvent, device: AuthenticatedDevice, at: Date, prefix: String? = nil) throws(ProblemDetails) {
        var errors = event.validate(now: at, limits: settings.limits)
        let early = errors.isEmpty ? nil : earlyProblem(event, at: at)
        if let prefix {
            errors = errors.map { FieldError(field: $0.field.isEmpty ? prefix : "\(prefix).\($0.field)", reason: $0.reason) }
        }
        if early == nil && !errors.isEmpty { throw .validation(errors) }
        let path = { (field: String) in prefix.map { "\($0).\(field)" } ?? field }
        guard event.deviceId == device.deviceId else {
            throw Self.notYours(path("deviceId"), "must be the authenticated device (X-Device-Id)")
        }
        guard event.userId == device.userId else { throw Self.notYours(path("userId"), "must be the user the device is bound to") }
        if let early { throw early }
    }

    /// A 425 for a payload whose only problem is that its times lie ahead of the server's clock by more
    /// than the skew allowed and at most `limits.maxEarlyWait` more: a phone whose clock was set wrong
    /// between two runs of the app stamped it, and a 400 would make the phone delete an attendance event
    /// the server takes once its clock catches up. `Retry-After` says when. Nil for any other fault.
    func earlyProblem(_ payload: some Validatable, at: Date) -> ProblemDetails? {
        let limits = settings.limits
        guard let wait = payload.secondsUntilAcceptable(now: at, limits: limits, within: limits.maxEarlyWait.timeInterval) else {
            return nil
        }
        return .tooEarly(
            retryAfterSeconds: wait,
            detail:
                "the event's time is more than \(limits.maxClockSkewAhead.humanReadable) ahead of the server's clock; send it again in \(wait) s"
        )
    }

    static func notYours(_ field: String, _ reason: String) -> ProblemDetails {
        var problem = ProblemDetails.forbidden("\(field) \(reason)")
        problem.errors = [FieldError(field: field, reason: reason)]
        return problem
    }

    static func parseKey(_ raw: String) throws(ProblemDetails) -> String {
        guard let key = IdempotencyKeys.parseHeader(raw) else {
            throw .validation([
                FieldError(
                    field: HTTPHeader.idempotencyKey,
                    reason: "must be 1-\(IdempotencyKeys.maxHeaderLength) characters of A-Z a-z 0-9 - _ . :"
                )
            ])
        }
        return key
    }

    static func appVersion(_ request: Request) throws(ProblemDetails) -> String? {
        guard let value = request.headers[.appVersion] else { return nil }
        guard (1...64).contains(value.utf8.count), !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .validation([FieldError(field: HTTPHeader.appVersion, reason: "must be 1-64 bytes without control characters")])
        }
        return value
    }

    static func render(_ answer: IngestPipeline.Answer) -> Response {
        GatewayMetrics.answered(status: answer.status)
        switch answer {
        case .accepted(let body, let status, let replayed):
            var headers: HTTPFields = [:]
            if replayed { headers[.idempotentReplayed] = "true" }
            if let url = body.statusUrl {
                headers[.location] = url
                headers[.retryAfter] = "1"
            }
            return GatewayReply.json(body, status: status, headers: headers)
        case .problem(let problem, let replayed):
            return ProblemMapper.response(problem, headers: replayed ? [.idempotentReplayed: "true"] : [:])
        }
    }

    /// One event's result in a batch; counted as if the event had been sent alone, so the answers by
    /// status (and the 409 alert) see a backlog sent in batches.
    static func item(_ key: String, _ answer: IngestPipeline.Answer) -> BatchItemResult {
        GatewayMetrics.answered(status: answer.status)
        switch answer {
        case .accepted(let body, let status, _): return BatchItemResult(idempotencyKey: key, status: status, body: .accepted(body))
        case .problem(let problem, _): return BatchItemResult(idempotencyKey: key, status: problem.status, body: .problem(problem))
        }
    }
}
