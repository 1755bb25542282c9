import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import ServiceRuntime

/// `/v1/admin/organizations`: create (admin), list and read (viewer), allocate the namespace (admin),
/// list the organization's sites (viewer).
struct OrganizationsController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("organizations") { request, context in
            try context.authorize(.admin)
            let organization = try await repository.createOrganization(try await request.decodeJSON(NewOrganization.self))
            return try Reply.json(organization, status: .created, request: request, context: context)
        }
        group.get("organizations") { request, context in
            try context.authorize(.viewer)
            let page = try await PageRequest(request).page(
                { (after, limit) async throws(RegistryError) in
                    try await repository.listOrganizations(after: after, limit: limit)
                }, id: \.id)
            return try Reply.json(page, request: request, context: context)
        }
        group.get("organizations/{id}") { request, context in
            try context.authorize(.viewer)
            let organization = try await repository.organization(id: try context.pathId())
            return try Reply.json(organization, request: request, context: context)
        }
        group.post("organizations/{id}/namespace") { request, context in
            try context.authorize(.admin)
            _ = try await request.decodeJSON(EmptyBody.self, emptyAs: EmptyBody())
            let namespace = try await repository.allocateNamespace(organizationId: try context.pathId())
            return try Reply.json(namespace, request: request, context: context)
        }
        group.get("organizations/{id}/sites") { request, context in
            try context.authorize(.viewer)
            let organizationId = try context.pathId()
            let page = try await PageRequest(request).page(
                { (after, limit) async throws(RegistryError) in
                    try await repository.listSites(organizationId: organizationId, after: after, limit: limit)
                }, id: \.id)
            return try Reply.json(page, request: request, context: context)
        }
    }
}

/// `/v1/admin/sites`: create (admin), read (viewer), list its gates and beacons (viewer), read (viewer)
/// and replace (admin) its detection settings.
struct SitesController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("sites") { request, context in
            try context.authorize(.admin)
            let site = try await repository.createSite(try await request.decodeJSON(NewSite.self))
            return try Reply.json(site, status: .created, request: request, context: context)
        }
        group.get("sites/{id}") { request, context in
            try context.authorize(.viewer)
            let site = try await repository.site(id: try context.pathId())
            return try Reply.json(site, request: request, context: context)
        }
        group.put("sites/{id}/geofence") { request, context in
            try context.authorize(.admin)
            let geofence = try await request.decodeJSON(Geofence.self)
            let site = try await repository.setSiteGeofence(siteId: try context.pathId(), geofence)
            return try Reply.json(site, request: request, context: context)
        }
        group.put("sites/{id}/shift") { request, context in
            try context.authorize(.admin)
            let change = try await request.decodeJSON(SiteShiftChange.self)
            let site = try await repository.setSiteShift(siteId: try context.pathId(), change)
            return try Reply.json(site, request: request, context: context)
        }
        group.get("sites/{id}/gates") { request, context in
            try context.authorize(.viewer)
            let siteId = try context.pathId()
            let page = try await PageRequest(request).page(
                { (after, limit) async throws(RegistryError) in
                    try await repository.listGates(siteId: siteId, after: after, limit: limit)
                }, id: \.id)
            return try Reply.json(page, request: request, context: context)
        }
        group.get("sites/{id}/detection-config") { request, context in
            try context.authorize(.viewer)
            let config = try await repository.detectionConfig(siteId: try context.pathId())
            return try Reply.json(config, request: request, context: context)
        }
        group.put("sites/{id}/detection-config") { request, context in
            let admin = try context.authorize(.admin)
            let document = try DetectionConfigDocument(validating: try await request.bodyBytes())
            let config = try await repository.setDetectionConfig(siteId: try context.pathId(), document, by: admin.id)
            return try Reply.json(config, request: request, context: context)
        }
        group.get("sites/{id}/beacons") { request, context in
            try context.authorize(.viewer)
            let siteId = try context.pathId()
            let page = try await PageRequest(request).page(
                { (after, limit) async throws(RegistryError) in
                    try await repository.listBeacons(siteId: siteId, after: after, limit: limit)
                }, id: \.id)
            return try Reply.json(page, request: request, context: context)
        }
    }
}

/// `/v1/admin/gates`: create (installer), read (viewer), allocate a minor (installer).
struct GatesController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("gates") { request, context in
            try context.authorize(.installer)
            let gate = try await repository.createGate(try await request.decodeJSON(NewGate.self))
            return try Reply.json(gate, status: .created, request: request, context: context)
        }
        group.get("gates/{id}") { request, context in
            try context.authorize(.viewer)
            let gate = try await repository.gate(id: try context.pathId())
            return try Reply.json(gate, request: request, context: context)
        }
        group.post("gates/{id}/minor") { request, context in
            try context.authorize(.installer)
            _ = try await request.decodeJSON(EmptyBody.self, emptyAs: EmptyBody())
            let allocation = try await repository.allocateMinor(gateId: try context.pathId())
            return try Reply.json(allocation, status: .created, request: request, context: context)
        }
    }
}

/// `/v1/admin/users`: create (admin), read and list their devices (viewer), rename and assign to sites
/// (admin), issue an enrollment code (admin).
struct UsersController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("users") { request, context in
            try context.authorize(.admin)
            let user = try await repository.createUser(try await request.decodeJSON(NewUser.self))
            return try Reply.json(user, status: .created, request: request, context: context)
        }
        group.get("users/{id}") { request, context in
            try context.authorize(.viewer)
            let user = try await repository.user(id: try context.pathId())
            return try Reply.json(user, request: request, context: context)
        }
        group.get("users/{id}/devices") { request, context in
            try context.authorize(.viewer)
            let userId = try context.pathId()
            let page = try await PageRequest(request).page(
                { (after, limit) async throws(RegistryError) in
                    try await repository.listDevices(userId: userId, after: after, limit: limit)
                }, id: \.id)
            return try Reply.json(page, request: request, context: context)
        }
        group.put("users/{id}/name") { request, context in
            try context.authorize(.admin)
            let body = try await request.decodeJSON(UserName.self)
            let user = try await repository.renameUser(userId: try context.pathId(), name: body.name)
            return try Reply.json(user, request: request, context: context)
        }
        group.put("users/{id}/sites") { request, context in
            try context.authorize(.admin)
            let body = try await request.decodeJSON(UserSites.self)
            let user = try await repository.setUserSites(userId: try context.pathId(), siteIds: body.siteIds)
            return try Reply.json(user, request: request, context: context)
        }
        group.post("users/{id}/enrollment-codes") { request, context in
            try context.authorize(.admin)
            let body = try await request.decodeJSON(EnrollmentCodeRequest.self, emptyAs: EnrollmentCodeRequest())
            let minutes = body.validityMinutes ?? EnrollmentCodeRequest.defaultValidityMinutes
            guard EnrollmentCodeRequest.validityMinutesRange.contains(minutes) else {
                throw ProblemDetails.validation([FieldError(field: "validityMinutes", reason: "must be within 1...43200 (30 days)")])
            }
            let issued = try await repository.createEnrollmentCode(userId: try context.pathId(), validity: .seconds(minutes * 60))
            return try Reply.json(
                issued, status: .created,
                request: request, context: context
            )
        }
    }
}
