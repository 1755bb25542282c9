import AttendanceProtocol
import Foundation
import ServiceRuntime

/// The kinds of thing the registry stores, as errors and the change feed name them.
package enum RegistryEntityKind: String, Hashable, Sendable, Codable, CaseIterable {
    case organization, site, gate, namespace, minor, beacon, user, device
    case enrollmentCode = "enrollment_code"
    case apiKey = "api_key"
}

/// Every way a registry operation fails. The REST layer maps each case to one problem+json answer
/// (`problemDetails`); the CLI prints `description`.
package enum RegistryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Input that breaks a rule, every failing field at once (400).
    case invalidInput([FieldError])
    /// The UUID is a vendor's factory default (422, naming the vendor).
    case bannedUUID(BannedUUID)
    case notFound(RegistryEntityKind, id: String)
    /// An entity with this id exists already (409).
    case alreadyExists(RegistryEntityKind, id: String)
    /// Another entity of this kind already has this name in the same parent (409).
    case duplicateName(RegistryEntityKind, name: String)
    /// Another beacon already broadcasts this uuid/major/minor (409).
    case duplicateBeaconIdentity(BeaconIdentity)
    /// Another beacon already has this MAC address (409).
    case duplicateMAC(String)
    /// The uuid/major/minor was allocated to a different gate than the beacon is registered at (409).
    case minorAllocatedToAnotherGate(BeaconIdentity, gateId: String)
    /// The uuid/major is a namespace allocated to another organization than the gate's (409).
    case namespaceOfAnotherOrganization(BeaconIdentity, organizationId: String)
    /// The uuid is one of the registry's shard UUIDs but no organization holds its major yet: such a
    /// beacon would sit in a namespace the next allocation hands to someone else (409).
    case namespaceNotAllocated(BeaconIdentity)
    /// Every major of every shard is taken (503: an operator must grow the pool).
    case shardPoolExhausted
    /// All 65535 minors of the namespace are taken (409).
    case minorsExhausted(uuid: UUID, major: Int)
    /// No enrollment code matches (401 at the enrollment endpoint).
    case enrollmentCodeUnknown
    /// The code enrolled a device already; codes are one-time (409).
    case enrollmentCodeUsed
    case enrollmentCodeExpired(at: Date)
    /// The code's user has no site (they left, or were never given one): no phone enrolls for them (409).
    case enrollmentUserWithoutSites
    /// Concurrent writers kept colliding; retrying later will work (503).
    case contention(String)
    /// The database failed or is unreachable (503). The message goes to the log, not to the client.
    case storage(String)
    /// The database refused a value for what it is (SQLSTATE class 22: 400) or as a conflict with stored
    /// data (class 23: 409); the operation is named, the database's words are not.
    case refusedByStorage(operation: String, StorageRefusal)
    /// The registry runs without `BEACON_KEY_SEAL_KEY`, so it can neither create nor reveal beacon GATT keys (503).
    case beaconKeysNotConfigured
    /// The beacon's stored GATT key does not open with this registry's `BEACON_KEY_SEAL_KEY` (it was sealed
    /// under another one) (409): only a rotation gives the beacon a key again.
    case beaconKeySealedUnderAnotherKey(beaconId: String)
    /// A rotation while the key an earlier rotation replaced still verifies (409): the beacon may hold
    /// either key, and only one replaced key is kept.
    case beaconKeyInGrace(beaconId: String, until: Date)
    /// A genuine device token whose device is revoked or now bound to another user (`why` says which).
    case deviceNotActive(deviceId: String, why: String)

    package var description: String {
        switch self {
        case .invalidInput(let errors):
            return "invalid input: " + errors.map(\.description).joined(separator: "; ")
        case .bannedUUID(let banned):
            return "refused: \(banned.description)"
        case .notFound(let kind, let id):
            return "\(kind.displayName) \"\(id)\" not found"
        case .alreadyExists(let kind, let id):
            return "\(kind.displayName) \"\(id)\" already exists"
        case .duplicateName(let kind, let name):
            return "a \(kind.displayName) named \"\(name)\" already exists here"
        case .duplicateBeaconIdentity(let identity):
            return "a beacon with \(identity.canonicalId) is already registered"
        case .duplicateMAC(let mac):
            return "a beacon with MAC \(mac) is already registered"
        case .minorAllocatedToAnotherGate(let identity, let gateId):
            return "\(identity.canonicalId) is allocated to gate \"\(gateId)\""
        case .namespaceOfAnotherOrganization(let identity, let organizationId):
            return "\(identity.uuid):\(identity.major) is the namespace of organization \"\(organizationId)\", not of the gate's"
        case .namespaceNotAllocated(let identity):
            return "\(identity.uuid):\(identity.major) is a namespace of the registry's shard pool that no organization holds: "
                + "allocate the gate's organization's namespace and use its UUID and major"
        case .shardPoolExhausted:
            return "every major of every shard UUID is allocated"
        case .minorsExhausted(let uuid, let major):
            return "every minor of namespace \(uuid.uuidString):\(major) is allocated"
        case .enrollmentCodeUnknown:
            return "enrollment code not recognised"
        case .enrollmentCodeUsed:
            return "enrollment code was already used"
        case .enrollmentCodeExpired(let at):
            return "enrollment code expired at \(WireTimestamp.string(from: at))"
        case .enrollmentUserWithoutSites:
            return "the enrollment code's user has no site; an admin gives them one (users set-sites), then the code works"
        case .contention(let what):
            return "too much concurrent contention: \(what); retry"
        case .storage(let message):
            return "registry storage failed: \(message)"
        case .beaconKeysNotConfigured:
            return "beacon GATT keys are not configured on this registry (set BEACON_KEY_SEAL_KEY)"
        case .refusedByStorage(let operation, let refusal):
            return "\(operation): \(refusal.reason)"
        case .beaconKeyInGrace(let beaconId, let until):
            return "beacon \"\(beaconId)\" was rotated and its replaced key still verifies until \(WireTimestamp.string(from: until)): "
                + "rotate again once the installer has written the current key (force=true), or with graceHours=0 for a leaked key"
        case .deviceNotActive(let deviceId, let why):
            return "device \(deviceId) \(why); enroll it again"
        case .beaconKeySealedUnderAnotherKey(let beaconId):
            return "the stored GATT key of beacon \"\(beaconId)\" was sealed under another BEACON_KEY_SEAL_KEY than this registry's: "
                + "rotate it with graceHours=0 and write the new key into the beacon"
        }
    }

    /// The problem+json answer for this error.
    package var problemDetails: ProblemDetails {
        switch self {
        case .invalidInput(let errors):
            return .validation(errors)
        case .bannedUUID(let banned):
            return .bannedBeaconUUID(prefix: banned.prefix, vendor: banned.vendor)
        case .notFound:
            return .notFound(description)
        case .alreadyExists, .duplicateName, .duplicateBeaconIdentity, .duplicateMAC, .minorAllocatedToAnotherGate,
            .namespaceOfAnotherOrganization, .namespaceNotAllocated, .minorsExhausted, .enrollmentCodeUsed, .enrollmentUserWithoutSites,
            .beaconKeyInGrace,
            .beaconKeySealedUnderAnotherKey:
            return .conflict(description)
        case .enrollmentCodeUnknown, .enrollmentCodeExpired:
            return .unauthorized(description)
        case .refusedByStorage(_, let refusal):
            return refusal.isDataException ? .validation([FieldError(field: "", reason: description)]) : .conflict(description)
        case .storage:
            return .unavailable("the registry's storage is unavailable; retry later")
        case .shardPoolExhausted, .contention, .beaconKeysNotConfigured:
            return .unavailable(description)
        case .deviceNotActive:
            var problem = ProblemDetails.forbidden(description)
            problem.action = .contactAdmin
            return problem
        }
    }

    package static func invalid(_ field: String, _ reason: String) -> RegistryError {
        .invalidInput([FieldError(field: field, reason: reason)])
    }
}

extension RegistryEntityKind {
    var displayName: String {
        switch self {
        case .enrollmentCode: return "enrollment code"
        case .apiKey: return "API key"
        default: return rawValue
        }
    }
}
