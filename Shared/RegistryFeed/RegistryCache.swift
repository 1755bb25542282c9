import AttendanceProtocol
import Foundation
import Synchronization

/// The registry as the gateway, the policy service and the fleet simulator see it: an in-memory
/// copy of `registry.changes`, indexed for the lookups they make on every event.
///
/// Apply `RegistryRecord`s in topic order (`RegistryCacheLoader` does). Each entity key keeps the
/// highest version applied; a record whose version is not higher is skipped, so replays (the
/// publisher is at-least-once) and reorders never roll an entity back. A tombstone removes the
/// entity. Entity types the cache does not keep (enrollment codes, API keys, types added later) are
/// ignored.
///
/// Thread safety: one `Mutex` guards the whole state. Lookups hold it for a few dictionary probes
/// (well under a microsecond); a batch of records is applied under one acquisition, so a reader sees
/// either none or all of a batch.
public final class RegistryCache: Sendable {
    private let state = Mutex(State())

    public init() {}

    // MARK: Applying records

    /// Applies one record; see `RegistryApplyOutcome`.
    @discardableResult
    public func apply(_ record: RegistryRecord) -> RegistryApplyOutcome {
        let parsed = Parsed(record)
        return state.withLock { $0.apply(parsed) }
    }

    /// Applies records in order under one lock acquisition. Payloads are read before the lock is
    /// taken, so lookups wait only for the dictionary updates.
    @discardableResult
    public func apply(_ records: some Sequence<RegistryRecord>) -> [RegistryApplyOutcome] {
        let parsed = records.map(Parsed.init)
        return state.withLock { state in parsed.map { state.apply($0) } }
    }

    // MARK: Lookups

    /// (uuid, major, minor) → the beacon, its gate, site and organization.
    public func resolve(_ key: RegistryBeaconKey) -> BeaconResolution? {
        state.withLock { $0.resolve(key) }
    }

    public func resolve(uuid: UUID, major: Int, minor: Int) -> BeaconResolution? {
        guard let key = RegistryBeaconKey(uuid: uuid, major: major, minor: minor) else { return nil }
        return resolve(key)
    }

    /// From the wire form the phones send (`BeaconIdentity.uuid` is text).
    public func resolve(_ identity: BeaconIdentity) -> BeaconResolution? {
        guard let key = RegistryBeaconKey(identity) else { return nil }
        return resolve(key)
    }

    /// (uuid, major) → the organization that owns the namespace.
    public func business(_ key: RegistryNamespaceKey) -> BusinessResolution? {
        state.withLock { state in
            guard let namespace = state.namespaces[key] else { return nil }
            return BusinessResolution(namespace: namespace, organization: state.organizations[namespace.organizationId])
        }
    }

    public func business(uuid: UUID, major: Int) -> BusinessResolution? {
        guard let key = RegistryNamespaceKey(uuid: uuid, major: major) else { return nil }
        return business(key)
    }

    /// Every beacon broadcasting `uuid`, ordered by (major, minor).
    public func beacons(uuid: UUID) -> [CachedBeacon] {
        state.withLock { state in
            (state.beaconsByUUID[uuid] ?? []).compactMap { state.beacons[$0] }
        }
        .sorted { ($0.key.major, $0.key.minor) < ($1.key.major, $1.key.minor) }
    }

    /// By MAC in any common spelling (`aa:bb:…`, `AA-BB-…`, twelve hex digits).
    public func beacon(mac: String) -> CachedBeacon? {
        guard let normalized = Self.normalizeMAC(mac) else { return nil }
        return state.withLock { state in state.beaconByMAC[normalized].flatMap { state.beacons[$0] } }
    }

    public func beacon(id: String) -> CachedBeacon? { state.withLock { $0.beacons[id] } }
    public func gate(id: String) -> CachedGate? { state.withLock { $0.gates[id] } }
    public func site(id: String) -> CachedSite? { state.withLock { $0.sites[id] } }
    public func organization(id: String) -> CachedOrganization? { state.withLock { $0.organizations[id] } }
    public func user(id: String) -> CachedUser? { state.withLock { $0.users[id] } }
    /// A device's status and user: a revoked device is known here within seconds of the revocation.
    public func device(id: String) -> CachedDevice? { state.withLock { $0.devices[id] } }
    /// The gate a minor was allocated to (also before a beacon is registered with it).
    public func minorAllocation(_ key: RegistryBeaconKey) -> CachedMinorAllocation? { state.withLock { $0.minors[key] } }

    /// The highest version applied for a key (kept after a tombstone), if any.
    public func version(of key: RegistryKey) -> Int64? { state.withLock { $0.versions[key.description] } }

    public struct Counts: Hashable, Sendable {
        public var organizations = 0, sites = 0, gates = 0, namespaces = 0, minors = 0, beacons = 0, users = 0, devices = 0
        /// Records applied (not stale, not ignored, not malformed).
        public var applied = 0

        public init() {}
    }

    public var counts: Counts {
        state.withLock { s in
            var c = Counts()
            c.organizations = s.organizations.count
            c.sites = s.sites.count
            c.gates = s.gates.count
            c.namespaces = s.namespaces.count
            c.minors = s.minors.count
            c.beacons = s.beacons.count
            c.users = s.users.count
            c.devices = s.devices.count
            c.applied = s.applied
            return c
        }
    }

    /// `AA:BB:CC:DD:EE:FF`, or `nil` when `text` is not six hex octets in a common spelling.
    public static func normalizeMAC(_ text: String) -> String? {
        let hex = Array(text.uppercased().utf8.filter { $0 != 0x3A && $0 != 0x2D })
        guard hex.count == 12, hex.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) }) else { return nil }
        return stride(from: 0, to: 12, by: 2).map { String(decoding: hex[$0..<($0 + 2)], as: UTF8.self) }.joined(separator: ":")
    }
}

// MARK: - State

extension RegistryCache {
    struct State {
        var versions: [String: Int64] = [:]
        var applied = 0

        var organizations: [String: CachedOrganization] = [:]
        var sites: [String: CachedSite] = [:]
        var gates: [String: CachedGate] = [:]
        var users: [String: CachedUser] = [:]
        var devices: [String: CachedDevice] = [:]

        var beacons: [String: CachedBeacon] = [:]
        var beaconByKey: [RegistryBeaconKey: String] = [:]
        var beaconsByUUID: [UUID: Set<String>] = [:]
        var beaconByMAC: [String: String] = [:]

        var namespaces: [RegistryNamespaceKey: CachedNamespace] = [:]
        var namespaceById: [String: RegistryNamespaceKey] = [:]
        var minors: [RegistryBeaconKey: CachedMinorAllocation] = [:]
        var minorById: [String: RegistryBeaconKey] = [:]

        mutating func apply(_ parsed: Parsed) -> RegistryApplyOutcome {
            switch parsed {
            case .ignored:
                return .ignored
            case .malformed(let field):
                return .malformed(field)
            case .delete(let type, let id):
                remove(type: type, id: id)
                applied += 1
                return .applied
            case .upsert(let versionKey, let version, let id, let entity):
                if let seen = versions[versionKey], version <= seen { return .stale }
                upsert(id: id, entity)
                versions[versionKey] = version
                applied += 1
                return .applied
            }
        }

        private mutating func upsert(id: String, _ entity: Parsed.Entity) {
            switch entity {
            case .organization(let organization): organizations[id] = organization
            case .site(let site): sites[id] = site
            case .gate(let gate): gates[id] = gate
            case .user(let user): users[id] = user
            case .device(let device): devices[id] = device
            case .beacon(let beacon):
                removeBeacon(id)
                beacons[id] = beacon
                beaconByKey[beacon.key] = id
                beaconsByUUID[beacon.key.uuid, default: []].insert(id)
                if let mac = beacon.mac { beaconByMAC[mac] = id }
            case .namespace(let namespace):
                if let old = namespaceById.removeValue(forKey: id) { namespaces[old] = nil }
                namespaces[namespace.key] = namespace
                namespaceById[id] = namespace.key
            case .minor(let minor):
                if let old = minorById.removeValue(forKey: id) { minors[old] = nil }
                minors[minor.key] = minor
                minorById[id] = minor.key
            }
        }

        private mutating func remove(type: String, id: String) {
            switch type {
            case "organization": organizations[id] = nil
            case "site": sites[id] = nil
            case "gate": gates[id] = nil
            case "user": users[id] = nil
            case "device": devices[id] = nil
            case "beacon": removeBeacon(id)
            case "namespace":
                if let old = namespaceById.removeValue(forKey: id) { namespaces[old] = nil }
            case "minor":
                if let old = minorById.removeValue(forKey: id) { minors[old] = nil }
            default:
                break
            }
        }

        /// Removes a beacon and its index entries (only those still pointing at it).
        private mutating func removeBeacon(_ id: String) {
            guard let old = beacons.removeValue(forKey: id) else { return }
            if beaconByKey[old.key] == id { beaconByKey[old.key] = nil }
            if var ids = beaconsByUUID[old.key.uuid] {
                ids.remove(id)
                beaconsByUUID[old.key.uuid] = ids.isEmpty ? nil : ids
            }
            if let mac = old.mac, beaconByMAC[mac] == id { beaconByMAC[mac] = nil }
        }

        func resolve(_ key: RegistryBeaconKey) -> BeaconResolution? {
            guard let id = beaconByKey[key], let beacon = beacons[id] else { return nil }
            let gate = gates[beacon.gateId]
            let site = gate.flatMap { sites[$0.siteId] }
            let organizationId = site?.organizationId ?? namespaces[key.namespace]?.organizationId
            return BeaconResolution(beacon: beacon, gate: gate, site: site, organizationId: organizationId)
        }
    }
}

// MARK: - Parsing (outside the lock)

extension RegistryCache {
    /// A record with its payload already read into the cache's entity.
    enum Parsed: Sendable {
        enum Entity: Sendable {
            case organization(CachedOrganization), site(CachedSite), gate(CachedGate), user(CachedUser)
            case device(CachedDevice), beacon(CachedBeacon), namespace(CachedNamespace), minor(CachedMinorAllocation)
        }

        case upsert(versionKey: String, version: Int64, id: String, entity: Entity)
        case delete(type: String, id: String)
        case ignored
        case malformed(String)

        static let keptTypes: Set<String> = ["organization", "site", "gate", "namespace", "minor", "beacon", "user", "device"]

        init(_ record: RegistryRecord) {
            let key = record.key
            let type = key.entityType.rawValue
            guard Self.keptTypes.contains(type) else {
                self = .ignored
                return
            }
            switch record {
            case .delete:
                self = .delete(type: type, id: key.entityId)
            case .upsert(let change):
                guard let payload = change.payload else {
                    self = .malformed("payload")
                    return
                }
                do throws(PayloadError) {
                    self = .upsert(
                        versionKey: key.description, version: change.version, id: key.entityId, entity: try Self.entity(type, payload))
                } catch {
                    self = .malformed(error.field)
                }
            }
        }

        static func entity(_ type: String, _ payload: JSONValue) throws(PayloadError) -> Entity {
            switch type {
            case "organization": return .organization(try PayloadReader.organization(payload))
            case "site": return .site(try PayloadReader.site(payload))
            case "gate": return .gate(try PayloadReader.gate(payload))
            case "user": return .user(try PayloadReader.user(payload))
            case "device": return .device(try PayloadReader.device(payload))
            case "beacon": return .beacon(try PayloadReader.beacon(payload))
            case "namespace": return .namespace(try PayloadReader.namespace(payload))
            default: return .minor(try PayloadReader.minor(payload))
            }
        }
    }
}
