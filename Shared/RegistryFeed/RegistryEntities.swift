import AttendanceProtocol
import Foundation

// What the cache keeps of each registry entity: only the fields lookups answer with. They are read
// from the payloads the beacon registry writes to `registry.change_outbox` (its Model types encoded
// with `ProtocolCodec.wire`: camelCase keys, upper-case dashed UUID strings, RFC 3339 timestamps,
// absent optionals omitted). This module does not depend on the registry core, so the shapes are
// read field by field from the JSON; fields the cache does not need are ignored.

/// A beacon's status as the registry publishes it (`active`, `retired`, `lost`); kept open so a
/// newer registry's value does not make the beacon unreadable.
public enum CachedBeaconStatus: Hashable, Sendable {
    case active, retired, lost
    case unrecognized(String)

    init(_ raw: String) {
        switch raw {
        case "active": self = .active
        case "retired": self = .retired
        case "lost": self = .lost
        default: self = .unrecognized(raw)
        }
    }
}

public struct CachedBeacon: Hashable, Sendable {
    public var id: String
    public var key: RegistryBeaconKey
    /// `AA:BB:CC:DD:EE:FF`, upper case.
    public var mac: String?
    public var txPower: Int?
    public var status: CachedBeaconStatus
    public var gateId: String
    /// The beacon's GATT challenge key, sealed by the registry for the policy service (which alone
    /// holds the key to open it); `nil` when the registry published none. Other readers keep it opaque.
    public var gattKey: SealedBeaconKey? = nil
    /// The key `gattKey` replaced, with its `validUntil`, during a rotation's grace (the physical
    /// beacon signs with it until an installer writes the new one); sealed like `gattKey`.
    public var previousGattKey: SealedBeaconKey? = nil
    /// When the registry last changed the beacon (its status, its gate, anything else), as it publishes
    /// it; nil from a publisher that sends none. A status or gate seen now held no later than this.
    public var updatedAt: Date? = nil
}

public struct CachedGate: Hashable, Sendable {
    public var id: String
    public var siteId: String
    public var name: String
}

/// A site's geofence as the registry publishes it.
public typealias CachedGeofence = Geofence

public struct CachedSite: Hashable, Sendable {
    public var id: String
    public var organizationId: String
    public var name: String
    /// IANA zone name.
    public var timezone: String
    public var geofence: CachedGeofence
    /// The site's shift as the registry publishes it; `nil` when the payload has none (or an
    /// unreadable one: the site stays usable for the lookups that do not need it).
    public var shift: CachedShift? = nil
    /// The shifts of its earlier days, oldest first (`Site.shiftHistory`); the readable ones.
    public var shiftHistory: [ShiftPeriod] = []
}

/// A site's shift as the registry publishes it.
public typealias CachedShift = ShiftSettings

public struct CachedOrganization: Hashable, Sendable {
    public var id: String
    public var name: String
}

public struct CachedNamespace: Hashable, Sendable {
    public var key: RegistryNamespaceKey
    public var organizationId: String
}

public struct CachedMinorAllocation: Hashable, Sendable {
    public var key: RegistryBeaconKey
    public var gateId: String
}

public enum CachedDeviceStatus: Hashable, Sendable {
    case enrolled, revoked
    case unrecognized(String)

    init(_ raw: String) {
        switch raw {
        case "enrolled": self = .enrolled
        case "revoked": self = .revoked
        default: self = .unrecognized(raw)
        }
    }
}

public struct CachedDevice: Hashable, Sendable {
    public var id: String
    public var userId: String
    public var status: CachedDeviceStatus
    /// Only `enrolled` devices may report; anything else (revoked, unknown) is refused.
    public var isActive: Bool { status == .enrolled }
}

public struct CachedUser: Hashable, Sendable {
    public var id: String
    public var name: String
    public var siteIds: [String]
    /// When the user's sites last changed (`User.sitesChangedAt`): they held no later than this.
    public var sitesChangedAt: Date? = nil
}

/// The answer to "which beacon is (uuid, major, minor)": the beacon and where it is mounted.
/// `gate`, `site` and `organization` are `nil` when their own records have not arrived (yet).
public struct BeaconResolution: Hashable, Sendable {
    public var beacon: CachedBeacon
    public var gate: CachedGate?
    public var site: CachedSite?
    /// The site's organization, or failing that the namespace's.
    public var organizationId: String?

    public var beaconId: String { beacon.id }
    public var gateId: String { beacon.gateId }
    public var siteId: String? { gate?.siteId }
    public var status: CachedBeaconStatus { beacon.status }
}

/// The answer to "whose business is (uuid, major)".
public struct BusinessResolution: Hashable, Sendable {
    public var namespace: CachedNamespace
    public var organization: CachedOrganization?
    public var organizationId: String { namespace.organizationId }
}

/// Why a record was not applied to the cache (all harmless: the cache keeps its current state).
public enum RegistryApplyOutcome: Hashable, Sendable {
    case applied
    /// A version at or below the one the cache already holds for the key (a replay or a reorder).
    case stale
    /// An entity type the cache does not keep (enrollment codes, API keys, newer types).
    case ignored
    /// The payload lacks a field the cache needs; `reason` says which.
    case malformed(String)
}

// MARK: Payload reading

enum PayloadReader {
    static func string(_ payload: JSONValue, _ field: String) throws(PayloadError) -> String {
        guard let value = payload[field]?.stringValue else { throw PayloadError(field: field) }
        return value
    }

    static func optionalString(_ payload: JSONValue, _ field: String) -> String? {
        payload[field]?.stringValue
    }

    static func int(_ payload: JSONValue, _ field: String) throws(PayloadError) -> Int {
        guard let value = payload[field]?.int64Value, let int = Int(exactly: value) else { throw PayloadError(field: field) }
        return int
    }

    static func optionalInt(_ payload: JSONValue, _ field: String) -> Int? {
        payload[field]?.int64Value.flatMap { Int(exactly: $0) }
    }

    static func double(_ payload: JSONValue, _ field: String, in range: ClosedRange<Double>) throws(PayloadError) -> Double {
        guard let value = payload[field]?.doubleValue, range.contains(value) else { throw PayloadError(field: field) }
        return value
    }

    static func uuid(_ payload: JSONValue, _ field: String) throws(PayloadError) -> UUID {
        guard let text = payload[field]?.stringValue, let uuid = UUID(uuidString: text) else { throw PayloadError(field: field) }
        return uuid
    }

    static func beacon(_ p: JSONValue) throws(PayloadError) -> CachedBeacon {
        guard let key = RegistryBeaconKey(uuid: try uuid(p, "uuid"), major: try int(p, "major"), minor: try int(p, "minor")) else {
            throw PayloadError(field: "major/minor")
        }
        return CachedBeacon(
            id: try string(p, "id"), key: key, mac: optionalString(p, "mac")?.uppercased(),
            txPower: optionalInt(p, "txPower"), status: CachedBeaconStatus(try string(p, "status")),
            gateId: try string(p, "gateId"), gattKey: sealedKey(p["gattKey"]), previousGattKey: previousSealedKey(p["previousGattKey"]),
            updatedAt: optionalString(p, "updatedAt").flatMap(WireTimestamp.date(from:))
        )
    }

    /// `{version, sealed}`; anything else is no key (the beacon stays usable, its GATT proofs fail).
    static func sealedKey(_ p: JSONValue?) -> SealedBeaconKey? {
        guard let p, let version = optionalInt(p, "version"), version >= 1, let sealed = optionalString(p, "sealed") else { return nil }
        return SealedBeaconKey(version: version, sealed: sealed)
    }

    /// `{version, sealed, validUntil}`; without a readable `validUntil` it is no key (never one
    /// that verifies for ever).
    static func previousSealedKey(_ p: JSONValue?) -> SealedBeaconKey? {
        guard var key = sealedKey(p), let text = p.flatMap({ optionalString($0, "validUntil") }),
            let validUntil = WireTimestamp.date(from: text)
        else { return nil }
        key.validUntil = validUntil
        return key
    }

    static func gate(_ p: JSONValue) throws(PayloadError) -> CachedGate {
        CachedGate(id: try string(p, "id"), siteId: try string(p, "siteId"), name: optionalString(p, "name") ?? "")
    }

    static func site(_ p: JSONValue) throws(PayloadError) -> CachedSite {
        guard let fence = p["geofence"] else { throw PayloadError(field: "geofence") }
        let geofence: CachedGeofence
        do throws(PayloadError) {
            // What the registry accepts when it writes a site: a record outside it (written to the topic by
            // something else) is refused as undecodable, never used in the rules' arithmetic.
            geofence = CachedGeofence(
                latitude: try double(fence, "latitude", in: -90...90), longitude: try double(fence, "longitude", in: -180...180),
                radiusMeters: try double(fence, "radiusMeters", in: Geofence.radiusRange)
            )
        } catch {
            throw PayloadError(field: "geofence." + error.field)
        }
        return CachedSite(
            id: try string(p, "id"), organizationId: try string(p, "organizationId"),
            name: optionalString(p, "name") ?? "", timezone: try string(p, "timezone"), geofence: geofence,
            shift: p["shift"].flatMap(shift),
            shiftHistory: (p["shiftHistory"]?.arrayValue ?? []).compactMap { period in
                guard let until = optionalString(period, "until").flatMap(CalendarDate.init), let shift = period["shift"].flatMap(shift)
                else { return nil }
                return ShiftPeriod(until: until, shift: shift)
            }
        )
    }

    /// The registry's `ShiftSettings` (`start`/`end` as `HH:MM`), or `nil` when a field is missing.
    static func shift(_ p: JSONValue) -> CachedShift? {
        guard let start = optionalString(p, "start").flatMap(TimeOfDay.init),
            let end = optionalString(p, "end").flatMap(TimeOfDay.init),
            let before = optionalInt(p, "checkInBeforeStartMinutes"), let after = optionalInt(p, "checkOutAfterEndMinutes"),
            let late = optionalInt(p, "lateEntryGraceMinutes"), let early = optionalInt(p, "earlyExitGraceMinutes")
        else { return nil }
        return CachedShift(
            start: start, end: end, checkInBeforeStartMinutes: before, checkOutAfterEndMinutes: after,
            lateEntryGraceMinutes: late, earlyExitGraceMinutes: early
        )
    }

    static func organization(_ p: JSONValue) throws(PayloadError) -> CachedOrganization {
        CachedOrganization(id: try string(p, "id"), name: optionalString(p, "name") ?? "")
    }

    static func namespace(_ p: JSONValue) throws(PayloadError) -> CachedNamespace {
        guard let key = RegistryNamespaceKey(uuid: try uuid(p, "uuid"), major: try int(p, "major")) else {
            throw PayloadError(field: "major")
        }
        return CachedNamespace(key: key, organizationId: try string(p, "organizationId"))
    }

    static func minor(_ p: JSONValue) throws(PayloadError) -> CachedMinorAllocation {
        guard let key = RegistryBeaconKey(uuid: try uuid(p, "uuid"), major: try int(p, "major"), minor: try int(p, "minor")) else {
            throw PayloadError(field: "major/minor")
        }
        return CachedMinorAllocation(key: key, gateId: try string(p, "gateId"))
    }

    static func device(_ p: JSONValue) throws(PayloadError) -> CachedDevice {
        CachedDevice(id: try string(p, "id"), userId: try string(p, "userId"), status: CachedDeviceStatus(try string(p, "status")))
    }

    static func user(_ p: JSONValue) throws(PayloadError) -> CachedUser {
        let sites = p["siteIds"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return CachedUser(
            id: try string(p, "id"), name: optionalString(p, "name") ?? "", siteIds: sites,
            sitesChangedAt: optionalString(p, "sitesChangedAt").flatMap(WireTimestamp.date(from:)))
    }
}

struct PayloadError: Error {
    let field: String
}
