import FleetSimulatorCore
import Foundation
import PresenceKit
import Testing

/// The in-process server judges event times like the gateway, and phones stamp with the server's clock.
@Suite("Phone clocks")
struct PhoneClockTests {
    static let now: Int64 = 1_767_600_000_123

    static func payload(timestamp: Int64) throws -> [UInt8] {
        var agent = PresenceAgent(
            machine: try PresenceStateMachine(
                config: PresenceConfig(),
                directory: SiteDirectory(sites: [
                    Site(
                        id: "S", center: GeoPoint(latitude: 0, longitude: 0),
                        beacons: [BeaconMatcher("f7826da6-4fa2-4e98-8024-bc5b71e0893e")])
                ]),
                identity: DeviceIdentity(userId: "u", deviceId: "d"), seed: 7, clockOffsetMs: timestamp - now))
        let at = Timestamp(millisecondsSinceEpoch: now)
        _ = agent.handle(.geofenceEntered(siteId: "S"), at: at)
        _ = agent.handle(.motionActivity(.walking), at: at)
        for second in Int64(1)...30 {
            for effect in agent.handle(
                .beaconReading(
                    BeaconReading(beacon: BeaconIdentity("f7826da6-4fa2-4e98-8024-bc5b71e0893e", major: 1, minor: 1), rssi: -55)),
                at: at + second * 1_000)
            {
                if case .postCheckIn(let event) = effect { return PresenceCoding.encode(event) }
            }
        }
        Issue.record("no check-in")
        return []
    }

    @Test("an event more than 5 minutes ahead of the server or a week behind it is refused; every answer is dated")
    func window() throws {
        let server = InProcessServer()
        let cases: [(Int64, Int)] = [(-8 * 86_400_000, 400), (-6 * 86_400_000, 201), (4 * 60_000, 201), (6 * 60_000, 400)]
        for (offset, status) in cases {
            let answer = server.receive(try Self.payload(timestamp: Self.now + offset), at: Self.now)
            #expect(answer.status == status, "event time \(offset) ms from the server's")
            let date = try #require(answer.date.flatMap { Timestamp(httpDate: $0) })
            #expect(date.millisecondsSinceEpoch == Self.now / 1000 * 1000)
        }
        #expect(server.count == 2)
    }
}
