import AttendanceProtocol
import Foundation
import Hummingbird

extension HTTPFields.Element.Name {
    /// `X-Device-Id`: the device a device route's request is for.
    public static let deviceId = Self(HTTPHeader.deviceId)!
}

/// How every device route checks the caller, the same in every service:
/// `Authorization: Bearer <device token>` verified with the `DeviceTokenSigner` keys (missing,
/// malformed, forged, or expired: 401), and `X-Device-Id` required (400 naming it) and equal to the
/// token's device (403). Whether the device is still enrolled is each service's own check (the
/// gateway asks its registry feed, the registry its tables).
public struct DeviceAuthentication: Sendable {
    public let signer: DeviceTokenSigner

    public init(signer: DeviceTokenSigner) { self.signer = signer }

    /// The verified claims of a request's headers (a token expired less than `expiredWithin` ago
    /// passes: the token refresh's).
    public func claims(from headers: HTTPFields, now: Date, expiredWithin grace: TimeInterval = 0) throws(ProblemDetails) -> DeviceClaims {
        let token = try Self.bearerToken(in: headers)
        let claims: DeviceClaims
        do {
            claims = try signer.verify(token, now: now, expiredWithin: grace)
        } catch {
            throw .unauthorized(error.description)
        }
        try Self.requireDeviceHeader(in: headers, matching: claims)
        return claims
    }

    /// The token of `Authorization: Bearer <token>`, without the spaces or tabs around it.
    public static func bearerToken(in headers: HTTPFields) throws(ProblemDetails) -> String {
        guard let header = headers[.authorization] else {
            throw .unauthorized("send a device token: Authorization: Bearer <token>")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw .unauthorized("the Authorization header must be: Bearer <device token>")
        }
        return String(trimmingSpacesAndTabs(parts[1]))
    }

    /// `X-Device-Id` must be present and name the token's device.
    public static func requireDeviceHeader(in headers: HTTPFields, matching claims: DeviceClaims) throws(ProblemDetails) {
        guard let claimedDevice = headers[.deviceId], !claimedDevice.isEmpty else {
            throw .validation([FieldError(field: HTTPHeader.deviceId, reason: "is required")])
        }
        guard claimedDevice == claims.deviceId else {
            var problem = ProblemDetails.forbidden("X-Device-Id does not match the device the token was issued to")
            problem.errors = [FieldError(field: HTTPHeader.deviceId, reason: "must be the token's device")]
            throw problem
        }
    }

    /// A header value's ends without Foundation's `trimmingCharacters(in:)`, which is slow on the
    /// gateway's hot path.
    static func trimmingSpacesAndTabs(_ text: Substring) -> Substring {
        var text = text
        while let first = text.utf8.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        while let last = text.utf8.last, last == 0x20 || last == 0x09 { text = text.dropLast() }
        return text
    }
}
