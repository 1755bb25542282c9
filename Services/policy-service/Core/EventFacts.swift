import AttendanceProtocol
import Foundation

// What the rules read from a raw event, whichever endpoint produced it.

extension RawEventEnvelope {
    /// The rich device event (`POST /v1/attendance/events`), or `nil` for the session contracts.
    package var attendanceEvent: AttendanceEvent? {
        if case .event(let event) = payload { return event }
        return nil
    }

    /// The site the event is for: the gateway's, else the payload's (check-outs and heartbeats
    /// may have neither).
    package var policySiteId: String? {
        if let siteId { return siteId }
        switch payload {
        case .event(let event): return event.siteId
        case .checkIn(let request): return request.siteId
        case .checkOut, .heartbeat: return nil
        }
    }

    /// Every site the event claims (gateway and payload), without repeats.
    var claimedSiteIds: [String] {
        var ids: [String] = []
        if let siteId { ids.append(siteId) }
        switch payload {
        case .event(let event): if !ids.contains(event.siteId) { ids.append(event.siteId) }
        case .checkIn(let request): if !ids.contains(request.siteId) { ids.append(request.siteId) }
        case .checkOut, .heartbeat: break
        }
        return ids
    }

    /// Check-ins and check-outs are punches; heartbeats are not.
    var isPunch: Bool { payload.eventType != .heartbeat }

    /// Every app version the event states: the `X-App-Version` header, the body's `app.version`,
    /// a check-in's `deviceMeta.appVersion`.
    var statedAppVersions: [String] {
        var versions: [String] = []
        if let appVersion { versions.append(appVersion) }
        switch payload {
        case .event(let event): if let v = event.app?.version, !versions.contains(v) { versions.append(v) }
        case .checkIn(let request):
            if !versions.contains(request.deviceMeta.appVersion) { versions.append(request.deviceMeta.appVersion) }
        case .checkOut, .heartbeat: break
        }
        return versions
    }

    /// The hardware model, when the payload states it.
    var statedDeviceModel: String? {
        switch payload {
        case .event(let event): return event.device?.model
        case .checkIn(let request): return request.deviceMeta.model
        case .checkOut, .heartbeat: return nil
        }
    }
}

/// Human wording shared by the rules' reasons.
enum Wording {
    static func punched(_ type: AttendanceEventType) -> String {
        switch type {
        case .checkin: return "checked in"
        case .checkout: return "checked out"
        case .heartbeat: return "reported presence"
        }
    }

    static func seconds(_ interval: TimeInterval) -> String {
        "\(whole(interval, .down)) s"
    }

    /// `40 s`, `15 min`, `3 h`: a coarse duration for reasons.
    static func duration(_ interval: TimeInterval) -> String {
        let seconds = abs(interval)
        if seconds < 120 { return "\(whole(seconds, .down)) s" }
        if seconds < 7_200 { return "\(whole(seconds / 60, .down)) min" }
        return "\(whole(seconds / 3_600, .down)) h"
    }

    static func meters(_ distance: Double) -> String {
        distance >= 10_000 ? "\(whole(distance / 1000, .toNearestOrAwayFromZero)) km" : "\(whole(distance, .toNearestOrAwayFromZero)) m"
    }

    /// `value` rounded by `rule` as a whole number a reason prints: bounded to +-10^15 (`Int(_:)` traps
    /// beyond its range), 0 for a value that is not finite. A reason is words, never arithmetic.
    static func whole(_ value: Double, _ rule: FloatingPointRoundingRule) -> Int {
        guard value.isFinite else { return 0 }
        return Int(min(max(value.rounded(rule), -1e15), 1e15))
    }
}

/// Great-circle distance on a spherical Earth (haversine), metres.
package enum GeoDistance {
    /// The IUGG mean Earth radius.
    package static let earthRadiusMeters = 6_371_008.8

    package static func haversineMeters(lat1: Double, lon1: Double, lat2: Double, lon2: Double) -> Double {
        let toRadians = Double.pi / 180
        let dLat = (lat2 - lat1) * toRadians
        let dLon = (lon2 - lon1) * toRadians
        let s = sin(dLat / 2)
        let t = sin(dLon / 2)
        let a = s * s + cos(lat1 * toRadians) * cos(lat2 * toRadians) * t * t
        return 2 * earthRadiusMeters * asin(min(1, a.squareRoot()))
    }
}
