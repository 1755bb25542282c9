import AccessControl
import AttendanceProtocol
import Foundation
import RegistryClient

/// How each registry answer reads in a terminal: one entity as aligned `label: value` lines, a page
/// as a table with a header row (and the cursor of the next page when there is one).
package enum RegistryTables {
    static let none = "-"

    static func time(_ date: Date?) -> String { date.map(WireTimestamp.string(from:)) ?? none }
    static func text(_ value: String?) -> String { value.flatMap { $0.isEmpty ? nil : $0 } ?? none }
    static func number(_ value: Int?) -> String { value.map(String.init) ?? none }
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    /// A page's table, `(none)` for an empty page, and how to ask for the next one.
    static func page<Item>(_ page: RegistryPage<Item>, headers: [String], row: (Item) -> [String]) -> String {
        var text = TableFormatter.render(headers: headers, rows: page.items.map(row))
        if page.items.isEmpty { text += "\n(none)" }
        if let next = page.nextCursor { text += "\n\nmore: --cursor \(next)" }
        return text
    }

    // MARK: Places

    package static func organization(_ organization: Organization) -> String {
        TableFormatter.render(pairs: [("id", organization.id), ("name", organization.name), ("created", time(organization.createdAt))])
    }

    package static func organizations(_ page: RegistryPage<Organization>) -> String {
        Self.page(page, headers: ["ID", "NAME", "CREATED"]) { [$0.id, $0.name, time($0.createdAt)] }
    }

    static func geofence(_ geofence: Geofence) -> String {
        "\(number(geofence.latitude)), \(number(geofence.longitude)) within \(number(geofence.radiusMeters)) m"
    }

    static func shift(_ shift: ShiftSettings) -> String { "\(shift.start)-\(shift.end)" }

    package static func site(_ site: Site) -> String {
        TableFormatter.render(pairs: [
            ("id", site.id), ("organization", site.organizationId), ("name", site.name), ("timezone", site.timezone),
            ("geofence", geofence(site.geofence)),
            ("shift", shift(site.shift)),
            ("check-in from", "\(site.shift.checkInBeforeStartMinutes) min before start"),
            ("check-out until", "\(site.shift.checkOutAfterEndMinutes) min after end"),
            ("late after", "\(site.shift.lateEntryGraceMinutes) min grace"),
            ("early before", "\(site.shift.earlyExitGraceMinutes) min grace"),
            (
                "earlier shifts",
                site.shiftHistory.isEmpty ? none : site.shiftHistory.map { "\(shift($0.shift)) until \($0.until)" }.joined(separator: "; ")
            ),
            ("created", time(site.createdAt)),
        ])
    }

    package static func detectionConfig(_ config: SiteDetectionConfig) -> String {
        TableFormatter.render(pairs: [
            ("site", config.siteId), ("version", config.version == 0 ? "0 (never set: the app's defaults)" : "\(config.version)"),
            ("updated", time(config.updatedAt)), ("updated by", config.updatedBy ?? none),
            ("document", (try? AdminJSON.encoder().encode(config.document)).map { String(decoding: $0, as: UTF8.self) } ?? none),
        ])
    }

    package static func sites(_ page: RegistryPage<Site>) -> String {
        Self.page(page, headers: ["ID", "NAME", "TIMEZONE", "SHIFT", "GEOFENCE"]) {
            [$0.id, $0.name, $0.timezone, shift($0.shift), geofence($0.geofence)]
        }
    }

    package static func gate(_ gate: Gate) -> String {
        TableFormatter.render(pairs: [("id", gate.id), ("site", gate.siteId), ("name", gate.name), ("created", time(gate.createdAt))])
    }

    package static func gates(_ page: RegistryPage<Gate>) -> String {
        Self.page(page, headers: ["ID", "NAME", "SITE", "CREATED"]) { [$0.id, $0.name, $0.siteId, time($0.createdAt)] }
    }

    package static func user(_ user: User) -> String {
        TableFormatter.render(pairs: [
            ("id", user.id), ("name", user.name), ("sites", user.siteIds.isEmpty ? none : user.siteIds.joined(separator: ", ")),
            ("created", time(user.createdAt)),
        ])
    }

    // MARK: Allocation

    package static func namespace(_ namespace: BusinessNamespace) -> String {
        TableFormatter.render(pairs: [
            ("organization", namespace.organizationId), ("uuid", namespace.uuid.uuidString), ("major", String(namespace.major)),
            ("allocated", time(namespace.allocatedAt)),
        ])
    }

    package static func minor(_ allocation: MinorAllocation) -> String {
        TableFormatter.render(pairs: [
            ("gate", allocation.gateId), ("uuid", allocation.uuid.uuidString), ("major", String(allocation.major)),
            ("minor", String(allocation.minor)), ("allocated", time(allocation.allocatedAt)),
        ])
    }

    // MARK: Beacons

    package static func beacon(_ beacon: Beacon) -> String {
        TableFormatter.render(pairs: [
            ("id", beacon.id), ("uuid", beacon.uuid.uuidString), ("major", String(beacon.major)), ("minor", String(beacon.minor)),
            ("status", beacon.status.rawValue), ("gate", beacon.gateId), ("serial", text(beacon.serial)), ("mac", text(beacon.mac)),
            ("tx power", beacon.txPower.map { "\($0) dBm" } ?? none),
            ("adv interval", beacon.advIntervalMs.map { "\($0) ms" } ?? none),
            ("battery replaced", beacon.batteryReplacedOn?.description ?? none),
            ("created", time(beacon.createdAt)), ("updated", time(beacon.updatedAt)),
        ])
    }

    package static func beacons(_ page: RegistryPage<Beacon>) -> String {
        Self.page(page, headers: ["ID", "UUID", "MAJOR", "MINOR", "STATUS", "GATE", "SERIAL"]) {
            [$0.id, $0.uuid.uuidString, String($0.major), String($0.minor), $0.status.rawValue, $0.gateId, text($0.serial)]
        }
    }

    /// The settings, how to authenticate, then every step with its frame in write order.
    package static func plan(_ plan: ProvisioningPlanResponse) -> String {
        let settings = plan.settings
        let auth = plan.authentication
        let header = TableFormatter.render(pairs: [
            ("beacon", plan.beaconId), ("device name", settings.deviceName), ("uuid", settings.uuid),
            ("major", String(settings.major)), ("minor", String(settings.minor)),
            ("measured power", "\(settings.measuredPower) dBm"),
            ("adv interval", "\(settings.advertisingIntervalUnits) x 100 ms"),
            ("tx power index", String(settings.txPowerIndex)),
            ("auth service", auth.serviceUUID),
            ("auth characteristic", auth.characteristic + (auth.writeWithResponse ? " (write with response)" : "")),
            ("passwords to try", auth.passwords.joined(separator: ", ")),
            ("gatt key", gattKey(plan.gattKey)),
        ])
        let steps = TableFormatter.render(
            headers: ["STEP", "NAME", "CHAR", "FRAME"],
            rows: plan.steps.map { [String($0.index), $0.name, $0.characteristic, $0.hex] }
        )
        return header + "\n\n" + steps
    }

    /// The key to write after the frames, or why the plan carries none.
    static func gattKey(_ key: ProvisioningPlanResponse.GattKey?) -> String {
        guard let key else { return "not sent: " + noGattKeyReason }
        return "version \(key.version), write after the frames: \(key.hex)"
    }

    /// Why a provisioning plan carries no GATT key.
    package static let noGattKeyReason =
        "the registry sends it to installer and admin keys only, when it holds beacon keys (BEACON_KEY_SEAL_KEY)"

    package static func verification(_ verification: BeaconVerificationResponse) -> String {
        TableFormatter.render(pairs: [
            ("beacon", verification.beaconId), ("verified", verification.verification.verified ? "yes" : "no"),
            ("devices", "\(verification.verification.deviceCount) in the last \(verification.verification.windowMinutes) min"),
            ("last seen", time(verification.verification.lastSeen)),
        ])
    }

    package static func keyRotation(_ rotation: BeaconKeyRotation) -> String {
        TableFormatter.render(pairs: [
            ("beacon", rotation.beaconId), ("key version", String(rotation.version)), ("rotated", time(rotation.rotatedAt)),
            ("previous key", rotation.previousKeyValidUntil.map { "verifies until \(time($0))" } ?? "stopped verifying"),
            (
                "next",
                "write the new key into the beacon: attendancectl registry beacons plan \(rotation.beaconId) --key-only "
                    + "(an installer or admin key)"
            ),
        ])
    }

    // MARK: Lookups

    package static func beaconLookup(_ found: BeaconLookupResponse) -> String {
        TableFormatter.render(pairs: [
            ("beacon", found.beaconId), ("identity", "\(found.uuid) major \(found.major) minor \(found.minor)"),
            ("mac", found.mac ?? "-"), ("status", found.status),
            ("gate", [found.gateId, found.gateName.map { "(\($0))" }].compactMap { $0 }.joined(separator: " ")),
            ("site", [found.siteId, found.siteName.map { "(\($0))" }].compactMap { $0 }.joined(separator: " ")),
            ("time zone", found.timezone ?? "-"), ("organization", found.organizationId ?? "-"),
        ])
    }

    package static func businessLookup(_ found: BusinessLookupResponse) -> String {
        TableFormatter.render(pairs: [
            ("namespace", "\(found.uuid) major \(found.major)"), ("organization", found.organizationId),
            ("name", found.organizationName ?? "-"),
        ])
    }

    package static func beaconsByUUID(_ found: BeaconsByUUIDResponse) -> String {
        TableFormatter.render(
            headers: ["MAJOR", "MINOR", "BEACON", "STATUS", "GATE", "SITE"],
            rows: found.beacons.map { [String($0.major), String($0.minor), $0.beaconId, $0.status, $0.gateId, $0.siteId ?? "-"] }
        )
    }

    // MARK: Devices and credentials

    package static func enrollmentCode(_ issued: IssuedEnrollmentCode) -> String {
        TableFormatter.render(pairs: [
            ("code", issued.code + "  (shown once)"), ("id", issued.enrollment.id), ("user", issued.enrollment.userId),
            ("expires", time(issued.enrollment.expiresAt)), ("created", time(issued.enrollment.createdAt)),
        ])
    }

    package static func credentials(_ credentials: DeviceCredentialsResponse) -> String {
        TableFormatter.render(pairs: [
            ("device", credentials.deviceId), ("user", credentials.userId), ("status", credentials.device.status.rawValue),
            ("token", credentials.token), ("token expires", time(credentials.tokenExpiresAt)),
            ("model", text(credentials.device.model)), ("app version", text(credentials.device.appVersion)),
        ])
    }

    package static func device(_ device: Device) -> String {
        TableFormatter.render(pairs: [
            ("id", device.id), ("user", device.userId), ("status", device.status.rawValue), ("model", text(device.model)),
            ("app version", text(device.appVersion)), ("enrolled", time(device.enrolledAt)), ("revoked", time(device.revokedAt)),
            ("token key", device.tokenKeyId), ("token expires", time(device.tokenExpiresAt)),
        ])
    }

    package static func devices(_ page: RegistryPage<Device>) -> String {
        Self.page(page, headers: ["ID", "STATUS", "MODEL", "APP VERSION", "ENROLLED", "REVOKED"]) {
            [$0.id, $0.status.rawValue, text($0.model), text($0.appVersion), time($0.enrolledAt), time($0.revokedAt)]
        }
    }

    package static func issuedAPIKey(_ issued: IssuedAPIKey) -> String {
        TableFormatter.render(pairs: [
            ("secret", issued.secret + "  (shown once)"), ("id", issued.key.id), ("name", issued.key.name),
            ("role", issued.key.role.rawValue), ("created", time(issued.key.createdAt)),
        ])
    }

    package static func apiKey(_ key: APIKey) -> String {
        TableFormatter.render(pairs: [
            ("id", key.id), ("name", key.name), ("role", key.role.rawValue), ("created", time(key.createdAt)),
            ("revoked", time(key.revokedAt)),
        ])
    }

    // MARK: Service

    package static func health(live: HealthBody, ready: HealthBody) -> String {
        var rows = [["live", live.status], ["ready", ready.status]]
        for (name, status) in (ready.checks ?? [:]).sorted(by: { $0.key < $1.key }) {
            rows.append(["ready: \(name)", status])
        }
        return TableFormatter.render(headers: ["CHECK", "STATUS"], rows: rows)
    }
}
