import Testing

@testable import PresenceKit

/// A changed configuration fetched while the app runs (`replace(directory:at:)`): what the device
/// knows carries over by site id and beacon identity, and the site's settings apply as they now are.
@Suite("A new site directory while running")
struct DirectoryReplacementTests {
    static let device = SiteSettingsTests.device

    @Test("a site's new settings are in force at once, its kill switch included, and lifted again")
    func aSitesNewSettingsApplyAtOnce() throws {
        var d = try DeviceHarness(config: Self.device, directory: SiteSettingsTests.directory(hq: SiteSettingsTests.strict))
        try d.arrive()
        #expect(d.machine.config.enterRssi == -60 && d.scanning == [.continuous])
        try d.replace(SiteSettingsTests.directory(hq: SiteSettingsTests.killed))
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.flags.killSwitch && d.scanning.isEmpty)
        try d.run(seconds: 10) { _ in -55 }
        #expect(d.posts.isEmpty)
        try d.replace(SiteSettingsTests.directory(hq: nil))
        #expect(d.machine.settingsSiteId == nil && d.machine.config == Self.device && d.scanning == [.continuous])
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.siteId == "S_HQ")
    }

    @Test("an open session and the geofences carry over a directory whose sites moved, by site id")
    func theSessionCarriesOverBySiteId() throws {
        var d = try SiteSettingsTests.checkedInAtHQ(settings: nil)
        let swapped = SiteDirectory(sites: SiteSettingsTests.directory(hq: SiteSettingsTests.strict).sites.reversed())
        try d.replace(swapped)
        #expect(d.machine.openSession?.siteId == "S_HQ" && d.machine.insideSiteIds == ["S_HQ"])
        #expect(d.machine.settingsSiteId == "S_HQ" && d.machine.config.enterRssi == -60)
        try d.run(seconds: 30) { _ in -62 } // still present: the session's beacon, followed across the change
        #expect(d.phase == .present && d.checkIns.count == 1)
        try d.send(.geofenceExited(siteId: "S_HQ"))
        #expect(d.checkOuts.count == 1 && d.checkOuts.first?.siteId == "S_HQ")
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("a beacon retired from its site is no longer followed; the site's new one is")
    func retiredAndNewBeacons() throws {
        var d = try DeviceHarness(config: Self.device, directory: SiteSettingsTests.directory(hq: nil))
        try d.arrive()
        try d.run(seconds: 1) { _ in -75 } // gate A followed, too weak to check in
        let gateBOnly = SiteDirectory(sites: [
            Site(
                id: "S_HQ", center: World.hqCenter, radiusMeters: 200,
                beacons: [BeaconMatcher(World.companyUUID, major: 10, minor: 2)])
        ])
        try d.replace(gateBOnly)
        #expect((0..<BeaconTracker.capacity).allSatisfy { !d.machine.tracker.slot($0).occupied })
        try d.run(seconds: 5) { _ in -55 } // gate A: no site's beacon any more
        #expect(d.checkIns.isEmpty)
        try d.run(seconds: 3, beacon: World.gateB) { _ in -55 }
        #expect(d.checkIns.count == 1 && d.checkIns.first?.beacon == World.gateB)
    }

    @Test("a site removed from the user: its present session is as one whose beacon was lost, and resumes if the site comes back")
    func aRemovedSiteThatComesBack() throws {
        var d = try SiteSettingsTests.checkedInAtHQ(settings: SiteSettingsTests.strict)
        let labOnly = SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil).sites[1]])
        try d.replace(labOnly)
        #expect(d.machine.openSession?.siteId == "S_HQ" && d.phase == .softExitPending)
        #expect(d.machine.insideSiteIds.isEmpty && d.machine.settingsSiteId == nil && d.machine.config == Self.device)
        #expect(d.effects.contains { if case .persistSnapshot(let s) = $0 { return s.insideSiteIds.isEmpty } else { return false } })
        try d.run(seconds: 5) { _ in -55 } // the HQ's beacon is nobody's now: no presence
        #expect(d.phase == .softExitPending)
        try d.replace(SiteSettingsTests.directory(hq: SiteSettingsTests.strict))
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.phase == .present && d.checkIns.count == 1 && d.checkOuts.isEmpty)
    }

    @Test(
        "the site whose settings (equal to the device's own) were in force removed: the device's own kill switch later holds at every site")
    func aRemovedSettingsSiteLeavesNoStaleDeviceConfiguration() throws {
        var d = try DeviceHarness(config: Self.device, directory: SiteSettingsTests.directory(hq: Self.device))
        try d.arrive()
        #expect(d.machine.settingsSiteId == "S_HQ")
        // The HQ leaves the user's sites; the lab, with settings of its own, stays.
        try d.replace(SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil, lab: SiteSettingsTests.strict).sites[1]]))
        #expect(d.machine.settingsSiteId == nil && d.machine.deviceConfig == d.machine.config)
        try d.record(d.agent.apply(config: SiteSettingsTests.killed, at: d.now))
        #expect(d.machine.config.flags.killSwitch && d.machine.deviceConfig.flags.killSwitch && d.scanning.isEmpty)
        try d.arrive(site: "S_LAB")
        #expect(d.machine.settingsSiteId == nil && d.machine.config.flags.killSwitch && d.scanning.isEmpty)
        try d.run(seconds: 10, beacon: World.lab) { _ in -55 }
        #expect(d.posts.isEmpty)
    }

    @Test("a site removed from the user: the beacon region does not resume its session")
    func theRegionDoesNotResumeARemovedSitesSession() throws {
        var d = try SiteSettingsTests.checkedInAtHQ(settings: nil)
        try d.replace(SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil).sites[1]]))
        #expect(d.phase == .softExitPending)
        for _ in 0..<400 where d.phase != .confirmingExit && d.checkOuts.isEmpty { try d.advance(ms: 1_000) }
        try #require(d.phase == .confirmingExit)
        // The organization-wide region says "inside" (the lab's beacons, or the HQ's, now nobody's):
        // that is no presence at a site the user no longer has.
        try d.send(.beaconRegionState(inside: true))
        #expect(d.phase != .present)
        try #require(d.checkOuts.count == 1)
        #expect(d.checkOuts[0].siteId == "S_HQ" && d.machine.openSession == nil)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("a site removed from the user: its session is checked out after the grace, as a lost beacon's")
    func aRemovedSitesSessionEnds() throws {
        var d = try SiteSettingsTests.checkedInAtHQ(settings: nil)
        try d.replace(SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil).sites[1]]))
        try d.run(seconds: 240) { _ in -55 }
        #expect(d.checkOuts.count == 1 && d.checkOuts.first?.siteId == "S_HQ" && d.machine.openSession == nil)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    /// As shipped, check-outs follow the geofence exit; the removed site's geofence is no longer watched,
    /// so the session ends after the grace all the same, and the scanning its site started stops.
    @Test("a site removed from the user under the geofence-exit trigger: checked out after the grace, scanning stops")
    func aRemovedSitesSessionEndsUnderTheGeofenceTrigger() throws {
        var shipped = Self.device
        shipped.checkOutTrigger = .geofenceExit
        var d = try DeviceHarness(config: shipped, directory: SiteSettingsTests.directory(hq: nil))
        try d.arrive()
        try d.run(seconds: 3) { _ in -55 }
        try #require(d.checkIns.count == 1)
        // Moved to the other site only; that site's geofence is not the one the phone is in.
        try d.replace(SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil).sites[1]]))
        try d.run(seconds: 600) { _ in -55 }
        #expect(d.checkOuts.count == 1 && d.checkOuts.first?.siteId == "S_HQ" && d.machine.openSession == nil)
        #expect(d.checkOuts.first?.reason != .regionStateOutside)
        #expect(d.scanning.isEmpty && d.phase == .idle)
        #expect(attendanceViolations(d.posts).isEmpty)
    }

    @Test("a GATT challenge in flight is dropped: the next readings decide under the new directory's gates")
    func aChallengeInFlightIsDropped() throws {
        var gatt = Self.device
        gatt.flags.gattChallenge = true
        var d = try DeviceHarness(config: gatt, directory: SiteSettingsTests.directory(hq: nil))
        try d.arrive()
        try d.run(seconds: 3) { _ in -55 }
        #expect(d.phase == .verifying)
        var killed = gatt
        killed.flags.killSwitch = true
        try d.replace(SiteSettingsTests.directory(hq: killed))
        try d.send(.gattChallengeResult(ok: true, roundTripMs: 120))
        #expect(d.checkIns.isEmpty && d.machine.config.flags.killSwitch)
    }

    @Test("the only geofence's site removed: the device is outside every geofence, idle and not scanning")
    func theOnlyGeofencesSiteRemoved() throws {
        var d = try DeviceHarness(config: Self.device, directory: SiteSettingsTests.directory(hq: nil))
        try d.arrive()
        #expect(d.scanning == [.continuous])
        try d.replace(SiteDirectory(sites: [SiteSettingsTests.directory(hq: nil).sites[1]]))
        #expect(d.phase == .idle && d.scanning.isEmpty)
    }
}

extension DeviceHarness {
    /// Puts `directory` in force now, recording what the machine asked for.
    mutating func replace(_ directory: SiteDirectory) throws {
        let fx = agent.replace(directory: directory, at: clock.now())
        try record(fx)
    }
}
