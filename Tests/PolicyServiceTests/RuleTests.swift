import AttendanceProtocol
import Foundation
import Testing

@testable import PolicyServiceCore

@Suite("Beacon validity")
struct BeaconValidityTests {
    let rule = BeaconValidityRule()

    @Test func activeBeaconAtItsSitePasses() {
        #expect(rule.run(event()) == .passed)
        // The UUID is matched whatever its case.
        #expect(rule.run(event { $0.uuid = World.companyUUID.lowercased() }) == .passed)
    }

    @Test func unknownBeaconFires() throws {
        let firing = try #require(rule.run(event { $0.minor = 999 }).firing)
        #expect(firing.reason.contains("not registered"))
        #expect(firing.action == .walkToGate)
        #expect(rule.run(event { $0.uuid = World.strangerUUID }).didFire)
    }

    @Test func retiredAndLostBeaconsFire() throws {
        let retired = try #require(rule.run(event { $0.minor = 5 }).firing)
        #expect(retired.reason.contains("retired"))
        #expect(retired.action == .contactAdmin)
        let lost = try #require(rule.run(event { $0.minor = 6 }).firing)
        #expect(lost.reason.contains("lost"))
    }

    /// A check-in queued offline, uploaded after an admin retired its beacon or moved it to another
    /// site: the registry changed the beacon after the event was made, so that is a note, never a
    /// refusal. Made after the change, it fires.
    @Test func aChangeAfterTheEventIsANoteNotARefusal() throws {
        let uuid = UUID(uuidString: World.companyUUID)!
        for (changedAt, refuses) in [(World.t0.addingTimeInterval(3_600), false), (World.t0.addingTimeInterval(-3_600), true)] {
            var registry = World.registry
            registry.upsertBeacon(id: "B_5", uuid: uuid, major: 10, minor: 5, status: .retired, gateId: "G_MAIN", changedAt: changedAt)
            registry.upsertBeacon(id: "B_BR", uuid: uuid, major: 20, minor: 1, status: .active, gateId: "G_BR", changedAt: changedAt)
            let context = PolicyContext(registry: registry, history: PolicyHistory(), now: World.t0.addingTimeInterval(7_200))
            for e in [
                event { $0.minor = 5 },
                event {
                    $0.major = 20; $0.minor = 1
                },
            ] {
                let firing = try #require(rule.evaluate(e, context: context).firing)
                #expect(firing.refuses == refuses, "changed at \(changedAt): \(firing)")
            }
        }
    }

    @Test func bannedPrefixFiresEvenWhenRegistered() throws {
        var registry = World.registry
        registry.upsertBeacon(uuid: UUID(uuidString: World.bannedUUID)!, major: 1, minor: 1, status: .active, gateId: "G_MAIN")
        let e = event {
            $0.uuid = World.bannedUUID.lowercased(); $0.major = 1; $0.minor = 1
        }
        let outcome = rule.evaluate(e, context: PolicyContext(registry: registry, history: PolicyHistory(), now: World.t0))
        let firing = try #require(outcome.firing)
        #expect(firing.reason.contains("E2C56DB5"))
        #expect(firing.risk >= 0.9)
    }

    @Test func wrongSiteFires() throws {
        // The branch's beacon, claimed for HQ.
        let firing = try #require(
            rule.run(
                event {
                    $0.major = 20; $0.minor = 1
                }
            ).firing)
        #expect(firing.reason == "beacon \(World.companyUUID):20:1 belongs to site S_BR, not S_HQ")
        // The gateway's site disagreeing with the payload's is caught too.
        #expect(rule.run(event { $0.gatewaySite = World.branch }).didFire)
    }

    @Test func malformedUUIDFires() {
        #expect(rule.run(event { $0.uuid = "not-a-uuid" }).didFire)
    }

    @Test func checkOutsPassWhateverBeaconTheyNameAndHeartbeatsNoLostUnknownOrForeignOne() {
        // The gate's beacon was replaced during the shift: the old one is retired, or unknown.
        #expect(
            rule.run(
                event {
                    $0.type = .checkout; $0.minor = 5
                }) == .passed)
        #expect(
            rule.run(
                event {
                    $0.type = .checkout; $0.uuid = World.strangerUUID
                }) == .passed)
        // Heartbeats keep a session open: a lost, unknown or another site's beacon is still refused.
        #expect(
            rule.run(
                event {
                    $0.type = .heartbeat; $0.minor = 6
                }
            ).didFire)
        #expect(
            rule.run(
                event {
                    $0.type = .heartbeat; $0.minor = 999
                }
            ).didFire)
        #expect(
            rule.run(
                event {
                    $0.type = .heartbeat; $0.major = 20; $0.minor = 1
                }
            ).didFire)
        // A check-in at the retired beacon is still refused.
        #expect(rule.run(event { $0.minor = 5 }).didFire)
    }

    @Test("a heartbeat naming a beacon retired since the stay's check-in passes; one retired before it fires")
    func heartbeatsPassABeaconRetiredDuringTheStayOnly() {
        let uuid = UUID(uuidString: World.companyUUID)!
        let retiredAt = World.t0.addingTimeInterval(3_600)
        var registry = World.registry
        registry.upsertBeacon(id: "B_5", uuid: uuid, major: 10, minor: 5, status: .retired, gateId: "G_MAIN", changedAt: retiredAt)
        let heartbeat = event {
            $0.type = .heartbeat; $0.minor = 5; $0.time = World.t0 + 7_200
        }
        func outcome(checkInAt seconds: TimeInterval?) -> RuleOutcome {
            let history = PolicyHistory()
            if let seconds { history.record(PunchRecord(event: punch("k_in", at: seconds), registry: registry)) }
            return rule.evaluate(heartbeat, context: PolicyContext(registry: registry, history: history, now: World.t0 + 7_300))
        }
        // The gate's beacon was replaced during the shift.
        #expect(outcome(checkInAt: 0) == .passed)
        // An old unit retired before the stay began, or no stay the policy knows of.
        #expect(outcome(checkInAt: 5_400).firing?.refuses == true)
        #expect(outcome(checkInAt: nil).firing?.refuses == true)
    }

    @Test func beaconlessCheckInPassesUnlessSensorDataIsRequired() {
        #expect(rule.run(contractCheckIn()) == .passed)
        #expect(rule.run(contractCheckIn()) { $0.requireSensorData = true }.didFire)
        #expect(rule.run(heartbeat(at: World.t0)) { $0.requireSensorData = true } == .passed)
    }
}

@Suite("Device binding")
struct DeviceBindingTests {
    let rule = DeviceBindingRule()

    @Test func boundDevicePasses() {
        #expect(rule.run(event()) == .passed)
        #expect(rule.run(contractCheckIn()) == .passed)
    }

    @Test func unboundDeviceFires() throws {
        let firing = try #require(rule.run(event { $0.device = "d_unknown" }).firing)
        #expect(firing.reason == "device d_unknown is not enrolled")
        #expect(firing.action == .contactAdmin)
    }

    @Test func revokedDeviceFires() throws {
        let firing = try #require(rule.run(event { $0.device = World.revokedDevice }).firing)
        #expect(firing.reason.contains("revoked"))
    }

    @Test func anotherUsersDeviceFires() throws {
        let firing = try #require(rule.run(event { $0.device = World.otherUsersDevice }).firing)
        #expect(firing.reason.contains("bound to another user"))
    }

    @Test func payloadForAnotherUserOrDeviceFires() throws {
        #expect(rule.run(event { $0.payloadUser = World.otherUser }).firing?.risk == 1)
        #expect(rule.run(event { $0.payloadDevice = World.secondDevice }).didFire)
        #expect(rule.run(contractCheckIn(user: World.otherUser, device: World.otherUsersDevice)) == .passed)
    }
}

/// Tenancy: every combination of user, site and beacon.
@Suite("Site assignment")
struct SiteAssignmentTests {
    let rule = SiteAssignmentRule()

    @Test func aSiteTheUserIsAssignedToPasses() {
        #expect(rule.run(event()) == .passed)
        #expect(
            rule.run(
                event {
                    $0.site = World.branch; $0.major = 20; $0.minor = 1
                }) == .passed)
        #expect(rule.run(contractCheckIn()) == .passed)
        #expect(rule.run(heartbeat(at: World.t0)) == .passed)
        // A check-out naming no site belongs to a session the check-in opened.
        #expect(
            rule.run(contractCheckOut(user: World.otherUser, device: World.otherUsersDevice, at: World.t0, reason: .geofenceExit))
                == .passed)
    }

    @Test func anUnassignedSiteOfTheSameOrganizationFires() throws {
        let firing = try #require(
            rule.run(
                event {
                    $0.user = World.otherUser; $0.device = World.otherUsersDevice; $0.site = World.branch; $0.major = 20; $0.minor = 1
                }
            ).firing)
        #expect(firing.reason == "user \(World.otherUser) is not assigned to site \(World.branch)")
        #expect(firing.action == .contactAdmin && firing.risk == 0.9)
        #expect(rule.run(contractCheckIn(user: World.otherUser, device: World.otherUsersDevice, site: World.branch)).didFire)
    }

    @Test func anotherOrganizationsSiteAndBeaconFire() throws {
        let firing = try #require(
            rule.run(
                event {
                    $0.site = World.otherOrgSite; $0.major = 30; $0.minor = 1
                }
            ).firing)
        #expect(firing.reason.contains("not assigned to site \(World.otherOrgSite)"))
    }

    @Test func aBeaconOfOneSiteWithAnothersSiteIdFires() throws {
        // The user's own site named, another organization's beacon heard: the beacon's site counts too.
        let firing = try #require(
            rule.run(
                event {
                    $0.site = World.hq; $0.major = 30; $0.minor = 1
                }
            ).firing)
        #expect(firing.reason.contains("not assigned to site \(World.otherOrgSite)"))
        // An assigned site's beacon under another assigned site's id is beacon_validity's to refuse, not this rule's.
        #expect(
            rule.run(
                event {
                    $0.site = World.hq; $0.major = 20; $0.minor = 1
                }) == .passed)
        #expect(
            BeaconValidityRule().run(
                event {
                    $0.site = World.hq; $0.major = 20; $0.minor = 1
                }
            ).didFire)
    }

    @Test func aUserTheRegistryHasNotPublishedFires() throws {
        let firing = try #require(
            rule.run(
                event {
                    $0.user = "u_new"; $0.payloadUser = "u_new"
                }
            ).firing)
        #expect(firing.reason == "user u_new is not known to the registry" && firing.risk == 0.7)
    }

    @Test func assignmentChangesTakeEffectAtTheNextDecision() {
        var registry = World.registry
        let atBranch = event {
            $0.user = World.otherUser; $0.device = World.otherUsersDevice; $0.site = World.branch; $0.major = 20; $0.minor = 1
        }
        func outcome() -> RuleOutcome {
            rule.evaluate(atBranch, context: PolicyContext(registry: registry, history: PolicyHistory(), now: World.t0))
        }
        #expect(outcome().didFire)
        registry.upsertUser(id: World.otherUser, siteIds: [World.hq, World.branch])
        #expect(outcome() == .passed)
        registry.upsertUser(id: World.otherUser, siteIds: [World.hq])
        #expect(outcome().didFire)
        registry.removeUser(id: World.otherUser)
        #expect(outcome().firing?.reason.contains("not known") == true)
    }

    /// A user moved from the branch to head office: what their phone made at the branch before the move
    /// (offline through it, or delivered late) is noted, not refused; a check-in there after the move is
    /// refused; a check-out there after the move ends the branch session, so it passes.
    @Test func eventsMadeBeforeAMoveAndCheckOutsAfterItAreNotRefused() throws {
        var registry = World.registry
        let movedAt = World.t0.addingTimeInterval(3_600)
        registry.upsertUser(id: World.otherUser, siteIds: [World.hq], sitesChangedAt: movedAt)
        func atBranch(_ type: AttendanceEventType, _ seconds: TimeInterval) -> RuleOutcome {
            let e = event {
                $0.user = World.otherUser; $0.device = World.otherUsersDevice; $0.site = World.branch; $0.major = 20; $0.minor = 1
                $0.type = type; $0.time = World.t0 + seconds
            }
            return rule.evaluate(e, context: PolicyContext(registry: registry, history: PolicyHistory(), now: World.t0 + 7_200))
        }
        let before = try #require(atBranch(.checkin, 0).firing)
        #expect(!before.refuses && before.reason.contains("changed after this event was made"), "\(before)")
        #expect(atBranch(.checkin, 3_700).firing?.refuses == true)
        #expect(atBranch(.checkout, 3_700) == .passed)
        #expect(atBranch(.heartbeat, 3_700).firing?.refuses == true)
    }
}

@Suite("Multi-device")
struct MultiDeviceTests {
    let rule = MultiDeviceRule()

    @Test func oneDevicePasses() {
        let history = PolicyHistory()
        decideAndRecord(event(), policy: .default, history: history)
        #expect(rule.run(event { $0.time = World.t0 + 300 }, history: history) == .passed)
    }

    @Test func secondDeviceWithinTheWindowFires() throws {
        let history = PolicyHistory()
        decideAndRecord(event(), policy: .default, history: history)
        let e = event {
            $0.device = World.secondDevice; $0.time = World.t0 + 300
        }
        let firing = try #require(rule.run(e, history: history).firing)
        #expect(firing.reason == "punched from 2 devices within 15 min, this site allows 1")
        #expect(rule.run(e, history: history) { $0.maxDevicesPerUser = 2 } == .passed)
        #expect(
            rule.run(
                event {
                    $0.device = World.secondDevice; $0.time = World.t0 + 3_600
                }, history: history) == .passed)
    }

    @Test("a late punch is judged against the punches around its own time, not only each device's latest")
    func aLatePunchSeesAnEarlierPunchOfAnotherDevice() throws {
        let history = PolicyHistory()
        history.record(PunchRecord(event: punch("k_0800"), registry: World.registry))
        history.record(PunchRecord(event: punch("k_0830", at: 1_800), registry: World.registry))
        // Queued offline on a second phone, dated 5 minutes after the first punch, read after both.
        let late = punch("k_late", at: 300) { $0.device = World.secondDevice }
        #expect(rule.run(late, history: history).didFire)
        #expect(history.devicesSeen(userId: World.user, around: World.t0 + 300, within: 900) == [World.device])
        history.prune(before: World.t0 + 900)
        #expect(history.devicesSeen(userId: World.user, around: World.t0 + 300, within: 900) == [])
        #expect(history.devicesSeen(userId: World.user, around: World.t0 + 1_800, within: 0) == [World.device])
    }
}

@Suite("Dwell")
struct DwellTests {
    let rule = DwellRule()

    @Test func enoughReadingsPass() {
        #expect(rule.run(event { $0.rssi = [0, -70, -72] }) == .passed)
    }

    @Test func tooFewReadingsFire() throws {
        let firing = try #require(rule.run(event { $0.rssi = [0, 0, -70, 0] }).firing)
        #expect(firing.reason == "beacon heard in 1 reading, 2 required")
        #expect(firing.action == .walkToGate)
    }

    @Test func shortWindowFiresWhenASecondsMinimumIsSet() {
        let e = event { $0.tEnd = World.t0 + 1 }
        #expect(rule.run(e) == .passed)
        #expect(rule.run(e) { $0.minDwellSeconds = 3 }.didFire)
        #expect(rule.run(event { $0.tEnd = World.t0 + 5 }) { $0.minDwellSeconds = 3 } == .passed)
    }

    @Test func checkOutsAndMissingSeriesPass() {
        #expect(
            rule.run(
                event {
                    $0.type = .checkout; $0.rssi = []
                }) == .passed)
        #expect(rule.run(event { $0.rssi = nil }) == .passed)
        #expect(rule.run(event { $0.rssi = nil }) { $0.requireSensorData = true }.didFire)
    }
}

@Suite("Co-location")
struct CoLocationTests {
    let rule = CoLocationRule()

    @Test func insideAndHeardPasses() {
        #expect(rule.run(event()) == .passed)
        #expect(rule.run(event { $0.location = nil }) == .passed)
    }

    @Test func deviceFlagOutsideFires() throws {
        let firing = try #require(rule.run(event { $0.geofence = .init(inside: false) }).firing)
        #expect(firing.reason.contains("outside the site geofence"))
        #expect(firing.action == .walkToGate)
    }

    @Test func positionFarFromTheSiteFires() throws {
        // About 1.1 km north of HQ's centre, with the device claiming to be inside.
        let e = event { $0.location = .init(lat: 10.7869, lon: 106.7009, accuracyM: 10) }
        let firing = try #require(rule.run(e).firing)
        #expect(firing.reason.hasPrefix("position is 11"))
        #expect(firing.reason.hasSuffix("from site S_HQ, geofence radius 200 m"))
        // Just outside the radius but within the tolerance passes.
        #expect(rule.run(event { $0.location = .init(lat: 10.7789, lon: 106.7009) }) == .passed)
        // An inaccurate fix is not evidence.
        #expect(rule.run(event { $0.location = .init(lat: 10.7869, lon: 106.7009, accuracyM: 2_000) }) == .passed)
    }

    @Test func aFixIsJudgedWithItsStatedAccuracy() throws {
        // About 400 m north of HQ's centre (radius 200 m, tolerance 50 m).
        let coarse = event { $0.location = .init(lat: 10.7805, lon: 106.7009, accuracyM: 300) }
        #expect(rule.run(coarse) == .passed)
        let fine = event { $0.location = .init(lat: 10.7805, lon: 106.7009, accuracyM: 100) }
        let firing = try #require(rule.run(fine).firing)
        #expect(firing.reason == "position is 400 m (accuracy 100 m) from site S_HQ, geofence radius 200 m")
    }

    @Test func beaconNotHeardFiresWithEnableBluetooth() throws {
        let firing = try #require(rule.run(event { $0.rssi = [0, 0, 0] }).firing)
        #expect(firing.action == .enableBluetooth)
    }

    @Test func checkOutsPassAndMissingDataFiresOnlyWhenRequired() {
        #expect(
            rule.run(
                event {
                    $0.type = .checkout; $0.geofence = .init(inside: false)
                }) == .passed)
        let bare = event {
            $0.geofence = nil; $0.location = nil
        }
        #expect(rule.run(bare) == .passed)
        #expect(rule.run(bare) { $0.requireSensorData = true }.didFire)
    }

    /// A reason prints a distance or a duration whatever its size: `Int(_:)` of a value beyond Int's
    /// range traps, and a geofence radius of -1e300 made the distance of a check-in 1e300 m.
    @Test func reasonsPrintAnyDistanceOrDurationWithoutTrapping() {
        #expect(Wording.meters(1e300) == "1000000000000000 km")
        #expect(Wording.meters(-1e300) == "-1000000000000000 m")
        #expect(Wording.meters(.nan) == "0 m")
        #expect(Wording.meters(.infinity) == "0 km")
        #expect(Wording.seconds(-.infinity) == "0 s")
        #expect(Wording.duration(1e300) == "1000000000000000 h")
        #expect(Wording.meters(12_345) == "12 km" && Wording.meters(420.4) == "420 m")
    }

    @Test func haversineMatchesAKnownDistance() {
        // Ho Chi Minh City to Hanoi: about 1,140 km.
        let d = GeoDistance.haversineMeters(lat1: 10.7769, lon1: 106.7009, lat2: 21.0285, lon2: 105.8542)
        #expect(abs(d - 1_141_000) < 5_000)
        #expect(GeoDistance.haversineMeters(lat1: 1, lon1: 2, lat2: 1, lon2: 2) == 0)
    }
}

@Suite("Motion gating")
struct MotionGatingTests {
    let rule = MotionGatingRule()

    @Test func walkingOrEnoughStepsPass() {
        #expect(rule.run(event()) == .passed)
        #expect(rule.run(event { $0.motion = .init(state: .stationary, steps2min: 30) }) == .passed)
        #expect(rule.run(event { $0.motion = .init(state: .running) }) == .passed)
    }

    @Test func stillFires() throws {
        let firing = try #require(rule.run(event { $0.motion = .init(state: .stationary, steps2min: 12) }).firing)
        #expect(firing.reason == "stationary, 12 steps in 2 min, 30 required")
        #expect(rule.run(event { $0.motion = .init(state: .automotive) }).didFire)
    }

    @Test func thresholdIsPerSite() {
        let e = event { $0.motion = .init(state: .stationary, steps2min: 12) }
        #expect(rule.run(e) { $0.minSteps2min = 10 } == .passed)
    }

    @Test func checkOutsAndMissingDataPass() {
        #expect(
            rule.run(
                event {
                    $0.type = .checkout; $0.motion = .init(state: .automotive)
                }) == .passed)
        #expect(rule.run(event { $0.motion = nil }) == .passed)
        #expect(rule.run(event { $0.motion = nil }) { $0.requireSensorData = true }.didFire)
    }
}

@Suite("App attestation")
struct AppAttestationTests {
    let rule = AppAttestationRule()

    @Test func currentAppOnAnHonestDevicePasses() {
        #expect(rule.run(event()) { $0.minAppVersion = "1.12.0" } == .passed)
        #expect(
            rule.run(
                event {
                    $0.appVersion = "1.13.0-beta.1"; $0.bodyAppVersion = "1.13.0-beta.1"
                }
            ) { $0.minAppVersion = "1.12" } == .passed)
    }

    @Test func oldAppFiresWithUpdateApp() throws {
        // 1.9.9 < 1.12.0 although "1.9.9" > "1.12.0" as text.
        let e = event {
            $0.appVersion = "1.9.9"; $0.bodyAppVersion = "1.9.9"
        }
        let firing = try #require(rule.run(e) { $0.minAppVersion = "1.12.0" }.firing)
        #expect(firing.reason == "app 1.9.9 is older than the minimum 1.12.0")
        #expect(firing.action == .updateApp)
        // The header alone being old is enough.
        #expect(rule.run(event { $0.appVersion = "1.11.9" }) { $0.minAppVersion = "1.12.0" }.didFire)
        #expect(rule.run(contractCheckIn(appVersion: "1.0")) { $0.minAppVersion = "1.12.0" }.didFire)
        #expect(rule.run(event { $0.appVersion = "banana" }) { $0.minAppVersion = "1.12.0" }.didFire)
    }

    @Test func jailbreakAndSimulatedLocationFire() throws {
        let jailbroken = try #require(rule.run(event { $0.attestation = .init(jailbroken: true) }).firing)
        #expect(jailbroken.action == .contactAdmin)
        #expect(rule.run(event { $0.attestation = .init(simulatedLocation: true) }).didFire)
        #expect(rule.run(event { $0.attestation = .init(mockProvider: true) }).didFire)
        #expect(rule.run(event { $0.attestation = .init(jailbroken: true) }) { $0.refuseJailbroken = false } == .passed)
    }

    @Test func severalFindingsMakeOneFiringWithTheMostRelevantAction() throws {
        let e = event {
            $0.appVersion = "1.0.0"; $0.attestation = .init(jailbroken: true)
        }
        let firing = try #require(rule.run(e) { $0.minAppVersion = "1.12.0" }.firing)
        #expect(firing.reason == "app 1.0.0 is older than the minimum 1.12.0; device reports a jailbreak")
        #expect(firing.action == .contactAdmin)
        #expect(abs(firing.risk - (1 - 0.9 * 0.4)) < 1e-9)
    }

    @Test func modelListsApply() {
        #expect(rule.run(event()) { $0.deniedModelPrefixes = ["iPhone14,"] }.didFire)
        #expect(rule.run(event()) { $0.allowedModelPrefixes = ["iPhone15,", "iPhone16,"] }.didFire)
        #expect(rule.run(event()) { $0.allowedModelPrefixes = ["iPhone"] } == .passed)
    }
}

@Suite("RSSI plausibility")
struct RssiPlausibilityTests {
    let rule = RssiPlausibilityRule()

    @Test func naturalSeriesPasses() {
        #expect(rule.run(event()) == .passed)
        // Too short to judge flatness.
        #expect(rule.run(event { $0.rssi = [-70, -70, -70] }) == .passed)
        // Zeros are "not heard", not readings.
        #expect(rule.run(event { $0.rssi = [-70, 0, -70, 0, -70] }) == .passed)
    }

    @Test func flatSeriesFires() throws {
        let firing = try #require(rule.run(event { $0.rssi = [-70, -70, -70, -70] }).firing)
        #expect(firing.reason.hasPrefix("flat RSSI series: 4 readings"))
        #expect(firing.action == .contactAdmin)
        #expect(firing.risk == 0.7)
        // Std-dev 0.37 dB (one reading 1 dB off among six) is still flat.
        #expect(rule.run(event { $0.rssi = [-70, -70, -70, -70, -70, -71] }).didFire)
        // 0.5 dB exactly is not.
        #expect(rule.run(event { $0.rssi = [-70, -71, -70, -71] }) == .passed)
    }

    @Test func aFlatSeriesIsRecordedButNeverRefusesAPunch() {
        // A phone at rest on a desk, ranging in whole dBm: five readings within 1 dB.
        let resting = event { $0.rssi = [-70, -70, -71, -70, -70] }
        let decision = PolicyEngine.standard.decide(resting, context: World.context(), policy: only(.rssiPlausibility))
        #expect(decision.outcome == .accept)
        #expect(decision.result(.rssiPlausibility)?.fired == true)
        #expect(abs(decision.riskScore - 0.7) < 1e-9)
        // An impossible value still refuses.
        let impossible = event { $0.rssi = [-70, 5, -72, -68] }
        #expect(PolicyEngine.standard.decide(impossible, context: World.context(), policy: only(.rssiPlausibility)).outcome == .reject)
    }

    @Test func impossibleValuesFire() throws {
        #expect(rule.run(event { $0.rssi = [-70, 5, -72, -68] }).firing?.reason == "RSSI 5 dBm is outside -127...0")
        #expect(rule.run(event { $0.rssi = [-128] }).didFire)
    }
}

@Suite("Impossible travel")
struct ImpossibleTravelTests {
    let rule = ImpossibleTravelRule()

    @Test func sameSiteOrSlowEnoughPasses() {
        let history = PolicyHistory()
        decideAndRecord(event(), policy: .default, history: history)
        #expect(
            rule.run(
                event {
                    $0.time = World.t0 + 120; $0.minor = 4
                }, history: history) == .passed)
        // 1,140 km in 5 hours is 228 km/h: a plane.
        #expect(
            rule.run(
                event {
                    $0.site = World.branch; $0.major = 20; $0.minor = 1; $0.time = World.t0 + 5 * 3_600
                }, history: history) == .passed)
    }

    @Test func teleportFires() throws {
        let history = PolicyHistory()
        decideAndRecord(event(), policy: .default, history: history)
        let e = event {
            $0.site = World.branch; $0.major = 20; $0.minor = 1; $0.time = World.t0 + 600
        }
        let firing = try #require(rule.run(e, history: history).firing)
        #expect(firing.reason.contains("from site S_HQ in 10 min"))
        #expect(firing.action == .contactAdmin)
    }
}

@Suite("Clock skew")
struct ClockSkewTests {
    let rule = ClockSkewRule()

    @Test func closeToReceiptPasses() {
        #expect(rule.run(event()) == .passed)
        // Late, but queued offline: fine.
        #expect(
            rule.run(
                event {
                    $0.receivedAt = World.t0 + 72 * 3_600; $0.queuedOffline = true
                }) == .passed)
    }

    @Test func farFromReceiptFires() {
        #expect(
            rule.run(event { $0.receivedAt = World.t0 + 3_600 }).firing?.reason
                == "event time is 60 min before its receipt, and it was not queued offline")
        #expect(rule.run(event { $0.receivedAt = World.t0 - 900 }).firing?.reason == "event time is 15 min ahead of its receipt")
    }
}
