import AttendanceProtocol
import Foundation
import Hummingbird
import RegistryFeed
import ServiceRuntime

/// `GET /v1/attendance/challenge?beacon=UUID:major:minor`: a short-lived nonce for the GATT
/// challenge-response with that beacon. The nonce is bound to the beacon and the
/// authenticated device and signed with the key the policy service checks it with, so the gateway
/// keeps no state and any gateway instance may hand it out.
///
/// 404 when the gateway has no nonce key (`GATT_NONCE_KEY`) or the beacon is not registered; 400
/// when `beacon` is missing or not an identity.
struct ChallengeController {
    let nonces: GattNonceCodec?
    let cache: RegistryCache
    let now: @Sendable () -> Date

    func addRoutes(to group: RouterGroup<GatewayRequestContext>) {
        group.get("attendance/challenge") { request, context in
            let device = try context.requireDevice()
            guard let nonces else {
                throw ProblemDetails.notFound("the GATT challenge is not enabled on this gateway")
            }
            let beacon = try Self.beacon(request)
            guard cache.resolve(beacon) != nil else {
                throw ProblemDetails.notFound("beacon \(beacon.description) is not registered")
            }
            let (nonce, expiresAt) = nonces.issue(beacon: beacon, deviceId: device.deviceId, now: now())
            return GatewayReply.json(
                ChallengeResponse(beaconId: beacon.description, nonce: nonce, expiresAt: expiresAt), status: 200,
                headers: [.cacheControl: "no-store"]
            )
        }
    }

    static func beacon(_ request: Request) throws(ProblemDetails) -> RegistryBeaconKey {
        let expected = "must be a beacon identity UUID:major:minor (major and minor 0...65535)"
        // One `beacon`, nothing else: a repeated or unknown parameter is a 400, never ignored.
        guard let text = try StrictQuery(request, allowed: ["beacon"]).string("beacon"), !text.isEmpty else {
            throw .validation([FieldError(field: "beacon", reason: "is required; " + expected)])
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let uuid = UUID(uuidString: String(parts[0])), let major = Int(parts[1]), let minor = Int(parts[2]),
            let key = RegistryBeaconKey(uuid: uuid, major: major, minor: minor)
        else {
            throw .validation([FieldError(field: "beacon", reason: expected)])
        }
        return key
    }
}
