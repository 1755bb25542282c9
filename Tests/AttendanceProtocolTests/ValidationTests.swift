import Foundation
import Testing

@testable import AttendanceProtocol

/// Each limit accepts its boundary and refuses the value just past it.
@Suite("Validation limits")
struct ValidationTests {
    let now = ts("2025-09-18T06:35:12Z")
    let limits = ValidationLimits.default

    func fields(_ event: AttendanceEvent) -> [String] {
        event.validate(now: now, limits: limits).map(\.field)
    }

    func with(_ change: (inout AttendanceEvent) -> Void) -> AttendanceEvent {
        var event = Sample.seedEvent
        change(&event)
        return event
    }

    @Test func identifiersRefuseWhitespaceAndControlCharactersInAnyScript() {
        for bad in ["u 1", "u\t1", "u\n", "\u{7F}u", "u\u{00A0}1", "u\u{3000}1", "u\u{2028}", "ü\u{0085}"] {
            #expect(FieldValidator.containsWhitespaceOrControl(bad), "\(bad.unicodeScalars.map(\.value))")
        }
        for good in ["u_1024", "dev-ABC.9:x", "ü-1", "社員-42", "😀"] {
            #expect(!FieldValidator.containsWhitespaceOrControl(good), "\(good)")
        }
        #expect(fields(with { $0.userId = "u\u{3000}1" }) == ["userId"])
        #expect(fields(with { $0.userId = "u_ü" }).isEmpty)
    }

    @Test func theSeedPayloadIsValid() {
        #expect(Sample.seedEvent.validate(now: now, limits: limits) == [])
        #expect(Sample.extendedEvent.validate(now: ts("2025-09-18T06:40:00Z"), limits: limits) == [])
    }

    @Test func rssiRange() {
        #expect(fields(with { $0.rssiSeries = [-127, -70] }) == [])
        #expect(fields(with { $0.rssiSeries = [-128, -70] }) == ["rssiSeries[0]"])
        #expect(fields(with { $0.rssiSeries = [-70, 0, -71] }) == [])
        #expect(fields(with { $0.rssiSeries = [-70, -71, -69, 1] }) == ["rssiSeries[3]"])
    }

    @Test func rssiNeedsOneRealReading() {
        #expect(fields(with { $0.rssiSeries = [0, 0, -90] }) == [])
        #expect(fields(with { $0.rssiSeries = [0, 0, 0] }) == ["rssiSeries"])
        #expect(fields(with { $0.rssiSeries = [] }) == ["rssiSeries"])
        #expect(fields(with { $0.rssiSeries = nil }) == [])
    }

    @Test func rssiSeriesLength() {
        #expect(fields(with { $0.rssiSeries = Array(repeating: -70, count: 600) }) == [])
        #expect(fields(with { $0.rssiSeries = Array(repeating: -70, count: 601) }) == ["rssiSeries"])
    }

    @Test func timestampWindow() {
        let week: TimeInterval = 7 * 24 * 3600
        #expect(fields(with { $0.timestamp = now.addingTimeInterval(-week) }) == [])
        #expect(fields(with { $0.timestamp = now.addingTimeInterval(-week - 0.001) }) == ["timestamp"])
        #expect(fields(with { $0.timestamp = now.addingTimeInterval(300) }) == [])
        #expect(fields(with { $0.timestamp = now.addingTimeInterval(300.001) }) == ["timestamp"])
    }

    /// The first whole second at which an event refused only for being ahead is taken, and nothing for
    /// an event with another fault, one valid now, or one still refused a day on.
    @Test func secondsUntilAnEarlyEventIsTaken() {
        let day: TimeInterval = 86_400
        func wait(_ event: AttendanceEvent) -> Int? { event.secondsUntilAcceptable(now: now, limits: limits, within: day) }
        #expect(wait(with { $0.timestamp = now.addingTimeInterval(600) }) == 300)
        #expect(wait(with { $0.timestamp = now.addingTimeInterval(300.5) }) == 1)
        let early = with { $0.timestamp = now.addingTimeInterval(4_000.2) }
        let seconds = wait(early)
        #expect(seconds == 3_701)
        if let seconds {
            #expect(early.validate(now: now.addingTimeInterval(TimeInterval(seconds)), limits: limits).isEmpty)
            #expect(!early.validate(now: now.addingTimeInterval(TimeInterval(seconds - 1)), limits: limits).isEmpty)
        }
        #expect(wait(with { $0.timestamp = now }) == nil)
        #expect(
            wait(
                with {
                    $0.timestamp = now.addingTimeInterval(600); $0.beacon.minor = 70_000
                }) == nil)
        #expect(wait(with { $0.timestamp = now.addingTimeInterval(day + 301) }) == nil)
        #expect(wait(with { $0.timestamp = now.addingTimeInterval(-8 * day) }) == nil)
    }

    @Test func timestampWindowIsConfigurable() {
        var limits = ValidationLimits()
        limits.maxEventAge = .seconds(72 * 3600)
        limits.maxClockSkewAhead = .seconds(30)
        let old = with { $0.timestamp = now.addingTimeInterval(-72 * 3600 - 1) }
        #expect(old.validate(now: now, limits: limits).map(\.field) == ["timestamp"])
        #expect(old.validate(now: now, limits: .default) == [])
        let ahead = with { $0.timestamp = now.addingTimeInterval(31) }
        #expect(ahead.validate(now: now, limits: limits).first?.reason == "is more than 30 s in the future")
    }

    @Test func beaconUUID() {
        #expect(fields(with { $0.beacon.uuid = "8d4f2a61-3c7b-4e19-a5d0-6b2e9f1c7a34" }) == [])
        #expect(fields(with { $0.beacon.uuid = "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A3" }) == ["beacon.uuid"])
        #expect(fields(with { $0.beacon.uuid = "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A3G" }) == ["beacon.uuid"])
        #expect(fields(with { $0.beacon.uuid = "8D4F2A613C7B4E19A5D06B2E9F1C7A34" }) == ["beacon.uuid"])
    }

    @Test func majorAndMinor() {
        #expect(
            fields(
                with {
                    $0.beacon.major = 0; $0.beacon.minor = 65535
                }) == [])
        #expect(
            fields(
                with {
                    $0.beacon.major = 65535; $0.beacon.minor = 0
                }) == [])
        #expect(fields(with { $0.beacon.major = -1 }) == ["beacon.major"])
        #expect(fields(with { $0.beacon.minor = 65536 }) == ["beacon.minor"])
    }

    @Test func identifierLengths() {
        let max = String(repeating: "u", count: 128)
        #expect(
            fields(
                with {
                    $0.userId = max; $0.deviceId = max; $0.siteId = max; $0.id = max
                }) == [])
        #expect(fields(with { $0.userId = max + "u" }) == ["userId"])
        #expect(fields(with { $0.deviceId = "" }) == ["deviceId"])
        #expect(fields(with { $0.siteId = "S HQ" }) == ["siteId"])
        #expect(fields(with { $0.id = String(repeating: "e", count: 129) }) == ["id"])
        #expect(fields(with { $0.sessionKey = String(repeating: "k", count: 129) }) == ["sessionKey"])
    }

    @Test func idempotencyKeyIs64LowercaseHex() {
        #expect(fields(with { $0.idempotencyKey = String(repeating: "0", count: 64) }) == [])
        #expect(fields(with { $0.idempotencyKey = String(repeating: "a", count: 63) }) == ["idempotencyKey"])
        #expect(fields(with { $0.idempotencyKey = String(repeating: "a", count: 65) }) == ["idempotencyKey"])
        #expect(fields(with { $0.idempotencyKey = Sample.idempotencyKey.uppercased() }) == ["idempotencyKey"])
        #expect(fields(with { $0.idempotencyKey = String(repeating: "g", count: 64) }) == ["idempotencyKey"])
    }

    @Test func txPower() {
        #expect(fields(with { $0.txPower = -127 }) == [])
        #expect(fields(with { $0.txPower = 20 }) == [])
        #expect(fields(with { $0.txPower = -128 }) == ["txPower"])
        #expect(fields(with { $0.txPower = 21 }) == ["txPower"])
    }

    @Test func shortStrings() {
        let max = String(repeating: "1", count: 64)
        #expect(fields(with { $0.app = .init(version: max, build: 0) }) == [])
        #expect(fields(with { $0.app = .init(version: max + "1") }) == ["app.version"])
        #expect(fields(with { $0.app = .init(version: "1.0", build: -1) }) == ["app.build"])
        #expect(fields(with { $0.device = .init(model: "", os: "iOS 18.0") }) == ["device.model"])
    }

    @Test func sensorContext() {
        #expect(fields(with { $0.motion = .init(state: .running, steps2min: 1000) }) == [])
        #expect(fields(with { $0.motion = .init(state: .running, steps2min: 1001) }) == ["motion.steps2min"])
        #expect(fields(with { $0.motion = .init(state: .walking, steps2min: -1) }) == ["motion.steps2min"])
        #expect(fields(with { $0.geofence = .init(inside: true, radius: 0) }) == ["geofence.radius"])
        #expect(fields(with { $0.handshake = .init(ok: true, rt: -1) }) == ["handshake.rt"])
        #expect(fields(with { $0.network = .init(online: true, latencyMs: 0) }) == [])
        #expect(fields(with { $0.network = .init(online: true, latencyMs: -1) }) == ["network.latencyMs"])
    }

    @Test func extensions() {
        #expect(fields(with { $0.location = .init(lat: 90, lon: -180, accuracyM: 0) }) == [])
        #expect(fields(with { $0.location = .init(lat: 90.000001, lon: 180.000001) }) == ["location.lat", "location.lon"])
        #expect(fields(with { $0.tEnd = now.addingTimeInterval(-1) }) == ["tEnd"])
        #expect(fields(with { $0.tEnd = now.addingTimeInterval(8) }) == [])
        #expect(fields(with { $0.firstAttemptAt = now.addingTimeInterval(-1) }) == ["firstAttemptAt"])
        #expect(fields(with { $0.gatt = .init(nonce: "", hmac: String(repeating: "a", count: 257)) }) == ["gatt.nonce", "gatt.hmac"])
    }

    @Test func reportsEveryProblemAtOnce() {
        let event = with { event in
            event.idempotencyKey = "hash"
            event.beacon = BeaconIdentity(uuid: "...", major: 70000, minor: -3)
            event.rssiSeries = [-75, 12, -68]
        }
        #expect(fields(event) == ["idempotencyKey", "beacon.uuid", "beacon.major", "beacon.minor", "rssiSeries[1]"])
    }

    @Test func checkInContract() {
        #expect(Sample.checkIn.validate(now: now, limits: limits) == [])
        var request = Sample.checkIn
        request.ts = now.addingTimeInterval(300.001)
        request.sessionKey = String(repeating: "k", count: 129)
        request.deviceMeta.appVersion = ""
        #expect(request.validate(now: now, limits: limits).map(\.field) == ["ts", "sessionKey", "deviceMeta.appVersion"])
        request = Sample.checkIn
        request.sessionKey = String(repeating: "k", count: 128)
        request.ts = now.addingTimeInterval(-7 * 24 * 3600)
        #expect(request.validate(now: now, limits: limits) == [])
    }

    @Test func checkOutContract() {
        let at = Sample.checkOut.ts
        #expect(Sample.checkOut.validate(now: at, limits: limits) == [])
        var request = Sample.checkOut
        request.sessionKey = ""
        request.ts = at.addingTimeInterval(-7 * 24 * 3600 - 0.001)
        #expect(request.validate(now: at, limits: limits).map(\.field) == ["sessionKey", "ts"])
        request = Sample.checkOut
        request.reason = .unrecognized("walked away")
        #expect(request.validate(now: at, limits: limits).map(\.field) == ["reason"])
    }

    @Test func heartbeatContract() {
        let at = Sample.heartbeat.ts
        #expect(Sample.heartbeat.validate(now: at, limits: limits) == [])
        var request = Sample.heartbeat
        request.ts = at.addingTimeInterval(300.001)
        #expect(request.validate(now: at, limits: limits).map(\.field) == ["ts"])
    }

    @Test func batchPrefixesItemPaths() {
        var bad = Sample.seedEvent
        bad.beacon.minor = 65536
        let batch = BatchEventsRequest(events: [Sample.seedEvent, bad])
        #expect(
            batch.validate(now: now, limits: limits) == [
                FieldError(field: "events[1].beacon.minor", reason: "must be within 0...65535, is 65536")
            ])
        #expect(BatchEventsRequest(events: []).validate(now: now, limits: limits).map(\.field) == ["events"])
        let full = BatchEventsRequest(events: Array(repeating: Sample.seedEvent, count: 100))
        #expect(full.validate(now: now, limits: limits) == [])
        let over = BatchEventsRequest(events: Array(repeating: Sample.seedEvent, count: 101))
        #expect(over.validate(now: now, limits: limits).map(\.field) == ["events"])
    }

    @Test func telemetryUpload() {
        let event = TelemetryEvent(eventId: "d_7f3a-1", name: .battery, at: now, value: 0.5)
        #expect(
            TelemetryUploadRequest(appVersion: "1.12.0", deviceModel: "iPhone14,5", events: [event]).validate(now: now, limits: limits)
                == [])
        var late = event
        late.at = now.addingTimeInterval(301)
        let request = TelemetryUploadRequest(appVersion: "1.12.0", deviceModel: "iPhone14,5", events: [event, late])
        #expect(request.validate(now: now, limits: limits).map(\.field) == ["events[1].at"])
    }

    @Test("a telemetry value beyond ±10⁹ is refused with its field named, so the aggregator's sums cannot overflow")
    func telemetryValueRange() {
        func fields(_ values: [Double]) -> [String] {
            let events = values.enumerated().map {
                TelemetryEvent(
                    eventId: "d_7f3a-\($0.offset)", name: TelemetryEventName(rawValue: "queue_depth"), at: now, value: $0.element)
            }
            return TelemetryUploadRequest(appVersion: "1.12.0", deviceModel: "iPhone14,5", events: events)
                .validate(now: now, limits: limits).map(\.field)
        }
        #expect(fields([0, 1e9, -1e9, 0.25]) == [])
        #expect(fields([1e300, 1e9 + 1, -2e9, .nan, .infinity, 12]) == (0..<5).map { "events[\($0)].value" })
    }

    @Test("a known telemetry event's value is in its unit: a battery level 0...1, a time or a backlog never negative")
    func telemetryValueUnits() {
        func problems(_ name: TelemetryEventName, _ value: Double) -> [FieldError] {
            TelemetryUploadRequest(
                appVersion: "1.12.0", deviceModel: "iPhone14,5",
                events: [TelemetryEvent(eventId: "d_7f3a-1", name: name, at: now, value: value)]
            ).validate(now: now, limits: limits)
        }
        #expect(problems(.battery, 0.87).isEmpty && problems(.battery, 0).isEmpty && problems(.battery, 1).isEmpty)
        #expect(
            problems(.battery, 87) == [FieldError(field: "events[0].value", reason: "must be a battery level between 0 and 1 for battery")])
        #expect(problems(.rangingStop, 1_200).isEmpty && problems(.outboxSent, 0).isEmpty)
        #expect(problems(.rangingStop, -1).map(\.field) == ["events[0].value"])
        #expect(problems(.offlineEnqueue, -3).map(\.reason) == ["must be an outbox backlog, 0 or more for offline_enqueue"])
        #expect(problems(.regionEnter, -5).isEmpty)
    }
}
