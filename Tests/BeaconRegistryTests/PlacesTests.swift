import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryDatabaseTests {
    @Suite("Organizations, sites, gates and users", .serialized)
    struct Places {
        @Test func everyCreateIsStoredAndAppendedToTheOutboxWithItsEntity() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                #expect(fixture.site.shift.start == TimeOfDay(hour: 8, minute: 30))
                #expect(fixture.site.shift.lateEntryGraceMinutes == 10)
                #expect(fixture.site.geofence.radiusMeters == 200)
                #expect(fixture.user.siteIds == [fixture.site.id])

                let organization = try #require(
                    try await outboxRows(client, type: "organization", id: fixture.organization.id).first?.payload)
                #expect(try ProtocolCodec.wire.decode(Organization.self, from: organization).name == fixture.organization.name)
                // The wire format keeps timestamps to the millisecond; everything else round-trips exactly.
                var expectedSite = fixture.site
                expectedSite.createdAt = WireTimestamp.truncatedToWirePrecision(expectedSite.createdAt)
                let site = try #require(try await outboxRows(client, type: "site", id: fixture.site.id).first?.payload)
                #expect(try ProtocolCodec.wire.decode(Site.self, from: site) == expectedSite)
                #expect(site.contains("\"start\": \"08:30\"") || site.contains("\"start\":\"08:30\""))
                let gate = try #require(try await outboxRows(client, type: "gate", id: fixture.gate.id).first?.payload)
                var expectedGate = fixture.gate
                expectedGate.createdAt = WireTimestamp.truncatedToWirePrecision(expectedGate.createdAt)
                #expect(try ProtocolCodec.wire.decode(Gate.self, from: gate) == expectedGate)
                let user = try #require(try await outboxRows(client, type: "user", id: fixture.user.id).first?.payload)
                #expect(try ProtocolCodec.wire.decode(User.self, from: user).siteIds == [fixture.site.id])
            }
        }

        /// A geofence moved while a shift change holds the site: the site published after it carries the
        /// new shift and the earlier one's history, not a mix of the two snapshots.
        @Test func aGeofenceMovedDuringAShiftChangePublishesTheWholeSite() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let siteId = fixture.site.id
                let (held, holding) = AsyncStream<Void>.makeStream()
                let (release, releasing) = AsyncStream<Void>.makeStream()
                let shiftChange = Task {
                    try await client.withTransaction(logger: RegistryTestDatabase.logger) { db in
                        try await db.query("SELECT id FROM sites WHERE id = \(siteId) FOR UPDATE", logger: RegistryTestDatabase.logger)
                        try await db.query(
                            """
                            INSERT INTO site_shift_history (site_id, until, shift_start, shift_end, check_in_before_start_min,
                                check_out_after_end_min, late_entry_grace_min, early_exit_grace_min)
                            VALUES (\(siteId), '2025-01-01', '08:30', '17:30', 60, 120, 10, 5)
                            """, logger: RegistryTestDatabase.logger)
                        try await db.query(
                            "UPDATE sites SET shift_start = '10:00'::time WHERE id = \(siteId)", logger: RegistryTestDatabase.logger)
                        holding.yield()
                        for await _ in release { break }
                    }
                }
                for await _ in held { break }
                let moved = Task {
                    try await repository.setSiteGeofence(siteId: siteId, Geofence(latitude: 10.78, longitude: 106.70, radiusMeters: 300))
                }
                try await Task.sleep(for: .milliseconds(300))
                releasing.yield()
                try await shiftChange.value
                let site = try await moved.value
                #expect(site.shift.start.description == "10:00" && site.shiftHistory.count == 1)
                let published = try await outboxRows(client, type: "site", id: siteId)
                let last = try ProtocolCodec.wire.decode(Site.self, from: Data(try #require(published.last?.payload).utf8))
                #expect(last.shift.start.description == "10:00")
                #expect(last.shiftHistory.map(\.until.description) == ["2025-01-01"])
                #expect(last.geofence.radiusMeters == 300)
            }
        }

        /// New working hours from a day on keep the earlier days' hours; a change dated before earlier
        /// ones replaces them from that day on; each change is published with the whole history.
        @Test func aShiftChangeKeepsTheEarlierDaysShifts() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let day = fixture.site.shift // 08:30-17:30
                func shift(_ start: Int, _ end: Int) throws -> ShiftSettings {
                    var s = day
                    s.start = try #require(TimeOfDay(hour: start, minute: 0))
                    s.end = try #require(TimeOfDay(hour: end, minute: 0))
                    return s
                }
                func date(_ text: String) throws -> CalendarDate { try #require(CalendarDate(text)) }
                let siteId = fixture.site.id

                let october = try await repository.setSiteShift(
                    siteId: siteId, SiteShiftChange(shift: try shift(9, 18), from: try date("2025-10-01")))
                #expect(october.shift == (try shift(9, 18)))
                #expect(october.shiftHistory == [ShiftPeriod(until: try date("2025-10-01"), shift: day)])
                let november = try await repository.setSiteShift(
                    siteId: siteId, SiteShiftChange(shift: try shift(10, 19), from: try date("2025-11-01")))
                #expect(november.shiftHistory.map(\.until) == [try date("2025-10-01"), try date("2025-11-01")])
                #expect(november.shiftHistory.map(\.shift) == [day, try shift(9, 18)])
                // From mid-October: the 09:00 period ends then, November's change is replaced.
                let mid = try await repository.setSiteShift(
                    siteId: siteId, SiteShiftChange(shift: try shift(7, 16), from: try date("2025-10-15")))
                #expect(mid.shiftHistory.map(\.until) == [try date("2025-10-01"), try date("2025-10-15")])
                #expect(mid.shift == (try shift(7, 16)))
                // From before every change: one period left, the first shift until then.
                let early = try await repository.setSiteShift(
                    siteId: siteId, SiteShiftChange(shift: try shift(6, 15), from: try date("2025-09-01")))
                #expect(early.shiftHistory == [ShiftPeriod(until: try date("2025-09-01"), shift: day)])
                #expect(try await repository.site(id: siteId) == early)

                // Published with it: the feed's readers judge each day by its own shift.
                let published = try #require(try await outboxRows(client, type: "site", id: siteId).last?.payload)
                #expect(try ProtocolCodec.wire.decode(Site.self, from: published).shiftHistory == early.shiftHistory)

                // Refused, naming the field; an unknown site is a 404.
                var bad = try shift(9, 18)
                bad.checkInBeforeStartMinutes = 2_000
                await #expect(throws: RegistryError.self) {
                    try await repository.setSiteShift(siteId: siteId, SiteShiftChange(shift: bad))
                }
                await #expect(throws: RegistryError.self) {
                    try await repository.setSiteShift(siteId: siteId, SiteShiftChange(shift: day, from: try date("1999-12-31")))
                }
                // Not ahead of the site's today: the site's shift is the one in force.
                let nextYear = CalendarDate(daysSince1970: Int(Date().timeIntervalSince1970 / 86_400) + 366)
                do {
                    _ = try await repository.setSiteShift(siteId: siteId, SiteShiftChange(shift: day, from: nextYear))
                    Issue.record("a change dated next year was taken")
                } catch RegistryError.invalidInput(let errors) {
                    #expect(errors.map(\.field) == ["from"] && errors.first?.reason.contains("after the site's today") == true)
                }
                do {
                    _ = try await repository.setSiteShift(siteId: "site-nowhere", SiteShiftChange(shift: day))
                    Issue.record("an unknown site was changed")
                } catch RegistryError.notFound(.site, _) {}
                // Without a date: from the site's today.
                let today = try await repository.setSiteShift(siteId: siteId, SiteShiftChange(shift: day))
                #expect(today.shiftHistory.last?.until.daysSince1970 ?? 0 >= Int(Date().timeIntervalSince1970 / 86_400) - 1)
            }
        }

        @Test func invalidSiteIsRefusedFieldByFieldAndNothingIsWritten() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let organization = try await repository.createOrganization(NewOrganization(name: "Invalid sites"))
                var site = NewSite.dayShift(organizationId: organization.id)
                site.id = "site_invalid_\(UInt32.random(in: 0...UInt32.max))"
                site.timezone = "Mars/Olympus_Mons"
                site.geofence = Geofence(latitude: 91, longitude: 106, radiusMeters: 5)
                site.shift.lateEntryGraceMinutes = -1
                do {
                    _ = try await repository.createSite(site)
                    Issue.record("accepted")
                } catch let error as RegistryError {
                    guard case .invalidInput(let errors) = error else { Issue.record("\(error)"); return }
                    #expect(
                        Set(errors.map(\.field)) == [
                            "timezone", "geofence.latitude", "geofence.radiusMeters", "shift.lateEntryGraceMinutes",
                        ])
                }
                #expect(try await outboxRows(client, type: "site", id: site.id!).isEmpty)

                var radiusTooLarge = NewSite.dayShift(organizationId: organization.id)
                radiusTooLarge.geofence.radiusMeters = 5_001
                await #expect(throws: RegistryError.self) { try await repository.createSite(radiusTooLarge) }
            }
        }

        @Test func missingParentsDuplicatesAndTakenIdsAreTyped() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                await #expect(throws: RegistryError.notFound(.organization, id: "org_missing")) {
                    try await repository.createSite(NewSite.dayShift(organizationId: "org_missing"))
                }
                await #expect(throws: RegistryError.notFound(.site, id: "site_missing")) {
                    try await repository.createGate(NewGate(siteId: "site_missing", name: "Door"))
                }
                await #expect(throws: RegistryError.notFound(.site, id: "site_missing")) {
                    try await repository.createUser(NewUser(name: "Someone", siteIds: [fixture.site.id, "site_missing"]))
                }
                await #expect(throws: RegistryError.duplicateName(.gate, name: "Main entrance")) {
                    try await repository.createGate(NewGate(siteId: fixture.site.id, name: "  Main entrance "))
                }
                await #expect(throws: RegistryError.alreadyExists(.organization, id: fixture.organization.id)) {
                    try await repository.createOrganization(NewOrganization(id: fixture.organization.id, name: "Again"))
                }
                let employee = "EMP-\(UInt32.random(in: 0...UInt32.max))"
                let user = try await repository.createUser(
                    NewUser(id: employee, name: "Trần Thị Bình", siteIds: [fixture.site.id, fixture.site.id]))
                #expect(user.id == employee && user.siteIds == [fixture.site.id])
                await #expect(throws: RegistryError.alreadyExists(.user, id: employee)) {
                    try await repository.createUser(NewUser(id: employee, name: "Duplicate"))
                }
            }
        }

        @Test func aUserMovedToAnotherSiteKeepsTheirIdAndTheFeedCarriesTheNewAssignment() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let warehouse = try await repository.createSite(
                    NewSite.dayShift(organizationId: fixture.organization.id, name: "Warehouse \(UInt32.random(in: 0...UInt32.max))"))
                let moved = try await repository.setUserSites(userId: fixture.user.id, siteIds: [warehouse.id, warehouse.id])
                #expect(moved.id == fixture.user.id && moved.name == fixture.user.name && moved.siteIds == [warehouse.id])
                #expect(try await repository.user(id: fixture.user.id) == moved)
                // Published again, after the creation: the feed's caches (the policy's site assignment) follow.
                let published = try await outboxRows(client, type: "user", id: fixture.user.id)
                try #require(published.count == 2)
                let last = try #require(published[1].payload)
                #expect(published[1].op == "upsert")
                #expect(try ProtocolCodec.wire.decode(User.self, from: last).siteIds == [warehouse.id])
                // When the sites changed travels with them (the policy does not refuse what was made before);
                // a new name is no move.
                let created = try #require(fixture.user.sitesChangedAt), movedAt = try #require(moved.sitesChangedAt)
                #expect(movedAt >= created)
                #expect(try ProtocolCodec.wire.decode(User.self, from: last).sitesChangedAt != nil)
                let renamed = try await repository.renameUser(userId: fixture.user.id, name: "Renamed")
                #expect(renamed.sitesChangedAt == moved.sitesChangedAt && renamed.name == "Renamed")

                // Both sites, then none; a site that does not exist changes nothing.
                let both = try await repository.setUserSites(userId: fixture.user.id, siteIds: [fixture.site.id, warehouse.id])
                #expect(Set(both.siteIds) == [fixture.site.id, warehouse.id])
                await #expect(throws: RegistryError.notFound(.site, id: "site_missing")) {
                    try await repository.setUserSites(userId: fixture.user.id, siteIds: [warehouse.id, "site_missing"])
                }
                #expect(Set(try await repository.user(id: fixture.user.id).siteIds) == [fixture.site.id, warehouse.id])
                // A site of another organization beside one of theirs: refused naming both, on create too.
                let other = try await repository.createOrganization(NewOrganization(name: "Other \(UInt32.random(in: 0...UInt32.max))"))
                let elsewhere = try await repository.createSite(NewSite.dayShift(organizationId: other.id, name: "Elsewhere"))
                do {
                    _ = try await repository.setUserSites(userId: fixture.user.id, siteIds: [warehouse.id, elsewhere.id])
                    Issue.record("a user was given sites of two organizations")
                } catch {
                    guard case RegistryError.invalidInput(let fields) = error else { throw error }
                    #expect(fields.first?.field == "siteIds")
                    #expect(fields.first?.reason.contains("\(elsewhere.id) of \(other.id)") == true, "\(fields)")
                }
                await #expect(throws: RegistryError.self) {
                    try await repository.createUser(NewUser(name: "Two employers", siteIds: [fixture.site.id, elsewhere.id]))
                }
                #expect(Set(try await repository.user(id: fixture.user.id).siteIds) == [fixture.site.id, warehouse.id])
                #expect(try await repository.setUserSites(userId: fixture.user.id, siteIds: []).siteIds == [])
                // Created, moved, renamed, both sites, none (no relay runs here to fold the published ones).
                #expect(try await outboxRows(client, type: "user", id: fixture.user.id).count == 5)

                await #expect(throws: RegistryError.notFound(.user, id: "usr_missing")) {
                    try await repository.setUserSites(userId: "usr_missing", siteIds: [warehouse.id])
                }
                await #expect(throws: RegistryError.notFound(.user, id: "usr_missing")) { try await repository.user(id: "usr_missing") }
                await #expect(throws: RegistryError.self) {
                    try await repository.setUserSites(userId: fixture.user.id, siteIds: ["not an id!"])
                }
            }
        }
    }
}

@Suite("Value types")
struct ValueTypeTests {
    @Test func timeOfDayParsesAndPrints() {
        #expect(TimeOfDay("08:30") == TimeOfDay(hour: 8, minute: 30))
        #expect(TimeOfDay("8:05")?.description == "08:05")
        #expect(TimeOfDay("23:59:00") == TimeOfDay(hour: 23, minute: 59))
        for bad in ["24:00", "12:60", "12", "ab:cd", "12:5", "-1:00", "12:00:30"] { #expect(TimeOfDay(bad) == nil, "\(bad)") }
    }

    @Test func calendarDateRefusesImpossibleDays() {
        #expect(CalendarDate("2024-02-29")?.description == "2024-02-29")
        #expect(CalendarDate("1900-02-28")?.description == "1900-02-28")
        for bad in [
            "2025-02-29", "1900-02-29", "2025-13-01", "2025-00-10", "2025-04-31", "2025-04-00", "25-01-01", "2025-1-01", "2025-01-1x",
        ] {
            #expect(CalendarDate(bad) == nil, "\(bad)")
        }
    }

    @Test func calendarDatesCountDaysAcrossMonthsYearsAndTheEpoch() throws {
        let leapDay = try #require(CalendarDate(year: 2024, month: 2, day: 29))
        #expect(leapDay.next == CalendarDate(year: 2024, month: 3, day: 1))
        #expect(CalendarDate(year: 2025, month: 12, day: 31)?.next == CalendarDate(year: 2026, month: 1, day: 1))
        #expect(CalendarDate(year: 1970, month: 1, day: 1)?.daysSince1970 == 0)
        #expect(CalendarDate(daysSince1970: -1) == CalendarDate(year: 1969, month: 12, day: 31))
        let from = try #require(CalendarDate("2025-01-01")), to = try #require(CalendarDate("2025-04-02"))
        #expect(to.daysSince1970 - from.daysSince1970 == 91)
        #expect(CalendarDate(daysSince1970: to.daysSince1970) == to)
        #expect(try ProtocolCodec.wire.decode(CalendarDate.self, from: "\"0999-03-04\"").description == "0999-03-04")
    }

    @Test func aBatteryDateOutsideTheYears2000To2999IsAFieldError() throws {
        let beacon = NewBeacon(
            uuid: "3b8f1c0e-9d2a-4c61-b7f4-2e5a9d0c8e11", major: 1, minor: 2, batteryReplacedOn: CalendarDate("1999-12-31"), gateId: "g1")
        #expect(
            throws: RegistryError.invalidInput([
                FieldError(field: "batteryReplacedOn", reason: "must be a day in the years 2000-2999, got 1999-12-31")
            ])
        ) {
            try beacon.validated()
        }
        var recent = beacon
        recent.batteryReplacedOn = CalendarDate("2025-09-18")
        #expect(throws: Never.self) { try recent.validated() }
    }

    @Test func registryErrorsMapToProblemStatuses() {
        #expect(RegistryError.invalidInput([FieldError(field: "name", reason: "must be 1-200 characters")]).problemDetails.status == 400)
        #expect(RegistryError.notFound(.gate, id: "g").problemDetails.status == 404)
        #expect(RegistryError.duplicateBeaconIdentity(BeaconIdentity(uuid: "U", major: 1, minor: 2)).problemDetails.status == 409)
        #expect(RegistryError.enrollmentCodeUsed.problemDetails.status == 409)
        #expect(RegistryError.storage("down").problemDetails.status == 503)
        #expect(RegistryError.notFound(.enrollmentCode, id: "e").description == "enrollment code \"e\" not found")
    }
}
