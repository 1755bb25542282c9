import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

// One column list per entity and the decoder that reads it, so every query returning an entity
// selects exactly what its decoder expects. Domain-typed columns arrive as their base type (text);
// arrays are cast to text[] explicitly because an array of a domain would not.

/// A stored value the model cannot represent (a status the code does not know): a schema and code
/// out of step.
struct UnexpectedColumnValue: Error, CustomStringConvertible {
    let column: String
    let value: String
    var description: String { "unexpected \(column) value \"\(value)\" in the database" }
}

enum Columns {
    static let organization = "o.id, o.name, o.created_at"
    static func organization(_ row: PostgresRow) throws -> Organization {
        let (id, name, createdAt) = try row.decode((String, String, Date).self)
        return Organization(id: id, name: name, createdAt: createdAt)
    }

    static let site = """
        s.id, s.organization_id, s.name, s.timezone, s.geofence_latitude, s.geofence_longitude, s.geofence_radius_m,
        to_char(s.shift_start, 'HH24:MI'), to_char(s.shift_end, 'HH24:MI'), s.check_in_before_start_min,
        s.check_out_after_end_min, s.late_entry_grace_min, s.early_exit_grace_min, s.created_at,
        (SELECT coalesce(json_agg(json_build_object(
                    'until', to_char(h.until, 'YYYY-MM-DD'), 'shift', json_build_object(
                        'start', to_char(h.shift_start, 'HH24:MI'), 'end', to_char(h.shift_end, 'HH24:MI'),
                        'checkInBeforeStartMinutes', h.check_in_before_start_min,
                        'checkOutAfterEndMinutes', h.check_out_after_end_min,
                        'lateEntryGraceMinutes', h.late_entry_grace_min, 'earlyExitGraceMinutes', h.early_exit_grace_min))
                    ORDER BY h.until), '[]')::text
         FROM site_shift_history h WHERE h.site_id = s.id)
        """
    static func site(_ row: PostgresRow) throws -> Site {
        let (id, organizationId, name, timezone, latitude, longitude, radius, start, end, before, after, late, early, createdAt, history) =
            try row.decode((String, String, String, String, Double, Double, Double, String, String, Int, Int, Int, Int, Date, String).self)
        guard let startTime = TimeOfDay(start) else { throw UnexpectedColumnValue(column: "shift_start", value: start) }
        guard let endTime = TimeOfDay(end) else { throw UnexpectedColumnValue(column: "shift_end", value: end) }
        let shiftHistory: [ShiftPeriod]
        do {
            shiftHistory = try JSONDecoder().decode([ShiftPeriod].self, from: Data(history.utf8))
        } catch {
            throw UnexpectedColumnValue(column: "site_shift_history", value: history)
        }
        return Site(
            id: id, organizationId: organizationId, name: name, timezone: timezone,
            geofence: Geofence(latitude: latitude, longitude: longitude, radiusMeters: radius),
            shift: ShiftSettings(
                start: startTime, end: endTime, checkInBeforeStartMinutes: before, checkOutAfterEndMinutes: after,
                lateEntryGraceMinutes: late, earlyExitGraceMinutes: early
            ),
            shiftHistory: shiftHistory, createdAt: createdAt
        )
    }

    static let gate = "g.id, g.site_id, g.name, g.created_at"
    static func gate(_ row: PostgresRow) throws -> Gate {
        let (id, siteId, name, createdAt) = try row.decode((String, String, String, Date).self)
        return Gate(id: id, siteId: siteId, name: name, createdAt: createdAt)
    }

    static let user = """
        u.id, u.name, u.created_at,
        ARRAY(SELECT us.site_id::text FROM user_sites us WHERE us.user_id = u.id ORDER BY us.site_id)::text[], u.sites_changed_at
        """
    static func user(_ row: PostgresRow) throws -> User {
        let (id, name, createdAt, siteIds, sitesChangedAt) = try row.decode((String, String, Date, [String], Date?).self)
        return User(id: id, name: name, siteIds: siteIds, createdAt: createdAt, sitesChangedAt: sitesChangedAt)
    }

    static let namespace = "n.organization_id, n.uuid, n.major, n.allocated_at"
    static func namespace(_ row: PostgresRow) throws -> BusinessNamespace {
        let (organizationId, uuid, major, allocatedAt) = try row.decode((String, UUID, Int, Date).self)
        return BusinessNamespace(organizationId: organizationId, uuid: uuid, major: major, allocatedAt: allocatedAt)
    }

    static let detectionConfig = "c.site_id, c.document::text, c.version, c.updated_at, c.updated_by"
    static func detectionConfig(_ row: PostgresRow) throws -> SiteDetectionConfig {
        let (siteId, text, version, updatedAt, updatedBy) = try row.decode((String, String, Int, Date, String).self)
        let document = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        return SiteDetectionConfig(siteId: siteId, version: version, updatedAt: updatedAt, updatedBy: updatedBy, document: document)
    }

    static let minor = "m.uuid, m.major, m.minor, m.gate_id, m.allocated_at"
    static func minor(_ row: PostgresRow) throws -> MinorAllocation {
        let (uuid, major, minor, gateId, allocatedAt) = try row.decode((UUID, Int, Int, String, Date).self)
        return MinorAllocation(uuid: uuid, major: major, minor: minor, gateId: gateId, allocatedAt: allocatedAt)
    }

    static let beacon = """
        b.id, b.uuid, b.major, b.minor, b.serial, b.mac, b.tx_power, b.adv_interval_ms,
        to_char(b.battery_replaced_on, 'YYYY-MM-DD'), b.status, b.gate_id, b.created_at, b.updated_at
        """
    static func beacon(_ row: PostgresRow) throws -> Beacon {
        let (id, uuid, major, minor, serial, mac, txPower, interval, battery, status, gateId, createdAt, updatedAt) =
            try row.decode((String, UUID, Int, Int, String?, String?, Int?, Int?, String?, String, String, Date, Date).self)
        guard let beaconStatus = BeaconStatus(rawValue: status) else {
            throw UnexpectedColumnValue(column: "beacons.status", value: status)
        }
        var batteryDate: CalendarDate?
        if let battery {
            guard let date = CalendarDate(battery) else { throw UnexpectedColumnValue(column: "battery_replaced_on", value: battery) }
            batteryDate = date
        }
        return Beacon(
            id: id, uuid: uuid, major: major, minor: minor, serial: serial, mac: mac, txPower: txPower,
            advIntervalMs: interval, batteryReplacedOn: batteryDate, status: beaconStatus, gateId: gateId,
            createdAt: createdAt, updatedAt: updatedAt
        )
    }

    static let device = """
        d.id, d.user_id, d.status, d.app_version, d.model, d.enrolled_at, d.revoked_at, d.token_key_id, d.token_expires_at
        """
    static func device(_ row: PostgresRow) throws -> Device {
        let (id, userId, status, appVersion, model, enrolledAt, revokedAt, keyId, expiresAt) =
            try row.decode((String, String, String, String?, String?, Date, Date?, String, Date).self)
        guard let deviceStatus = DeviceStatus(rawValue: status) else {
            throw UnexpectedColumnValue(column: "devices.status", value: status)
        }
        return Device(
            id: id, userId: userId, status: deviceStatus, appVersion: appVersion, model: model, enrolledAt: enrolledAt,
            revokedAt: revokedAt, tokenKeyId: keyId, tokenExpiresAt: expiresAt
        )
    }

    static let enrollmentCode = "e.id, e.user_id, e.created_at, e.expires_at, e.used_at, e.device_id"
    static func enrollmentCode(_ row: PostgresRow) throws -> EnrollmentCode {
        let (id, userId, createdAt, expiresAt, usedAt, deviceId) = try row.decode((String, String, Date, Date, Date?, String?).self)
        return EnrollmentCode(id: id, userId: userId, createdAt: createdAt, expiresAt: expiresAt, usedAt: usedAt, deviceId: deviceId)
    }

    static let apiKey = "k.id, k.name, k.role, k.created_at, k.revoked_at"
    static func apiKey(_ row: PostgresRow) throws -> APIKey {
        let (id, name, role, createdAt, revokedAt) = try row.decode((String, String, String, Date, Date?).self)
        guard let apiRole = APIRole(rawValue: role) else { throw UnexpectedColumnValue(column: "api_keys.role", value: role) }
        return APIKey(id: id, name: name, role: apiRole, createdAt: createdAt, revokedAt: revokedAt)
    }
}
