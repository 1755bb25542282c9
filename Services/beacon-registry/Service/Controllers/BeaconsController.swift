import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import ServiceRuntime

/// `/v1/admin/beacons` and `/v1/admin/sightings`: register and change status (installer), read,
/// provisioning plan and broadcast verification (viewer), record a sighting (installer).
struct BeaconsController {
    let repository: any AdminRegistryRepository

    func addRoutes(to group: RouterGroup<AdminContext>) {
        group.post("beacons") { request, context in
            try context.authorize(.installer)
            let beacon = try await repository.registerBeacon(try await request.decodeJSON(NewBeacon.self))
            return try Reply.json(beacon, status: .created, request: request, context: context)
        }
        group.get("beacons/{id}") { request, context in
            try context.authorize(.viewer)
            let beacon = try await repository.beacon(id: try context.pathId())
            return try Reply.json(beacon, request: request, context: context)
        }
        group.patch("beacons/{id}") { request, context in
            try context.authorize(.installer)
            let body = try await request.decodeJSON(BeaconStatusChange.self)
            let beacon = try await repository.updateBeaconStatus(beaconId: try context.pathId(), status: body.status)
            return try Reply.json(beacon, request: request, context: context)
        }
        group.get("beacons/{id}/provisioning-plan") { request, context in
            try context.authorize(.viewer)
            let beacon = try await repository.beacon(id: try context.pathId())
            let settings = try Self.settings(for: beacon, request: request)
            let plan = try CP28ProvisioningPlan(settings)
            // The GATT key is a secret: the installer who writes it into the beacon sees it, a
            // viewer gets the plan without it. (The CP28 frame set has no key command; the app
            // writes `gattKey.hex` through the vendor's key characteristic after the frames.)
            var gattKey: ProvisioningPlanResponse.GattKey?
            if context.apiKey?.role.permits(.installer) == true {
                do {
                    if let key = try await repository.beaconGattKey(beaconId: beacon.id) {
                        gattKey = .init(version: key.version, hex: Secrets.hex(key.key))
                    }
                } catch RegistryError.beaconKeysNotConfigured {
                    // A registry without keys still serves the frames.
                }
            }
            var written = settings
            written.uuid = beacon.uuid.uuidString
            let response = ProvisioningPlanResponse(
                beaconId: beacon.id, settings: written,
                authentication: .init(
                    serviceUUID: plan.authentication.serviceUUID, characteristic: plan.authentication.characteristic.rawValue,
                    writeWithResponse: plan.authentication.writeWithResponse, passwords: plan.authentication.passwords
                ),
                steps: plan.steps.map {
                    .init(
                        index: $0.index, name: $0.name, command: Int($0.command), characteristic: $0.characteristic.rawValue,
                        bytes: $0.bytes.map(Int.init), hex: $0.hex)
                },
                frames: plan.steps.map(\.hex), gattKey: gattKey
            )
            return try Reply.json(response, request: request, context: context)
        }
        group.post("beacons/{id}/gatt-key/rotate") { request, context in
            // Admin only: the key written in the physical beacon verifies only until the grace
            // ends; an installer writes the new one (from the provisioning plan) before then.
            try context.authorize(.admin)
            let query = try StrictQuery(request, allowed: ["graceHours", "force"])
            let graceHours = try query.int(
                "graceHours", default: BeaconKeyRotation.defaultGraceHours, in: BeaconKeyRotation.graceHoursRange)
            let force = try query.choice("force", ["true": true, "false": false]) ?? false
            let rotation = try await repository.rotateBeaconKey(beaconId: try context.pathId(), graceHours: graceHours, force: force)
            return try Reply.json(rotation, request: request, context: context)
        }
        group.get("beacons/{id}/verification") { request, context in
            try context.authorize(.viewer)
            let minutes = try StrictQuery(request, allowed: ["withinMinutes"]).int("withinMinutes", default: 15, in: 1...1_440)
            let beacon = try await repository.beacon(id: try context.pathId())
            let result = try await repository.verifyBroadcast(beacon.identity, withinMinutes: minutes)
            return try Reply.json(
                BeaconVerificationResponse(beaconId: beacon.id, verification: result), request: request, context: context
            )
        }
        group.post("sightings") { request, context in
            try context.authorize(.installer)
            let body = try await request.decodeJSON(BeaconSightingReport.self)
            try await repository.recordSighting(BeaconSighting(beacon: body.beacon, deviceId: body.deviceId, seenAt: body.seenAt ?? Date()))
            return Response(status: .accepted)
        }
    }

    /// The CP28 settings: query parameters `deviceName` (1-20 ASCII, default `B<minor>`),
    /// `measuredPower` (-127...0 dBm, default the beacon's txPower when it fits, else -59),
    /// `advertisingIntervalUnits` (1...100 x 100 ms, default from advIntervalMs, else 3) and
    /// `txPowerIndex` (0...7, default 5).
    static func settings(for beacon: Beacon, request: Request) throws -> CP28BeaconSettings {
        let query = try StrictQuery(request, allowed: ["deviceName", "measuredPower", "advertisingIntervalUnits", "txPowerIndex"])
        let name = query["deviceName"] ?? "B\(beacon.minor)"
        let defaultPower = beacon.txPower.flatMap { (-127...0).contains($0) ? $0 : nil } ?? -59
        let defaultUnits = beacon.advIntervalMs.map { min(max(($0 + 50) / 100, 1), 100) } ?? 3
        return CP28BeaconSettings(
            deviceName: name, uuid: beacon.uuid.uuidString, major: beacon.major, minor: beacon.minor,
            measuredPower: try query.int("measuredPower", default: defaultPower, in: -127...0),
            advertisingIntervalUnits: try query.int("advertisingIntervalUnits", default: defaultUnits, in: 1...100),
            txPowerIndex: try query.int("txPowerIndex", default: 5, in: 0...7)
        )
    }
}
