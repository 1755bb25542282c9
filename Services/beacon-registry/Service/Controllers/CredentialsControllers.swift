import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import ServiceRuntime

/// `/v1/admin/devices` (admin to revoke, viewer to read) and `/v1/admin/api-keys` (admin).
struct DevicesController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.get("devices/{id}") { request, context in
            try context.authorize(.viewer)
            let device = try await repository.device(id: try context.pathId())
            return try Reply.json(device, request: request, context: context)
        }
        group.post("devices/{id}/revoke") { request, context in
            try context.authorize(.admin)
            _ = try await request.decodeJSON(EmptyBody.self, emptyAs: EmptyBody())
            let device = try await repository.revokeDevice(id: try context.pathId())
            return try Reply.json(device, request: request, context: context)
        }
    }
}

struct APIKeysController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("api-keys") { request, context in
            try context.authorize(.admin)
            let body = try await request.decodeJSON(NewAPIKey.self)
            let issued = try await repository.createAPIKey(name: body.name, role: body.role)
            return try Reply.json(
                issued, status: .created, request: request, context: context)
        }
        group.post("api-keys/{id}/revoke") { request, context in
            try context.authorize(.admin)
            _ = try await request.decodeJSON(EmptyBody.self, emptyAs: EmptyBody())
            let key = try await repository.revokeAPIKey(id: try context.pathId())
            return try Reply.json(key, request: request, context: context)
        }
    }
}

/// `POST /v1/devices/enroll`: no API key; the device presents the one-time code an admin issued.
/// An unknown or expired code is a 401, a spent one a 409.
struct EnrollmentController {
    let repository: any AdminRegistryRepository

    func addRoutes(to router: Router<AdminContext>) {
        router.post("v1/devices/enroll") { request, context in
            let body = try await request.decodeJSON(DeviceEnrollment.self, fromDevice: true)
            let credentials = try await repository.exchangeEnrollmentCode(
                body.code, device: DeviceDescription(appVersion: body.appVersion, model: body.model, installationId: body.installationId)
            )
            return try Reply.json(DeviceCredentialsResponse(credentials), status: .created, request: request, context: context)
        }
    }
}

/// `POST /v1/devices/token`: a new token for the device presenting its current one (and
/// `X-Device-Id`), with the same device id and a full lifetime. A token expired less than
/// `expiredTokenGrace` ago is accepted, so a phone that was off when its token ran out recovers
/// without a new enrollment code; a revoked device, or one now bound to another user, is a 403.
struct DeviceTokenController {
    let repository: any AdminRegistryRepository
    let authentication: DeviceAuthentication

    /// How long after its expiry a token can still be exchanged for a new one.
    static let expiredTokenGrace: TimeInterval = 30 * 86_400

    func addRoutes(to router: Router<AdminContext>) {
        router.post("v1/devices/token") { request, context in
            _ = try StrictQuery(request, allowed: [])
            _ = try await request.decodeJSON(EmptyBody.self, emptyAs: EmptyBody(), fromDevice: true)
            let claims = try authentication.claims(from: request.headers, now: Date(), expiredWithin: Self.expiredTokenGrace)
            let credentials = try await repository.refreshDeviceToken(deviceId: claims.deviceId, userId: claims.userId)
            return try Reply.json(DeviceCredentialsResponse(credentials), request: request, context: context)
        }
    }
}

/// `GET /v1/devices/config`: no API key; the device presents its token and `X-Device-Id`
/// (`DeviceAuthentication`). Answers every site of its user with the beacon namespace to monitor, the
/// site's active beacons and its detection settings, with an `ETag`: a device that sends the tag of
/// the configuration it holds (`If-None-Match`) gets 304 while nothing changed. A device revoked, now
/// bound to another user or unknown here is a 403 (checked before any tag). Each site's detection
/// settings leave out the keys of remote-config schemas later than the app's `X-Config-Schema` (1 when
/// absent), which the app would refuse with the whole document.
struct DeviceConfigurationController {
    let repository: any AdminRegistryRepository
    let authentication: DeviceAuthentication

    func addRoutes(to router: Router<AdminContext>) {
        router.get("v1/devices/config") { request, context in
            _ = try StrictQuery(request, allowed: [])
            let claims = try authentication.claims(from: request.headers, now: Date())
            let schema = try Self.configSchema(request.headers)
            var configuration = try await repository.deviceConfiguration(deviceId: claims.deviceId, userId: claims.userId)
            for i in configuration.sites.indices {
                configuration.sites[i].detectionConfig.document = DetectionConfigDocument.readable(
                    bySchema: schema, configuration.sites[i].detectionConfig.document)
            }
            return try Reply.revalidatedJSON(configuration, request: request, context: context)
        }
    }
}

extension DeviceConfigurationController {
    static let configSchemaHeader = HTTPFields.Element.Name(HTTPHeader.configSchema)!

    /// `X-Config-Schema`: an integer from 1 to 1,000; absent, the first schema.
    static func configSchema(_ headers: HTTPFields) throws(ProblemDetails) -> Int {
        guard let text = headers[configSchemaHeader] else { return 1 }
        guard let schema = Int(text), (1...1_000).contains(schema) else {
            throw .validation([FieldError(field: HTTPHeader.configSchema, reason: "must be an integer from 1 to 1000")])
        }
        return schema
    }
}

extension DeviceCredentialsResponse {
    /// What a device is told of its credentials (enrollment, token refresh).
    init(_ credentials: DeviceCredentials) {
        self.init(
            deviceId: credentials.device.id, userId: credentials.device.userId, token: credentials.token,
            tokenExpiresAt: credentials.claims.expiresAt, device: credentials.device)
    }
}
