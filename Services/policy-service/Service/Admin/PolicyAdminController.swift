import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import NIOCore
import PolicyServiceCore
import ServiceRuntime

/// `GET /v1/admin/policies`: what this instance decides with now.
package struct ActivePolicies: Codable, Hashable, Sendable {
    package var globalKillSwitch: Bool
    /// The rules this instance implements (a policy may switch on only these).
    package var hostedRules: [PolicyRuleID]
    package var `default`: SitePolicy
    package var sites: [SitePolicy]
}

/// `GET /v1/admin/policies/{siteId}/versions`.
package struct PolicyVersionList: Codable, Hashable, Sendable {
    package var siteId: String
    /// Newest first.
    package var items: [StoredPolicyVersion]
}

/// `PUT /v1/admin/kill-switch` body and answer.
package struct GlobalKillSwitchBody: Codable, Hashable, Sendable {
    /// `true` turns automatic attendance off at every site.
    package var enabled: Bool
}

/// Policy administration (feature flags, kill switch, canary), behind
/// `AdminAuthMiddleware`. Reads need the viewer role, changes the admin role. `{siteId}` is a site
/// id, or `default` for the policy of sites without their own.
///
/// - `GET  /v1/admin/policies`: the active book of this instance.
/// - `GET  /v1/admin/policies/{siteId}`: the policy the site runs now (its own or the default).
/// - `PUT  /v1/admin/policies/{siteId}`: a new version from a `SitePolicyDraft`; validated against
///   the rules this instance hosts (400 with every problem), applied here at once, everywhere
///   within the refresh interval.
/// - `GET  /v1/admin/policies/{siteId}/versions?limit=`: stored versions, newest first.
/// - `POST /v1/admin/policies/{siteId}/versions/{version}/restore`: that version again, as a new one.
/// - `PUT  /v1/admin/kill-switch`: `{"enabled": true}` turns automatic attendance off everywhere.
package struct PolicyAdminController: Sendable {
    package static let defaultScopeName = "default"
    static let maxBodyBytes = 64 * 1024

    let repository: any PolicyRepository
    let refresher: PolicyBookRefresher
    let hostedRules: [PolicyRuleID]

    package func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("policies") { request, context in
            try context.authorize(.viewer)
            let book = refresher.current
            let body = ActivePolicies(
                globalKillSwitch: book.globalKillSwitch, hostedRules: hostedRules, default: book.defaultPolicy,
                sites: book.sites.values.sorted { ($0.siteId ?? "") < ($1.siteId ?? "") }
            )
            return try Reply.json(body, request: request, context: context)
        }
        group.get("policies/:siteId") { request, context in
            try context.authorize(.viewer)
            let siteId = try Self.scope(context)
            let book = refresher.current
            let policy = siteId.flatMap { book.sites[$0] } ?? book.defaultPolicy
            return try Reply.json(policy, request: request, context: context)
        }
        group.put("policies/:siteId") { request, context in
            let admin = try context.authorize(.admin)
            let siteId = try Self.scope(context)
            let draft = try await Self.readDraft(request)
            return try await save(draft, siteId: siteId, by: admin, request: request, context: context)
        }
        group.get("policies/:siteId/versions") { request, context in
            try context.authorize(.viewer)
            let siteId = try Self.scope(context)
            let limit = try Self.limit(request)
            let versions = try await repository.versions(siteId: siteId, limit: limit)
            return try Reply.json(
                PolicyVersionList(siteId: siteId ?? Self.defaultScopeName, items: versions), request: request, context: context)
        }
        group.post("policies/:siteId/versions/:version/restore") { request, context in
            let admin = try context.authorize(.admin)
            let siteId = try Self.scope(context)
            guard let text = context.pathParameter("version"), let version = Int(text), version > 0 else {
                throw ProblemDetails.validation([FieldError(field: "version", reason: "must be a positive integer")])
            }
            guard let stored = try await repository.version(siteId: siteId, version: version) else {
                throw ProblemDetails.notFound("site \(siteId ?? Self.defaultScopeName) has no stored policy version \(version)")
            }
            return try await save(SitePolicyDraft(stored.policy), siteId: siteId, by: admin, request: request, context: context)
        }
        group.put("kill-switch") { request, context in
            let admin = try context.authorize(.admin)
            let bytes = try await Self.readBody(request)
            let body = try AdminJSON.decodeBody(GlobalKillSwitchBody.self, from: Data(bytes))
            try await repository.setGlobalKillSwitch(body.enabled, by: admin.id)
            await refresher.applyStoredChange()
            return try Reply.json(GlobalKillSwitchBody(enabled: body.enabled), request: request, context: context)
        }
    }

    /// Validates and stores `draft` as the scope's next version, recorded as set by `admin`.
    private func save(
        _ draft: SitePolicyDraft, siteId: String?, by admin: APIKey, request: Request, context: AdminContext
    ) async throws -> Response {
        let candidate = draft.policy(siteId: siteId, version: 1)
        let issues = candidate.validationIssues(hostedRules: hostedRules)
        guard issues.isEmpty else {
            throw ProblemDetails.validation(
                issues.map { $0 }, detail: "the policy is not valid")
        }
        let current = refresher.current
        let active = siteId.flatMap { current.sites[$0]?.version } ?? (siteId == nil ? current.defaultPolicy.version : 0)
        let stored = try await repository.save(draft, siteId: siteId, atLeast: active, by: admin.id)
        await refresher.applyStoredChange()
        return try Reply.json(stored, status: .ok, request: request, context: context)
    }

    /// `nil` for the default policy.
    static func scope(_ context: AdminContext) throws(ProblemDetails) -> String? {
        guard let siteId = context.pathParameter("siteId") else {
            throw .validation([FieldError(field: "siteId", reason: "is required")])
        }
        if siteId == defaultScopeName { return nil }
        guard EntityId.isValid(siteId), siteId != PostgresPolicyRepository.defaultScope else {
            throw .validation([FieldError(field: "siteId", reason: "\(EntityId.rule), or \"default\"")])
        }
        return siteId
    }

    /// `limit` (1...500, default 50), the only parameter: a repeated or unknown one is a 400.
    static func limit(_ request: Request) throws(ProblemDetails) -> Int {
        try StrictQuery(request, allowed: ["limit"]).int("limit", default: 50, in: 1...500)
    }

    static func readBody(_ request: Request) async throws -> [UInt8] {
        do {
            let buffer = try await request.body.collect(upTo: maxBodyBytes)
            return Array(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.payloadTooLarge(limitBytes: maxBodyBytes)
        }
    }

    static func readDraft(_ request: Request) async throws -> SitePolicyDraft {
        let bytes = try await readBody(request)
        return try AdminJSON.decodeBody(SitePolicyDraft.self, from: Data(bytes), tolerating: SitePolicyDraft.toleratedMembers)
    }
}

/// The admin routes on a router (the service's application and the tests use the same).
package func addPolicyAdminRoutes(to router: Router<AdminContext>, controller: PolicyAdminController, keyVerifier: any AdminKeyVerifier) {
    router.add(middleware: ProblemMiddleware(ProblemMapper(maxBodyBytes: PolicyAdminController.maxBodyBytes)))
    let admin = router.group("v1/admin").add(middleware: AdminAuthMiddleware<AdminContext>(verifier: keyVerifier))
    controller.addRoutes(to: admin)
}
