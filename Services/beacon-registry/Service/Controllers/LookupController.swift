import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import RegistryFeed
import ServiceRuntime

/// `/v1/admin/lookup/...` (viewer): who owns a beacon identity, answered from the in-memory
/// `RegistryCache` the registry keeps from its own change feed (the same cache the gateway and the
/// policy service hold), not from PostgreSQL: a lookup costs a dictionary read (p50 about 0.3 µs,
/// see `make bench-registry`). The cache follows the feed within about a second of a write.
struct LookupController {
    let cache: RegistryCache

    func addRoutes(to group: RouterGroup<AdminContext>) {
        let lookup = group.group("lookup")
        lookup.get("beacon") { request, context in
            try context.authorize(.viewer)
            let query = try StrictQuery(request, allowed: ["uuid", "major", "minor"])
            let uuid = try Self.uuid(query["uuid"], field: "uuid")
            let major = try Self.requiredInt(query, "major"), minor = try Self.requiredInt(query, "minor")
            guard let resolution = cache.resolve(uuid: uuid, major: major, minor: minor) else {
                throw ProblemDetails.notFound("no registered beacon broadcasts \(uuid.uuidString) major \(major) minor \(minor)")
            }
            return try Reply.json(BeaconLookupResponse(resolution), request: request, context: context)
        }
        lookup.get("business") { request, context in
            try context.authorize(.viewer)
            let query = try StrictQuery(request, allowed: ["uuid", "major"])
            let uuid = try Self.uuid(query["uuid"], field: "uuid")
            let major = try Self.requiredInt(query, "major")
            guard let business = cache.business(uuid: uuid, major: major) else {
                throw ProblemDetails.notFound("no organization holds namespace \(uuid.uuidString) major \(major)")
            }
            return try Reply.json(
                BusinessLookupResponse(
                    uuid: uuid.uuidString, major: major, organizationId: business.organizationId,
                    organizationName: business.organization?.name),
                request: request, context: context
            )
        }
        lookup.get("uuid/{uuid}") { request, context in
            try context.authorize(.viewer)
            let uuid = try Self.uuid(context.pathParameter("uuid"), field: "uuid")
            let beacons = cache.beacons(uuid: uuid).sorted { ($0.key.major, $0.key.minor) < ($1.key.major, $1.key.minor) }
            return try Reply.json(
                BeaconsByUUIDResponse(
                    uuid: uuid.uuidString, beacons: beacons.compactMap { cache.resolve($0.key).map(BeaconLookupResponse.init) }),
                request: request, context: context
            )
        }
        lookup.get("mac/{mac}") { request, context in
            try context.authorize(.viewer)
            let mac = context.pathParameter("mac") ?? ""
            guard let normalized = RegistryCache.normalizeMAC(mac) else {
                throw ProblemDetails.validation([
                    FieldError(field: "mac", reason: "must be six hex octets, e.g. AC:23:3F:A1:B2:C3 or ac-23-3f-a1-b2-c3")
                ])
            }
            guard let beacon = cache.beacon(mac: normalized), let resolution = cache.resolve(beacon.key) else {
                throw ProblemDetails.notFound("no registered beacon has MAC \(normalized)")
            }
            return try Reply.json(BeaconLookupResponse(resolution), request: request, context: context)
        }
    }

    static func uuid(_ text: String?, field: String) throws(ProblemDetails) -> UUID {
        guard let text else { throw .validation([FieldError(field: field, reason: "is required")]) }
        guard let uuid = BeaconUUID.parse(text) else {
            throw .validation([
                FieldError(field: field, reason: "must be a UUID such as 8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34 (dashes optional)")
            ])
        }
        return uuid
    }

    static func requiredInt(_ query: StrictQuery, _ name: String) throws(ProblemDetails) -> Int {
        guard query[name] != nil else { throw .validation([FieldError(field: name, reason: "is required")]) }
        return try query.int(name, default: 0, in: 0...65_535)
    }
}

extension BeaconLookupResponse {
    init(_ resolution: BeaconResolution) {
        let status: String
        switch resolution.status {
        case .active: status = "active"
        case .retired: status = "retired"
        case .lost: status = "lost"
        case .unrecognized(let raw): status = raw
        }
        self.init(
            beaconId: resolution.beaconId, uuid: resolution.beacon.key.uuid.uuidString, major: Int(resolution.beacon.key.major),
            minor: Int(resolution.beacon.key.minor), mac: resolution.beacon.mac, status: status, gateId: resolution.gateId,
            gateName: resolution.gate?.name, siteId: resolution.siteId, siteName: resolution.site?.name,
            timezone: resolution.site?.timezone, organizationId: resolution.organizationId)
    }
}
