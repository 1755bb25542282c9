import AccessControl
import ArgumentParser
import AttendanceProtocol
import Foundation
import RegistryClient

// `attendancectl registry <resource> <verb>`: one thin command per operation of the registry's REST
// API. Each parses its arguments, makes one `RegistryClient` call and prints the answer through
// `RegistryTables` (or the registry's JSON with `--json`).

extension AttendanceCtl {
    struct Registry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage the beacon registry over its REST API.",
            discussion: """
                Every command takes --url (default $REGISTRY_URL or \(RegistryClient.defaultURL)), --api-key (default \
                $ATTENDANCE_API_KEY) and --json (print the registry's JSON instead of a table).
                """,
            subcommands: [
                Organizations.self, Sites.self, Gates.self, Namespaces.self, Minors.self, Beacons.self, Users.self,
                EnrollmentCodes.self, Devices.self, APIKeys.self, Lookup.self, Service.self,
            ]
        )

    }
}

extension AttendanceCtl.Registry {
    // MARK: Organizations

    struct Organizations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Organizations (customers).", subcommands: [Create.self, List.self, Get.self], aliases: ["orgs"]
        )

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create an organization (admin).")
            @Option(help: "Its name.") var name: String
            @Option(help: "Its id (default: generated).") var id: String?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.organization) { client throws(RegistryClientError) in
                    try await client.createOrganization(NewOrganization(id: id, name: name))
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List organizations (viewer).")
            @OptionGroup var page: PageOptions
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.organizations) { client throws(RegistryClientError) in
                    try await client.listOrganizations(page.query)
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show an organization (viewer).")
            @Argument(help: "The organization's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.organization) { client throws(RegistryClientError) in
                    try await client.organization(id: id)
                }
            }
        }
    }

    // MARK: Sites

    struct Sites: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sites: time zone, geofence, shift and detection settings.",
            subcommands: [
                Create.self, List.self, Get.self, SetGeofence.self, SetShift.self, DetectionConfig.self, SetDetectionConfig.self,
            ]
        )

        /// A shift: its times and its windows and graces (those not given come from `base`).
        struct ShiftOptions: ParsableArguments {
            @Option(name: .customLong("shift-start"), help: "Shift start, HH:MM local time.") var shiftStart: TimeOfDay
            @Option(name: .customLong("shift-end"), help: "Shift end, HH:MM local time (before the start: overnight).") var shiftEnd:
                TimeOfDay
            @Option(name: .customLong("check-in-before"), help: "Minutes before the start a check-in counts (new site: 60).")
            var checkInBefore: Int?
            @Option(name: .customLong("check-out-after"), help: "Minutes after the end a check-out counts (new site: 120).")
            var checkOutAfter: Int?
            @Option(name: .customLong("late-grace"), help: "Minutes after the start that are not late (new site: 10).") var lateGrace: Int?
            @Option(name: .customLong("early-grace"), help: "Minutes before the end that are not early (new site: 5).") var earlyGrace: Int?

            /// A new site's windows and graces when none are given.
            static let defaults = ShiftSettings(
                start: TimeOfDay(hour: 0, minute: 0)!, end: TimeOfDay(hour: 0, minute: 0)!, checkInBeforeStartMinutes: 60,
                checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5)

            func shift(keeping base: ShiftSettings = defaults) -> ShiftSettings {
                ShiftSettings(
                    start: shiftStart, end: shiftEnd, checkInBeforeStartMinutes: checkInBefore ?? base.checkInBeforeStartMinutes,
                    checkOutAfterEndMinutes: checkOutAfter ?? base.checkOutAfterEndMinutes,
                    lateEntryGraceMinutes: lateGrace ?? base.lateEntryGraceMinutes,
                    earlyExitGraceMinutes: earlyGrace ?? base.earlyExitGraceMinutes)
            }
        }

        /// A geofence's centre and radius, checked as finite numbers.
        struct GeofenceOptions: ParsableArguments {
            // Unconditional: a southern latitude or a western longitude is typed with a minus sign.
            @Option(parsing: .unconditional, help: "Geofence centre latitude, -90...90.") var latitude: Double
            @Option(parsing: .unconditional, help: "Geofence centre longitude, -180...180.") var longitude: Double
            @Option(help: "Geofence radius in metres, 10...5000 (default for a new site: 200).") var radius: Double?

            /// A new site's radius when none is given.
            static let newSiteRadius = 200.0

            func validate() throws {
                for (option, value) in [("--latitude", latitude), ("--longitude", longitude), ("--radius", radius ?? 0)]
                where !value.isFinite {
                    throw ValidationError("\(option) must be a finite number, got \(value)")
                }
            }

            func geofence(radiusIfNone: Double) -> Geofence {
                Geofence(latitude: latitude, longitude: longitude, radiusMeters: radius ?? radiusIfNone)
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create a site (admin).")
            @Option(name: [.customLong("org"), .customLong("organization")], help: "The organization's id.") var organization: String
            @Option(help: "Its name.") var name: String
            @Option(help: "IANA time zone of its shift times, e.g. Asia/Ho_Chi_Minh.") var timezone: String
            @OptionGroup var geofence: GeofenceOptions
            @OptionGroup var shift: ShiftOptions
            @Option(help: "Its id (default: generated).") var id: String?
            @OptionGroup var registry: RegistryOptions

            var body: NewSite {
                NewSite(
                    id: id, organizationId: organization, name: name, timezone: timezone,
                    geofence: geofence.geofence(radiusIfNone: GeofenceOptions.newSiteRadius), shift: shift.shift())
            }

            func run() async throws {
                let body = body
                try await registry.show(RegistryTables.site) { client throws(RegistryClientError) in
                    try await client.createSite(body)
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List an organization's sites (viewer).")
            @Option(name: [.customLong("org"), .customLong("organization")], help: "The organization's id.") var organization: String
            @OptionGroup var page: PageOptions
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.sites) { client throws(RegistryClientError) in
                    try await client.listSites(organizationId: organization, page.query)
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show a site (viewer).")
            @Argument(help: "The site's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.site) { client throws(RegistryClientError) in
                    try await client.site(id: id)
                }
            }
        }

        struct SetShift: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-shift",
                abstract:
                    "Change a site's shift from a local day on (admin); earlier days keep theirs in the daily report. Windows and graces not given stay as they are."
            )
            @Argument(help: "The site's id.") var id: String
            @OptionGroup var shift: ShiftOptions
            @Option(help: "The first local day of the new shift, YYYY-MM-DD (default: the site's today).") var from: CalendarDate?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let (id, shift, from) = (id, shift, from)
                try await registry.show(RegistryTables.site) { client throws(RegistryClientError) in
                    let current = try await client.site(id: id).value.shift
                    return try await client.setSiteShift(siteId: id, SiteShiftChange(shift: shift.shift(keeping: current), from: from))
                }
            }
        }

        struct SetGeofence: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-geofence",
                abstract: "Move or resize a site's geofence (admin); phones take it with their next configuration.")
            @Argument(help: "The site's id.") var id: String
            @OptionGroup var geofence: GeofenceOptions
            @OptionGroup var registry: RegistryOptions

            func validate() throws {
                if geofence.radius == nil { throw ValidationError("name the radius with --radius (metres, 10...5000)") }
            }

            func run() async throws {
                // `validate()` made sure a radius is given.
                let geofence = geofence.geofence(radiusIfNone: GeofenceOptions.newSiteRadius)
                try await registry.show(RegistryTables.site) { client throws(RegistryClientError) in
                    try await client.setSiteGeofence(siteId: id, geofence)
                }
            }
        }

        struct DetectionConfig: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "detection-config", abstract: "Show the detection settings the site's devices apply (viewer).")
            @Argument(help: "The site's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.detectionConfig) { client throws(RegistryClientError) in
                    try await client.detectionConfig(siteId: id)
                }
            }
        }

        struct SetDetectionConfig: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-detection-config",
                abstract: "Replace the site's detection settings with a remote-config JSON document (admin).",
                discussion: """
                    The document's keys are the app's remote-config keys (docs/SPECIFICATION.md, section 1); `{}` \
                    restores the defaults. The registry refuses, naming each key, what the app would refuse. A file \
                    saved from `detection-config SITE --json` is set back as it was (its `document`).
                    """
            )
            @Argument(help: "The site's id.") var id: String
            @Option(help: ArgumentHelp("The JSON document (- reads standard input).", valueName: "file")) var file: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let document = Self.document(in: try CLIInput.read(file, what: "the detection settings"))
                try await registry.show(RegistryTables.detectionConfig) { client throws(RegistryClientError) in
                    try await client.setDetectionConfig(siteId: id, document: document)
                }
            }

            /// The document itself, or the `document` of a saved `detection-config --json` answer (an object
            /// with `siteId` and `document`: no remote-config document has those keys).
            static func document(in data: Data) -> Data {
                guard case .object(let members)? = try? ProtocolCodec.wire.decode(JSONValue.self, from: data),
                    members["siteId"] != nil, let document = members["document"],
                    let encoded = try? ProtocolCodec.wire.encode(document)
                else { return data }
                return Data(encoded)
            }
        }
    }

    // MARK: Gates

    struct Gates: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Gates (entrances, desks, rooms) of a site.", subcommands: [Create.self, List.self, Get.self]
        )

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create a gate (installer).")
            @Option(help: "The site's id.") var site: String
            @Option(help: "Its name.") var name: String
            @Option(help: "Its id (default: generated).") var id: String?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.gate) { client throws(RegistryClientError) in
                    try await client.createGate(NewGate(id: id, siteId: site, name: name))
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List a site's gates (viewer).")
            @Option(help: "The site's id.") var site: String
            @OptionGroup var page: PageOptions
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.gates) { client throws(RegistryClientError) in
                    try await client.listGates(siteId: site, page.query)
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show a gate (viewer).")
            @Argument(help: "The gate's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.gate) { client throws(RegistryClientError) in
                    try await client.gate(id: id)
                }
            }
        }
    }

    // MARK: Allocation

    struct Namespaces: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "An organization's namespace: its shard UUID and major.", subcommands: [Allocate.self]
        )

        struct Allocate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Allocate the organization's namespace (admin; returns the existing one when there is one)."
            )
            @Argument(help: "The organization's id.") var organization: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.namespace) { client throws(RegistryClientError) in
                    try await client.allocateNamespace(organizationId: organization)
                }
            }
        }
    }

    struct Minors: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Minors: a gate's number inside its organization's namespace.", subcommands: [Allocate.self]
        )

        struct Allocate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Allocate the next free minor to a gate (installer).")
            @Argument(help: "The gate's id.") var gate: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.minor) { client throws(RegistryClientError) in
                    try await client.allocateMinor(gateId: gate)
                }
            }
        }
    }

    // MARK: Beacons

    struct Beacons: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Beacons: register, inspect, retire, provision, verify.",
            subcommands: [Register.self, Get.self, List.self, SetStatus.self, RotateKey.self, Plan.self, Verify.self, RecordSighting.self]
        )

        struct Register: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Register a beacon at a gate (installer); vendors' factory-default UUIDs are refused."
            )
            @Option(help: "The gate's id.") var gate: String
            @Option(help: "Proximity UUID, 32 hex digits (dashes optional).") var uuid: String
            @Option(help: "Major, 0-65535.") var major: Int
            @Option(help: "Minor, 0-65535.") var minor: Int
            @Option(help: "Vendor serial number.") var serial: String?
            @Option(help: "MAC address, AA:BB:CC:DD:EE:FF.") var mac: String?
            @Option(name: .customLong("tx-power"), parsing: .unconditional, help: "Calibrated power at 1 m in dBm, -127...20.") var txPower:
                Int?
            @Option(name: .customLong("adv-interval-ms"), help: "Advertising interval in ms, 20-10240.") var advIntervalMs: Int?
            @Option(name: .customLong("battery-replaced-on"), help: "YYYY-MM-DD.") var batteryReplacedOn: CalendarDate?
            @Option(help: "Its id (default: generated).") var id: String?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let body = NewBeacon(
                    id: id, uuid: uuid, major: major, minor: minor, serial: serial, mac: mac, txPower: txPower,
                    advIntervalMs: advIntervalMs, batteryReplacedOn: batteryReplacedOn, gateId: gate
                )
                try await registry.show(RegistryTables.beacon) { client throws(RegistryClientError) in
                    try await client.registerBeacon(body)
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show a beacon (viewer).")
            @Argument(help: "The beacon's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.beacon) { client throws(RegistryClientError) in
                    try await client.beacon(id: id)
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the beacons of a site's gates (viewer).")
            @Option(help: "The site's id.") var site: String
            @OptionGroup var page: PageOptions
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.beacons) { client throws(RegistryClientError) in
                    try await client.listBeacons(siteId: site, page.query)
                }
            }
        }

        struct SetStatus: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Change a beacon's status (installer).")
            @Argument(help: "The beacon's id.") var id: String
            @Argument(help: "active, retired or lost.") var status: BeaconStatusArgument
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let status = BeaconStatus(rawValue: status.rawValue) ?? .active
                try await registry.show(RegistryTables.beacon) { client throws(RegistryClientError) in
                    try await client.setBeaconStatus(id: id, status: status)
                }
            }
        }

        struct RotateKey: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "rotate-key",
                abstract: "Give a beacon a new GATT challenge key (admin); write it into the beacon from its plan.",
                discussion: """
                    The replaced key keeps verifying check-ins for the grace period (default 168 hours), \
                    since the beacon answers with it until an installer writes the new key. \
                    Use --grace-hours 0 for a leaked key: its check-ins are refused at once. \
                    While an earlier rotation's replaced key still verifies the registry refuses a new one \
                    (409); --force once the installer has written the current key.
                    """
            )
            @Argument(help: "The beacon's id.") var id: String
            @Option(name: .customLong("grace-hours"), help: "How long the replaced key still verifies, 0-720 hours (default 168).")
            var graceHours: Int?
            @Flag(help: "Rotate within an earlier rotation's grace (the installer has written the current key).") var force = false
            @OptionGroup var registry: RegistryOptions

            func validate() throws {
                if let graceHours, !BeaconKeyRotation.graceHoursRange.contains(graceHours) {
                    throw ValidationError("--grace-hours must be 0-720 (0: the replaced key stops verifying at once).")
                }
            }

            func run() async throws {
                try await registry.show(RegistryTables.keyRotation) { client throws(RegistryClientError) in
                    try await client.rotateBeaconKey(id: id, graceHours: graceHours, force: force)
                }
            }
        }

        struct Plan: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The DX-Smart CP28 write sequence for a beacon, as hex frames (viewer)."
            )
            @Argument(help: "The beacon's id.") var id: String
            @Option(name: .customLong("device-name"), help: "1-20 printable ASCII characters (default B<minor>).") var deviceName: String?
            @Option(
                name: .customLong("measured-power"), parsing: .unconditional,
                help: "RSSI at 1 m in dBm, -127...0 (default the beacon's tx power, else -59).") var measuredPower: Int?
            @Option(name: .customLong("advertising-interval-units"), help: "Advertising interval in 100 ms units, 1-100.")
            var advertisingIntervalUnits: Int?
            @Option(name: .customLong("tx-power-index"), help: "Radio power level 0 (weakest) to 7 (default 5).") var txPowerIndex: Int?
            @Flag(name: .customLong("frames-only"), help: "Print only the frames, one per line (for a provisioning tool).") var framesOnly =
                false
            @Flag(
                name: .customLong("key-only"),
                help: "Print only the beacon's GATT key in hex, written after the frames (installer or admin key).")
            var keyOnly = false
            @OptionGroup var registry: RegistryOptions

            func validate() throws {
                if framesOnly && keyOnly { throw ValidationError("--frames-only and --key-only print different things: pass one") }
                if keyOnly && registry.json { throw ValidationError("--json prints the whole plan, the key included: drop --key-only") }
            }

            func run() async throws {
                let query = ProvisioningPlanQuery(
                    deviceName: deviceName, measuredPower: measuredPower, advertisingIntervalUnits: advertisingIntervalUnits,
                    txPowerIndex: txPowerIndex
                )
                let id = id
                let call = { (client: RegistryClient) async throws(RegistryClientError) -> RegistryReply<ProvisioningPlanResponse> in
                    try await client.provisioningPlan(beaconId: id, query)
                }
                guard keyOnly else {
                    let framesOnly = framesOnly
                    try await registry.show({ framesOnly ? $0.frames.joined(separator: "\n") : RegistryTables.plan($0) }, call)
                    return
                }
                guard let key = try await call(try registry.client()).value.gattKey else {
                    throw CLIError("beacon \(id): the plan carries no GATT key: " + RegistryTables.noGattKeyReason)
                }
                CLIContext.current.out(key.hex)
            }
        }

        struct Verify: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Whether devices reported the beacon recently (viewer)."
            )
            @Argument(help: "The beacon's id.") var id: String
            @Option(name: .customLong("within-minutes"), help: "The window, 1-1440 minutes (default 15).") var withinMinutes: Int?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.verification) { client throws(RegistryClientError) in
                    try await client.verifyBroadcast(beaconId: id, withinMinutes: withinMinutes)
                }
            }
        }

        struct RecordSighting: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Record that a device heard a beacon (installer).")
            @Option(help: "The beacon's proximity UUID.") var uuid: String
            @Option(help: "Major, 0-65535.") var major: Int
            @Option(help: "Minor, 0-65535.") var minor: Int
            @Option(help: "The device that heard it.") var device: String
            @Option(name: .customLong("seen-at"), help: "RFC 3339 time, e.g. 2025-09-18T08:30:00Z (default now).") var seenAt: String?
            @OptionGroup var registry: RegistryOptions

            func validate() throws {
                if let seenAt, WireTimestamp.date(from: seenAt) == nil {
                    throw ValidationError("--seen-at \"\(seenAt)\" is not an RFC 3339 time such as 2025-09-18T08:30:00Z")
                }
            }

            func run() async throws {
                let body = BeaconSightingReport(
                    beacon: BeaconIdentity(uuid: uuid, major: major, minor: minor), deviceId: device,
                    seenAt: seenAt.flatMap(WireTimestamp.date(from:))
                )
                try await registry.show({ _ in "sighting recorded" }) { client throws(RegistryClientError) in
                    try await client.recordSighting(body)
                }
            }
        }
    }

    // MARK: Users and devices

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "People whose attendance is taken.", subcommands: [Create.self, Get.self, Devices.self, Rename.self, SetSites.self]
        )

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create a user (admin).")
            @Option(help: "Their name.") var name: String
            @Option(name: .customLong("site"), help: "A site they work at (repeat for several).") var sites: [String] = []
            @Option(help: "Their id, often the HR system's employee id (default: generated).") var id: String?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let body = NewUser(id: id, name: name, siteIds: sites)
                try await registry.show(RegistryTables.user) { client throws(RegistryClientError) in
                    try await client.createUser(body)
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show a user and their sites (viewer).")
            @Argument(help: "The user's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.user) { client throws(RegistryClientError) in
                    try await client.user(id: id)
                }
            }
        }

        struct Devices: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List the phones enrolled for a user, revoked ones included (viewer).")
            @Argument(help: "The user's id.") var id: String
            @OptionGroup var page: PageOptions
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.devices) { client throws(RegistryClientError) in
                    try await client.listDevices(userId: id, page.query)
                }
            }
        }

        struct Rename: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Correct a user's name (admin); the registry keeps no earlier name.")
            @Argument(help: "The user's id.") var id: String
            @Option(help: "The name from now on.") var name: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.user) { client throws(RegistryClientError) in
                    try await client.renameUser(userId: id, name: name)
                }
            }
        }

        struct SetSites: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-sites",
                abstract: "Replace the sites a user is assigned to (admin); they keep their id, devices and history.")
            @Argument(help: "The user's id.") var id: String
            @Option(name: .customLong("site"), help: "A site they work at from now on (repeat for several).") var sites: [String] = []
            @Flag(name: .customLong("no-sites"), help: "Assign no site at all.") var noSites = false
            @OptionGroup var registry: RegistryOptions

            func validate() throws {
                if sites.isEmpty && !noSites {
                    throw ValidationError("name the sites with --site (repeat for several), or pass --no-sites")
                }
                if !sites.isEmpty && noSites { throw ValidationError("--no-sites assigns none: drop --site") }
            }

            func run() async throws {
                try await registry.show(RegistryTables.user) { client throws(RegistryClientError) in
                    try await client.setUserSites(userId: id, siteIds: sites)
                }
            }
        }
    }

    struct EnrollmentCodes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "enrollment-codes", abstract: "One-time codes that bind a phone to a user.", subcommands: [Create.self]
        )

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Issue an enrollment code for a user (admin); it is shown once.")
            @Option(help: "The user's id.") var user: String
            @Option(name: .customLong("validity-minutes"), help: "How long it is valid, 1-43200 minutes (default 1440).")
            var validityMinutes: Int?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.enrollmentCode) { client throws(RegistryClientError) in
                    try await client.createEnrollmentCode(userId: user, validityMinutes: validityMinutes)
                }
            }
        }
    }

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enrolled phones.", subcommands: [Get.self, Revoke.self, Enroll.self]
        )

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show a device (viewer).")
            @Argument(help: "The device's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.device) { client throws(RegistryClientError) in
                    try await client.device(id: id)
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a device (admin); its token stops working.")
            @Argument(help: "The device's id.") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.device) { client throws(RegistryClientError) in
                    try await client.revokeDevice(id: id)
                }
            }
        }

        struct Enroll: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Exchange an enrollment code for device credentials, as the phone app does (no API key)."
            )
            @Option(help: "The one-time code, XXXXX-XXXXX.") var code: String
            @Option(name: .customLong("app-version"), help: "The app's version.") var appVersion: String?
            @Option(help: "The phone's model.") var model: String?
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let body = DeviceEnrollment(code: code, appVersion: appVersion, model: model)
                try await registry.show(RegistryTables.credentials) { client throws(RegistryClientError) in
                    try await client.enrollDevice(body)
                }
            }
        }
    }

    // MARK: API keys

    struct APIKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "api-keys", abstract: "Admin API keys.", subcommands: [Create.self, Revoke.self]
        )

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create an API key (admin); its secret is shown once.")
            @Option(help: "What it is for.") var name: String
            @Option(help: "viewer, installer or admin.") var role: RoleArgument
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let role = APIRole(rawValue: role.rawValue) ?? .viewer
                try await registry.show(RegistryTables.issuedAPIKey) { client throws(RegistryClientError) in
                    try await client.createAPIKey(name: name, role: role)
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke an API key (admin).")
            @Argument(help: "The key's id (the part between brk_ and the dot).") var id: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.apiKey) { client throws(RegistryClientError) in
                    try await client.revokeAPIKey(id: id)
                }
            }
        }
    }

    // MARK: Lookups

    struct Lookup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Who owns a beacon identity, answered from the registry's in-memory cache (viewer).",
            subcommands: [Beacon.self, Business.self, UUIDBeacons.self, MAC.self]
        )

        struct Beacon: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Resolve (uuid, major, minor) to beacon, gate, site and organization.")
            @Argument(help: "The proximity UUID.") var uuid: String
            @Argument(help: "Major, 0-65535.") var major: Int
            @Argument(help: "Minor, 0-65535.") var minor: Int
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.beaconLookup) { client throws(RegistryClientError) in
                    try await client.lookupBeacon(uuid: uuid, major: major, minor: minor)
                }
            }
        }

        struct Business: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Resolve a namespace (uuid, major) to its organization.")
            @Argument(help: "The shard UUID.") var uuid: String
            @Argument(help: "Major, 0-65535.") var major: Int
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.businessLookup) { client throws(RegistryClientError) in
                    try await client.lookupBusiness(uuid: uuid, major: major)
                }
            }
        }

        struct UUIDBeacons: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "uuid", abstract: "Every registered beacon broadcasting a UUID.")
            @Argument(help: "The proximity UUID.") var uuid: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.beaconsByUUID) { client throws(RegistryClientError) in
                    try await client.lookupBeacons(uuid: uuid)
                }
            }
        }

        struct MAC: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "mac", abstract: "The beacon with a Bluetooth MAC address (any common spelling).")
            @Argument(help: "The MAC, e.g. AC:23:3F:A1:B2:C3.") var mac: String
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                try await registry.show(RegistryTables.beaconLookup) { client throws(RegistryClientError) in
                    try await client.lookupBeacon(mac: mac)
                }
            }
        }
    }

    // MARK: Service

    struct Service: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The registry process: health, OpenAPI document, metrics (no API key).",
            subcommands: [Health.self, OpenAPI.self, Metrics.self]
        )

        struct Health: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Liveness and readiness; exits 1 when not ready.")
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                let (live, ready) = try await registry.client().health()
                let out = CLIContext.current.out
                if registry.json {
                    out(String(decoding: ready.json, as: UTF8.self))
                } else {
                    out(RegistryTables.health(live: live.value, ready: ready.value))
                }
                if ready.value.status != "ok" { throw ExitCode(1) }
            }
        }

        struct OpenAPI: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "openapi", abstract: "Print the OpenAPI document the registry serves.")
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                CLIContext.current.out(try await registry.client().openAPIDocument())
            }
        }

        struct Metrics: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print the registry's Prometheus metrics.")
            @OptionGroup var registry: RegistryOptions

            func run() async throws {
                CLIContext.current.out(try await registry.client().metrics())
            }
        }
    }
}
