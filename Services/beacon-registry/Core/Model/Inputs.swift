import AttendanceProtocol
import Foundation

// What callers send to create things. Each input validates itself, reporting every failing field at
// once, and returns its normalized form (trimmed names, upper-case MAC, parsed UUID) for storage.
// The database constraints enforce the same rules again; these checks exist to give field names
// and reasons instead of a constraint name.

extension NewOrganization {
    package func validated() throws(RegistryError) -> NewOrganization {
        var v = InputValidator()
        let id = v.id(id, "id")
        let name = v.name(name, "name")
        try v.finish()
        return NewOrganization(id: id, name: name)
    }
}

extension NewSite {
    package func validated() throws(RegistryError) -> NewSite {
        var v = InputValidator()
        var site = self
        site.id = v.id(id, "id")
        // The policy service's admin REST names the default policy `default`: a site of that id could
        // not be given a policy of its own.
        if id == "default" { v.fail("id", "\"default\" is reserved (it names the default policy of every site)") }
        site.organizationId = v.id(organizationId, "organizationId") ?? organizationId
        site.name = v.name(name, "name")
        if TimeZone(identifier: timezone) == nil || !timezone.contains("/") && timezone != "UTC" {
            v.fail("timezone", "must be an IANA time zone name such as Asia/Ho_Chi_Minh")
        }
        geofence.check(prefix: "geofence.", &v)
        for issue in shift.issues { v.fail("shift.\(issue.field)", issue.reason) }
        try v.finish()
        return site
    }
}

extension CalendarDate {
    /// The years a day stored by the registry may name (a battery replacement, a shift change).
    package static let registryYears: ClosedRange<Int> = 2000...2999
}

extension SiteShiftChange {
    package func validated() throws(RegistryError) -> SiteShiftChange {
        var v = InputValidator()
        for issue in shift.issues { v.fail("shift.\(issue.field)", issue.reason) }
        if let from, !CalendarDate.registryYears.contains(from.year) { v.fail("from", "must be a date in the years 2000...2999") }
        try v.finish()
        return self
    }
}

extension Geofence {
    package func validated() throws(RegistryError) -> Geofence {
        var v = InputValidator()
        check(prefix: "", &v)
        try v.finish()
        return self
    }

    /// Latitude, longitude and radius in range, failures named `prefix` + the member.
    func check(prefix: String, _ v: inout InputValidator) {
        if !(-90...90).contains(latitude) { v.fail(prefix + "latitude", "must be within -90...90") }
        if !(-180...180).contains(longitude) { v.fail(prefix + "longitude", "must be within -180...180") }
        if !Geofence.radiusRange.contains(radiusMeters) {
            v.fail(prefix + "radiusMeters", "must be within 10...5000 metres (150-300 is typical)")
        }
    }
}

extension NewGate {
    package func validated() throws(RegistryError) -> NewGate {
        var v = InputValidator()
        let id = v.id(id, "id")
        let siteId = v.id(siteId, "siteId") ?? siteId
        let name = v.name(name, "name")
        try v.finish()
        return NewGate(id: id, siteId: siteId, name: name)
    }
}

extension NewUser {
    package func validated() throws(RegistryError) -> NewUser {
        var v = InputValidator()
        let id = v.id(id, "id")
        let name = v.name(name, "name")
        let sites = UserSites.checked(siteIds, &v)
        try v.finish()
        return NewUser(id: id, name: name, siteIds: sites)
    }
}

extension UserName {
    package func validated() throws(RegistryError) -> UserName {
        var v = InputValidator()
        let name = v.name(name, "name")
        try v.finish()
        return UserName(name: name)
    }
}

extension UserSites {
    /// The ids checked and each site once, in the order given.
    package func validated() throws(RegistryError) -> UserSites {
        var v = InputValidator()
        let sites = Self.checked(siteIds, &v)
        try v.finish()
        return UserSites(siteIds: sites)
    }

    /// A user's site ids checked (`siteIds[i]`), each once, in the order given.
    static func checked(_ siteIds: [String], _ v: inout InputValidator) -> [String] {
        var unique: [String] = []
        for (i, site) in siteIds.enumerated() {
            _ = v.id(site, "siteIds[\(i)]")
            if !unique.contains(site) { unique.append(site) }
        }
        return unique
    }
}

extension NewBeacon {
    /// The normalized input and its parsed UUID. A banned UUID is its own error (422), reported
    /// before field errors, so the admin learns the real reason first.
    package func validated() throws(RegistryError) -> (input: NewBeacon, uuid: UUID) {
        if let banned = BanList.check(uuid) { throw .bannedUUID(banned) }
        var v = InputValidator()
        var beacon = self
        beacon.id = v.id(id, "id")
        beacon.gateId = v.id(gateId, "gateId") ?? gateId
        let parsed = BeaconUUID.parse(uuid)
        if parsed == nil { v.fail("uuid", "must be a UUID (32 hex digits, dashes optional)") }
        if !(0...65_535).contains(major) { v.fail("major", "must be within 0...65535") }
        if !(0...65_535).contains(minor) { v.fail("minor", "must be within 0...65535") }
        if let serial {
            let trimmed = serial.trimmingCharacters(in: .whitespaces)
            // Code points, as the database's `char_length` and the document's `maxLength` count them.
            if !(1...64).contains(trimmed.unicodeScalars.count) { v.fail("serial", "must be 1-64 characters") }
            beacon.serial = trimmed
        }
        if let mac {
            beacon.mac = MACAddress.normalize(mac)
            if beacon.mac == nil { v.fail("mac", "must be six hex bytes such as AA:BB:CC:DD:EE:FF") }
        }
        if let txPower, !(-127...20).contains(txPower) { v.fail("txPower", "must be within -127...20 dBm") }
        if let advIntervalMs, !(20...10_240).contains(advIntervalMs) {
            v.fail("advIntervalMs", "must be within 20...10240 ms")
        }
        if let batteryReplacedOn, !CalendarDate.registryYears.contains(batteryReplacedOn.year) {
            v.fail("batteryReplacedOn", "must be a day in the years 2000-2999, got \(batteryReplacedOn)")
        }
        try v.finish()
        return (beacon, parsed!)
    }
}

/// Beacon UUID text: with or without dashes, any case.
package enum BeaconUUID {
    package static func parse(_ text: String) -> UUID? {
        if let uuid = UUID(uuidString: text) { return uuid }
        let hex = Array(text.utf8)
        guard hex.count == 32, hex.allSatisfy(MACAddress.isHex) else { return nil }
        let s = String(decoding: hex, as: UTF8.self)
        let dashed = [s.prefix(8), s.dropFirst(8).prefix(4), s.dropFirst(12).prefix(4), s.dropFirst(16).prefix(4), s.dropFirst(20)]
            .joined(separator: "-")
        return UUID(uuidString: dashed)
    }
}

enum MACAddress {
    /// `AA:BB:CC:DD:EE:FF` from six octets separated by colons or dashes, or twelve hex digits, any case.
    static func normalize(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        if bytes.count == 17 {
            let separated = stride(from: 2, to: 17, by: 3).allSatisfy { bytes[$0] == 0x3A || bytes[$0] == 0x2D }
            guard separated else { return nil }
        } else if bytes.count != 12 {
            return nil
        }
        let hex = Array(text.uppercased().utf8.filter { $0 != 0x3A && $0 != 0x2D })
        guard hex.count == 12, hex.allSatisfy(isHex) else { return nil }
        return stride(from: 0, to: 12, by: 2).map { String(decoding: hex[$0..<($0 + 2)], as: UTF8.self) }.joined(separator: ":")
    }

    static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }
}

/// Collects field errors; `finish` throws them all together.
package struct InputValidator {
    package init() {}

    package private(set) var errors: [FieldError] = []

    package mutating func fail(_ field: String, _ reason: String) {
        errors.append(FieldError(field: field, reason: reason))
    }

    /// The id when valid (or `nil` when absent).
    package mutating func id(_ id: String?, _ field: String) -> String? {
        guard let id else { return nil }
        if !EntityIdGenerator.isValid(id) { fail(field, EntityId.rule) }
        return id
    }

    /// The trimmed name.
    package mutating func name(_ name: String, _ field: String) -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        // Counted in Unicode scalars, as PostgreSQL counts characters.
        if !(1...200).contains(trimmed.unicodeScalars.count) { fail(field, "must be 1-200 characters") }
        return trimmed
    }

    package func finish() throws(RegistryError) {
        if !errors.isEmpty { throw .invalidInput(errors) }
    }
}
