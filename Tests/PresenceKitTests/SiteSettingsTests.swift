import Testing

@testable import PresenceKit

/// A site's own detection settings (`Site.settings`, the registry's per-site document) are in force
/// while the device is at that site, and the device's own configuration everywhere else.
@Suite("Site settings")
struct SiteSettingsTests {
    static let device = World.config { $0.flags.continuousScan = true }
    /// A site whose doors open onto a busy pavement: a stronger reading to check in.
    static let strict = World.config {
        $0.flags.continuousScan = true
        $0.enterRssi = -60
    }
    static let killed = World.config {
        $0.flags.continuousScan = true
        $0.flags.killSwitch = true
    }

    /// A continuously scanning configuration, changed by `change`.
    static func continuous(_ change: (inout PresenceConfig) -> Void) -> PresenceConfig {
        World.config {
            $0.flags.continuousScan = true
            change(&$0)
        }
    }

    /// The two sites of `World`, each with the given settings.
    static func directory(hq: PresenceConfig?, lab: PresenceConfig? = nil) -> SiteDirectory {
        SiteDirectory(sites: [
            Site(
                id: "S_HQ", center: World.hqCenter, radiusMeters: 200, beacons: [BeaconMatcher(World.companyUUID, major: 10)],
                settings: hq),
            Site(
                id: "S_LAB", center: World.labCenter, radiusMeters: 150,
                beacons: [BeaconMatcher(World.companyUUID, major: 20, minor: 1)], settings: lab),
        ])
    }

    /// A phone running `device` that arrived at the HQ (with `hq` as its settings) and checked in there.
    static func checkedInAtHQ(settings hq: PresenceConfig?) throws -> DeviceHarness {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: hq))
        try d.arrive()
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1)
        return d
    }

    @Test("inside a site's geofence its settings decide; outside it, the device's own")
    func settingsFollowTheSite() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict))
        #expect(d.machine.settingsSiteId == nil && d.machine.config == Self.device)
        try d.arrive()
        #expect(d.machine.settingsSiteId == "S_HQ")
        #expect(d.machine.config.enterRssi == -60 && d.machine.deviceConfig == Self.device)
        #expect(d.logs.contains { $0.1 == "detection settings of site S_HQ in force" })
        try d.run(seconds: 10) { _ in -65 } // enough for the device's -70, not for the site's -60
        #expect(d.checkIns.isEmpty)
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.checkOuts.count == 1)
        #expect(d.machine.settingsSiteId == nil && d.machine.config == Self.device)
        // The lab has no settings of its own: the device's -70 decides there.
        try d.arrive(site: "S_LAB")
        #expect(d.machine.settingsSiteId == nil)
        try d.run(seconds: 3, beacon: World.lab) { _ in -65 }
        #expect(d.checkIns.count == 2 && d.checkIns.last?.siteId == "S_LAB")
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("an open session keeps its site's settings when the device enters a neighbour's geofence")
    func theSessionsSiteDecides() throws {
        let lab = World.config {
            $0.flags.continuousScan = true
            $0.enterRssi = -68
        }
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict, lab: lab))
        try d.arrive()
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1)
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.enterRssi == -60)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.checkOuts.count == 1)
        #expect(d.machine.settingsSiteId == "S_LAB" && d.machine.config.enterRssi == -68)
        try d.run(seconds: 3, beacon: World.lab) { _ in -66 }
        #expect(d.checkIns.count == 2 && d.checkIns.last?.siteId == "S_LAB")
    }

    @Test("the geofence entered last decides between two sites with settings")
    func theLastEnteredSiteDecides() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict, lab: Self.device))
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        #expect(d.machine.settingsSiteId == "S_LAB")
        try d.send(.geofenceEntered(siteId: "S_HQ"))
        #expect(d.machine.settingsSiteId == "S_HQ")
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.machine.settingsSiteId == "S_LAB")
    }

    @Test("a site's kill switch stops detection at that site only")
    func aSitesKillSwitch() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.killed))
        try d.arrive()
        #expect(d.machine.settingsSiteId == "S_HQ" && d.scanning.isEmpty)
        try d.run(seconds: 10) { _ in -55 }
        #expect(d.posts.isEmpty)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.machine.settingsSiteId == nil && !d.machine.config.flags.killSwitch)
        #expect(d.logs.contains { $0.1 == "kill switch off: detection resumed" })
        try d.arrive(site: "S_LAB")
        #expect(d.scanning == [.continuous])
        try d.run(seconds: 3, beacon: World.lab) { _ in -60 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_LAB")
    }

    @Test("leaving a site whose kill switch is on is noticed from location fixes too")
    func aSitesKillSwitchEndsOnALocationFix() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.killed))
        try d.send(.location(World.hqCenter.moved(meters: 120, bearingDegrees: 270))) // inside the HQ, not the lab
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.flags.killSwitch)
        try d.send(.location(World.hqCenter.moved(meters: 2_000, bearingDegrees: 270)))
        #expect(d.machine.insideSiteIds.isEmpty)
        #expect(d.machine.settingsSiteId == nil && !d.machine.config.flags.killSwitch)
    }

    @Test("the device's own kill switch wins over every site's settings")
    func theDevicesKillSwitchWins() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict))
        try d.arrive()
        let fx = try d.agent.apply(config: Self.killed, at: d.now)
        try d.record(fx)
        #expect(d.machine.settingsSiteId == nil && d.machine.config.flags.killSwitch && d.scanning.isEmpty)
        try d.run(seconds: 10) { _ in -55 }
        #expect(d.posts.isEmpty)
        let resumed = try d.agent.apply(config: Self.device, at: d.now)
        try d.record(resumed)
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.enterRssi == -60)
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1)
    }

    @Test("a new device configuration applied at a site with settings takes effect when the device leaves it")
    func aNewDeviceConfigurationWaitsForTheSite() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict))
        try d.arrive()
        let newer = World.config {
            $0.flags.continuousScan = true
            $0.enterRssi = -68
        }
        let fx = try d.agent.apply(config: newer, at: d.now)
        try d.record(fx)
        #expect(d.machine.config.enterRssi == -60 && d.machine.deviceConfig.enterRssi == -68)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.machine.config == newer)
    }

    @Test("a relaunch inside a site with settings starts under them")
    func aRelaunchStartsUnderTheSitesSettings() throws {
        let snapshot = PresenceSnapshot(session: nil, insideSiteIds: ["S_HQ"], savedAt: World.start)
        let d = try DeviceHarness(config: Self.device, restoring: snapshot, directory: Self.directory(hq: Self.strict))
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.enterRssi == -60)
        #expect(d.machine.deviceConfig == Self.device)
    }

    @Test("a relaunch inside two sites with settings starts under those of the site it was at")
    func aRelaunchRemembersTheSiteItWasAt() throws {
        let lab = World.config {
            $0.flags.continuousScan = true
            $0.enterRssi = -68
        }
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: lab, lab: Self.strict))
        try d.send(.geofenceEntered(siteId: "S_HQ"))
        try d.send(.geofenceEntered(siteId: "S_LAB")) // entered last
        #expect(d.machine.settingsSiteId == "S_LAB")
        let snapshot = d.machine.snapshot(at: d.now)
        #expect(snapshot.insideSiteIds == ["S_HQ", "S_LAB"] && snapshot.atSiteId == "S_LAB")
        let relaunched = try DeviceHarness(config: Self.device, restoring: snapshot, directory: Self.directory(hq: lab, lab: Self.strict))
        #expect(relaunched.machine.settingsSiteId == "S_LAB" && relaunched.machine.config.enterRssi == -60)
        // A snapshot of an earlier version (no site it was at): the first site it is inside with settings.
        var earlier = snapshot
        earlier.atSiteId = nil
        let older = try DeviceHarness(config: Self.device, restoring: earlier, directory: Self.directory(hq: lab, lab: Self.strict))
        #expect(older.machine.settingsSiteId == "S_HQ")
        let decoded = try PresenceCoding.decodeSnapshot(Array(#"{"insideSiteIds":["S_HQ"],"savedAt":1758177312000}"#.utf8))
        #expect(decoded.atSiteId == nil && decoded.insideSiteIds == ["S_HQ"])
    }

    @Test("a site's settings that fail validation are dropped and reported, never put in force")
    func refusedSiteSettings() throws {
        var bad = Self.strict
        bad.leaveRssi = -50 // above the enter threshold
        let directory = Self.directory(hq: bad)
        #expect(directory.refusedSettings["S_HQ"]?.issues.map(\.key) == ["thresholds.leave_rssi"])
        #expect(directory.settings(ofSite: 0) == nil && !directory.hasSiteSettings)
        var d = try DeviceHarness(config: Self.device, directory: directory)
        try d.arrive()
        #expect(d.machine.settingsSiteId == nil && d.machine.config == Self.device)
    }

    @Test("evidence for a site whose settings are not in force puts them in force; the next readings decide under them")
    func evidenceTakesItsSitesSettings() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict))
        try d.arrive()
        try d.send(.geofenceEntered(siteId: "S_LAB")) // entered last, no settings: the device's own -70
        #expect(d.machine.settingsSiteId == nil)
        try d.run(seconds: 10) { _ in -65 } // enough for -70: but it is the HQ's beacon, and the HQ asks -60
        #expect(d.checkIns.isEmpty && d.machine.settingsSiteId == "S_HQ")
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_HQ")
    }

    @Test("a neighbour's gates do not judge a site's evidence: its own settings go in force first")
    func aNeighboursGatesDoNotJudge() throws {
        // The HQ gates on motion; the lab, reached by car or lift, does not.
        let gated = Self.continuous { $0.flags.motionGating = true }
        let ungated = Self.continuous { $0.flags.motionGating = false }
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: gated, lab: ungated))
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        try d.send(.geofenceEntered(siteId: "S_HQ")) // entered last: the HQ's settings, its motion gate
        try d.send(.motionActivity(.stationary))
        try d.advance(ms: 300_000) // long at rest: the motion gate is closed
        #expect(d.machine.settingsSiteId == "S_HQ")
        try d.run(seconds: 3, beacon: World.lab) { _ in -55 }
        #expect(d.machine.settingsSiteId == "S_LAB")
        try d.run(seconds: 3, beacon: World.lab) { _ in -55 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_LAB")
    }

    @Test("a neighbour's stricter rule does not hide a site's evidence; the nearest beacon decides, so sites do not take turns")
    func aNeighboursStricterRuleDoesNotHide() throws {
        let lab = Self.continuous { $0.enterRssi = -68 }
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.strict, lab: lab))
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        try d.send(.geofenceEntered(siteId: "S_HQ")) // entered last: the HQ's -60
        try d.send(.motionActivity(.walking))
        // The HQ's beacon is the nearest: its own -60 decides, and -64 is not enough.
        try d.run(seconds: 6) { _ in [(World.gateA, -64), (World.lab, -66)] }
        #expect(d.checkIns.isEmpty && d.machine.settingsSiteId == "S_HQ")
        // The lab's beacon is the nearest and passes the lab's -68: the lab's settings, then its check-in.
        try d.run(seconds: 6) { _ in [(World.gateA, -80), (World.lab, -64)] }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_LAB")
        #expect(d.machine.settingsSiteId == "S_LAB")
    }

    @Test("a site known from its beacons alone stops being the device's site when its session there ends")
    func anEvidenceOnlySiteEndsWithItsSession() throws {
        let noFence = Self.continuous { $0.flags.requireGeofence = false }
        let hq = Self.continuous {
            $0.flags.requireGeofence = false
            $0.enterRssi = -60
        }
        var d = try DeviceHarness(config: noFence, directory: Self.directory(hq: hq))
        try d.send(.motionActivity(.walking))
        try d.run(seconds: 3) { _ in -55 }
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1 && d.machine.settingsSiteId == "S_HQ")
        for _ in 0..<600 where d.checkOuts.isEmpty { try d.advance(ms: 1_000) } // walked away: the beacon lost
        #expect(d.checkOuts.count == 1)
        #expect(d.machine.settingsSiteId == nil && d.machine.config == noFence)
    }

    @Test("no check-in at a site whose kill switch is on, even while a neighbour's settings are in force")
    func noCheckInUnderASitesKillSwitch() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.killed))
        try d.arrive()
        try d.send(.geofenceEntered(siteId: "S_LAB"))
        #expect(d.machine.settingsSiteId == nil && d.scanning == [.continuous])
        try d.run(seconds: 10) { _ in -55 }
        #expect(d.posts.isEmpty)
        #expect(d.logs.contains { $0.1.contains("detection is off at that site (its kill switch)") })
        // Once the HQ's beacon is out of range (10 s without it), the lab's decides.
        try d.run(seconds: 15, beacon: World.lab) { _ in -60 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_LAB")
    }

    @Test("one kill switch after another starts nothing")
    func killSwitchAfterKillSwitch() throws {
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: Self.killed))
        try d.arrive()
        #expect(d.scanning.isEmpty)
        let fx = try d.agent.apply(config: Self.killed, at: d.now)
        try d.record(fx)
        #expect(!fx.contains { if case .startScanning = $0 { return true } else { return false } })
        #expect(d.scanning.isEmpty && d.machine.config.flags.killSwitch)
    }

    @Test("leaving the last geofence under a site's settings that need none stops what the device's own stop there")
    func requireGeofenceFollowsTheSettingsInForce() throws {
        var anywhere = Self.device
        anywhere.flags.requireGeofence = false
        var d = try DeviceHarness(config: Self.device, directory: Self.directory(hq: anywhere))
        try d.arrive()
        #expect(d.scanning == [.continuous])
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.machine.settingsSiteId == nil && d.phase == .idle && d.scanning.isEmpty)
    }

    @Test("a relaunch with a session open at a site with settings starts under them, inside its geofence or not")
    func aRelaunchWithASessionStartsUnderItsSitesSettings() throws {
        let d = try Self.checkedInAtHQ(settings: Self.strict)
        var snapshot = d.machine.snapshot(at: d.now)
        snapshot.insideSiteIds = []
        let relaunched = try DeviceHarness(config: Self.device, restoring: snapshot, directory: Self.directory(hq: Self.strict))
        #expect(relaunched.machine.openSession?.siteId == "S_HQ")
        #expect(relaunched.machine.settingsSiteId == "S_HQ" && relaunched.machine.config.enterRssi == -60)
    }

    @Test("a site without a radius of its own has its settings' radius, whatever settings are in force")
    func aSitesRadiusComesFromItsSettings() throws {
        var small = Self.device
        small.geofenceRadiusMeters = 150
        var large = Self.device
        large.geofenceRadiusMeters = 300
        let directory = SiteDirectory(sites: [
            Site(id: "S_HQ", center: World.hqCenter, beacons: [BeaconMatcher(World.companyUUID, major: 10)], settings: small),
            Site(
                id: "S_LAB", center: World.labCenter, radiusMeters: 150,
                beacons: [BeaconMatcher(World.companyUUID, major: 20, minor: 1)]),
        ])
        var d = try DeviceHarness(config: large, directory: directory)
        // 200 m from the HQ: inside the device's 300 m, outside the HQ's own 150 m.
        try d.send(.location(World.hqCenter.moved(meters: 200, bearingDegrees: 270)))
        #expect(d.machine.insideSiteIds.isEmpty)
        try d.send(.location(World.hqCenter.moved(meters: 100, bearingDegrees: 270)))
        #expect(d.machine.insideSiteIds == ["S_HQ"] && d.machine.settingsSiteId == "S_HQ")
    }
}
