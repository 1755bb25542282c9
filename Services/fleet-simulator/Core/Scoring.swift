import AttendanceProtocol
import Foundation

/// Percentiles of a sample (nearest rank on the sorted values).
package struct Percentiles: Sendable, Hashable, Codable {
    package var count: Int
    package var p50: Double?
    package var p90: Double?
    package var p99: Double?
    package var max: Double?

    package init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        func q(_ p: Double) -> Double? {
            guard !sorted.isEmpty else { return nil }
            let rank = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.min(Swift.max(rank, 0), sorted.count - 1)]
        }
        p50 = q(0.5)
        p90 = q(0.9)
        p99 = q(0.99)
        max = sorted.last
    }
}

/// Where a person truly was when their device decided a check-in (the simulated world's truth, not the
/// phone's evidence): still or moving, in front of the building's front wall (y < 0) or in a doorway or inside, and how far from the
/// nearest door. Gate standers wait within 2.5 m of a door, outside; pavement stoppers stop 1-4 m in
/// front of one.
package enum DecisionPlace: String, Sendable, Hashable, Codable, CaseIterable {
    case stillAtDoor, stillNearDoor, movingAtDoor, movingNearDoor, fartherOutside, doorwayOrInside

    package init(_ w: Whereabouts, doors: [Point]) {
        let distance = doors.map { $0.distance(to: w.position) }.min() ?? .infinity
        let atDoor = distance <= 2.5
        if w.position.y >= 0 {
            self = .doorwayOrInside
        } else if distance > 5 {
            self = .fartherOutside
        } else if w.walking {
            self = atDoor ? .movingAtDoor : .movingNearDoor
        } else {
            self = atDoor ? .stillAtDoor : .stillNearDoor
        }
    }

    /// In words, for the reports.
    package var words: String {
        switch self {
        case .doorwayOrInside: return "in a doorway or inside"
        case .fartherOutside: return "outside, over 5 m from a door"
        case .stillAtDoor, .stillNearDoor, .movingAtDoor, .movingNearDoor:
            let still = self == .stillAtDoor || self == .stillNearDoor
            let near = self == .stillAtDoor || self == .movingAtDoor
            return "\(still ? "still" : "moving"), outside, \(near ? "within 2.5 m of" : "2.5-5 m from") a door"
        }
    }
}

/// Detection quality against the ground truth, and delivery figures, for a set of devices.
package struct Score: Sendable, Hashable, Codable {
    package var arrivals = 0
    package var departures = 0
    package var checkIns = 0
    package var checkOuts = 0
    package var heartbeats = 0
    package var matchedArrivals = 0
    package var falseCheckIns = 0
    /// Check-ins beyond the first for one arrival (a second session opened for the same visit).
    package var repeatedCheckIns = 0
    package var matchedDepartures = 0
    /// Matched departures whose check-out time is within `timeToleranceMs` of the true one.
    package var accurateCheckOuts = 0
    /// Check-outs while the person was really inside (no departure near them) that end a session
    /// opened by a matched check-in: a real session cut short.
    package var falseCheckOuts = 0
    /// Check-outs that close a session whose check-in was itself false (a walk-past counted as an
    /// arrival, closed when the person leaves the geofence). Not counted again as false check-outs: the
    /// error is the check-in, already in `falseCheckIns`.
    package var checkOutsOfFalseSessions = 0
    /// Matched check-ins whose time (as the server recorded it) is within `timeToleranceMs` of the
    /// true arrival.
    package var accurateCheckInTimes = 0
    /// Matched check-ins naming the gate the person really came through.
    package var rightGateCheckIns = 0
    /// False check-ins by who made them (`walk_past`, `runner`, `pavement_stopper`, `employee`, ...).
    package var falseCheckInsByKind: [String: Int] = [:]
    /// Scored check-ins (the first of each matched arrival, and every false one) by where the person was
    /// when the device decided (`DecisionPlace`), then by who made them: `employee`, or
    /// `pavement_stopper (false)` for a false one. Filled when the scorer is given the doors.
    package var checkInsByPlace: [String: [String: Int]] = [:]
    /// Check-ins the merger's daily attendance leaves out (`Score.briefCheckIns(_:_:)`); of them, the
    /// false ones; matched arrivals all of whose check-ins are left out (arrivals daily attendance would
    /// miss); and repeats of a matched arrival that are left out.
    package var briefCheckIns = 0
    package var briefFalseCheckIns = 0
    package var briefMatchedArrivals = 0
    package var briefRepeatedCheckIns = 0
    package var checkInRecall = 0.0
    package var checkInPrecision = 0.0
    package var checkOutRecall = 0.0
    package var checkOutAccuracy = 0.0
    /// Share of matched check-ins whose time is within `timeToleranceMs` of the true arrival.
    package var checkInTimeAccuracy = 0.0
    /// Share of matched check-ins that name the right gate.
    package var rightGateShare = 0.0
    /// Reaching the check-in point (0.8 m in front of the door, before any stand) to the check-in decision,
    /// virtual seconds, over matched arrivals.
    package var detectionLatencySeconds = Percentiles([])
    /// Every value behind `detectionLatencySeconds`, so that scores can be pooled (not in the JSON).
    package var detectionLatencies: [Double] = []
    /// The event's own time (as the phone stamped it) to its accepting verdict (201/200), seconds: the
    /// quantity the telemetry aggregator's trigger-to-verdict latency measures, for every event.
    package var triggerToVerdictSeconds = Percentiles([])
    /// The check-out's own time minus the true departure, seconds.
    package var checkOutTimeErrorSeconds = Percentiles([])
    /// Decision to the accepting verdict (201/200) of every event, virtual seconds.
    package var decisionToVerdictSeconds = Percentiles([])
    /// The SLO as the server counts it: 99 % of events reach the server within 5 minutes of their own
    /// time (first receipt minus the event's timestamp); an event that never arrived is bad.
    package var sloWithin5Minutes = 0.0
    package var sloEvents = 0
    package var sloGoodEvents = 0
    package var missedArrivalsSample: [String] = []
    /// Up to 20 false check-ins: who, when, and the person's true passes around it.
    package var falseCheckInsSample: [String] = []

    enum CodingKeys: String, CodingKey {
        case arrivals, departures, checkIns, checkOuts, heartbeats, matchedArrivals, falseCheckIns, repeatedCheckIns
        case matchedDepartures, accurateCheckOuts, falseCheckOuts, checkOutsOfFalseSessions, accurateCheckInTimes, rightGateCheckIns
        case falseCheckInsByKind, checkInsByPlace, briefCheckIns, briefFalseCheckIns, briefMatchedArrivals, briefRepeatedCheckIns,
            checkInRecall, checkInPrecision,
            checkOutRecall, checkOutAccuracy, checkInTimeAccuracy,
            rightGateShare
        case detectionLatencySeconds, triggerToVerdictSeconds, checkOutTimeErrorSeconds, decisionToVerdictSeconds
        case sloWithin5Minutes, sloEvents, sloGoodEvents, missedArrivalsSample, falseCheckInsSample
    }

    package static let arrivalWindowBeforeMs: Int64 = 30_000
    /// A gate stander waits up to 300 s before going in, and walks a few seconds to the spot and back.
    package static let arrivalWindowAfterMs: Int64 = 330_000
    package static let departureWindowBeforeMs: Int64 = 60_000
    package static let departureWindowAfterMs: Int64 = 900_000
    /// How far a check-out's or a check-in's recorded time may lie from the true departure or arrival.
    package static let timeToleranceMs: Int64 = 180_000

    package init() {}

    /// Which of a device's check-ins (sorted by decision) daily attendance leaves out, with the sessions
    /// built as the merger builds them: a check-in opens a session unless one is open or its check-out
    /// came within the soft-exit grace before it (by the events' own times), which reopens that one. A
    /// session is left out when its last check-out came less than the minimum presence after its first
    /// check-in (`AttendancePresence`).
    static func briefCheckIns(_ checkIns: [PostedEvent], _ checkOuts: [PostedEvent]) -> [Bool] {
        let graceMs = Int64(AttendancePresence.defaultSoftExitGraceSeconds * 1000)
        let minimumMs = Int64(AttendancePresence.defaultMinimumSeconds * 1000)
        let events = (checkIns.indices.map { (checkIns[$0].decidedAt, 0, $0) } + checkOuts.indices.map { (checkOuts[$0].decidedAt, 1, $0) })
            .sorted { ($0.0, $0.1) < ($1.0, $1.1) }
        var brief = [Bool](repeating: false, count: checkIns.count)
        var members: [Int] = []
        var start: Int64 = 0
        var checkedOutAt: Int64?
        func close() {
            let isBrief = checkedOutAt.map { $0 - start < minimumMs } ?? false
            for m in members { brief[m] = isBrief }
            members = []
        }
        for (_, kind, i) in events {
            if kind == 1 {
                if !members.isEmpty { checkedOutAt = checkOuts[i].timestamp }
                continue
            }
            // Joins the session when it is still open or its check-out is within the grace.
            let joins = !members.isEmpty && (checkedOutAt.map { checkIns[i].timestamp - $0 <= graceMs } ?? true)
            if !joins {
                close()
                start = checkIns[i].timestamp
            }
            members.append(i)
            checkedOutAt = nil
        }
        close()
        return brief
    }

    /// Scores the true passes inside `window`, leaving out a pass within `edgeMs` of either end (the
    /// device could not have seen all of it). With `doors` (each site's door positions, by site index),
    /// also counts where each check-in was decided (`checkInsByPlace`).
    package init(
        people: [Person], devices: [DeviceResult], window: Range<Int64>? = nil, edgeMs: Int64 = 300_000, doors: [[Point]]? = nil
    ) {
        self.init()
        let counted: (TruthEvent) -> Bool = { e in
            guard let window else { return true }
            return e.at >= window.lowerBound + edgeMs && e.at < window.upperBound - edgeMs
        }
        let byPerson = Dictionary(devices.map { ($0.person, $0) }, uniquingKeysWith: { a, _ in a })
        var detection: [Double] = [], verdict: [Double] = [], checkOutError: [Double] = [], slo: [Double] = [],
            decisionToVerdict: [Double] = []
        for person in people where person.hasDevice {
            guard let device = byPerson[person.index] else { continue }
            let verdictAt = Dictionary(
                device.deliveries.filter { $0.status == 201 || $0.status == 200 }.map { ($0.key, $0.verdictAt) },
                uniquingKeysWith: { a, b in min(a, b) })
            let reachedAt = Dictionary(device.deliveries.map { ($0.key, $0.reachedServerAt) }, uniquingKeysWith: { a, b in min(a, b) })
            // Each event's time as the server recorded it (the app may have corrected it before sending):
            // the time an accepted request carried, else the one it was decided with.
            let recorded = Dictionary(
                device.deliveries.compactMap { d in d.status == 201 || d.status == 200 ? d.timestamp.map { (d.key, $0) } : nil },
                uniquingKeysWith: { a, _ in a })
            let posted = device.posted.map { e in
                var e = e
                e.timestamp = recorded[e.key] ?? e.timestamp
                return e
            }
            let checkIns = posted.filter { $0.kind == "checkin" }.sorted { $0.decidedAt < $1.decidedAt }
            let checkOuts = posted.filter { $0.kind == "checkout" }.sorted { $0.decidedAt < $1.decidedAt }
            heartbeats += posted.filter { $0.kind == "heartbeat" }.count
            self.checkIns += checkIns.count
            self.checkOuts += checkOuts.count
            for event in posted {
                if let v = verdictAt[event.key] {
                    decisionToVerdict.append(Double(v - event.decidedAt) / 1000)
                    verdict.append(Double(v - event.timestamp) / 1000)
                }
                // The server's definition: its first receipt minus the event's own time, as the phone stamped it.
                if let r = reachedAt[event.key] { slo.append(Double(max(0, r - event.timestamp)) / 1000) } else { slo.append(.infinity) }
            }
            func notePlace(_ checkIn: PostedEvent, isFalse: Bool) {
                guard let doors, doors.indices.contains(person.siteIndex) else { return }
                let place = DecisionPlace(person.itinerary.whereabouts(at: checkIn.decidedAt), doors: doors[person.siteIndex])
                checkInsByPlace[place.rawValue, default: [:]][person.kind.rawValue + (isFalse ? " (false)" : ""), default: 0] += 1
            }
            let brief = Self.briefCheckIns(checkIns, checkOuts)
            briefCheckIns += brief.filter { $0 }.count
            var usedIn = Set<Int>()
            for arrival in person.truth where arrival.kind == .arrival {
                let matches = checkIns.indices.filter {
                    !usedIn.contains($0) && checkIns[$0].decidedAt >= arrival.at - Self.arrivalWindowBeforeMs
                        && checkIns[$0].decidedAt <= arrival.at + Self.arrivalWindowAfterMs
                }
                guard counted(arrival) else {
                    // At the edge of the window: neither a miss nor a false check-in.
                    for m in matches { usedIn.insert(m) }
                    continue
                }
                arrivals += 1
                guard let first = matches.first else {
                    if missedArrivalsSample.count < 20 {
                        let near = checkIns.filter { abs($0.decidedAt - arrival.at) < 3_600_000 }.map {
                            "\(($0.decidedAt - arrival.at) / 1000)s"
                        }
                        missedArrivalsSample.append(
                            "person \(person.index) (\(person.kind.rawValue)) arrival at \(arrival.at) gate \(arrival.gate); check-ins within 1 h: \(near)"
                        )
                    }
                    continue
                }
                matchedArrivals += 1
                repeatedCheckIns += matches.count - 1
                for m in matches { usedIn.insert(m) }
                let checkIn = checkIns[first]
                if matches.allSatisfy({ brief[$0] }) { briefMatchedArrivals += 1 }
                briefRepeatedCheckIns += matches.dropFirst().filter { brief[$0] }.count
                notePlace(checkIn, isFalse: false)
                detection.append(Double(checkIn.decidedAt - arrival.at) / 1000)
                if checkIn.gate == arrival.gate { rightGateCheckIns += 1 }
                if abs(checkIn.timestamp - arrival.at) <= Self.timeToleranceMs { accurateCheckInTimes += 1 }
            }
            let falseHere = checkIns.count - usedIn.count
            falseCheckIns += falseHere
            if falseHere > 0 { falseCheckInsByKind[person.kind.rawValue, default: 0] += falseHere }
            for i in checkIns.indices where !usedIn.contains(i) {
                notePlace(checkIns[i], isFalse: true)
                if brief[i] { briefFalseCheckIns += 1 }
            }
            for i in checkIns.indices where !usedIn.contains(i) && falseCheckInsSample.count < 20 {
                let c = checkIns[i]
                let near = person.truth.filter { abs($0.at - c.decidedAt) < 3_600_000 }.map {
                    "\($0.kind.rawValue) \(($0.at - c.decidedAt) / 1000)s gate \($0.gate)"
                }
                falseCheckInsSample.append(
                    "person \(person.index) (\(person.kind.rawValue)) check-in at \(c.decidedAt) gate \(c.gate.map(String.init) ?? "?"); true passes within 1 h: \(near)"
                )
            }
            var usedOut = Set<Int>()
            for departure in person.truth where departure.kind == .departure {
                guard
                    let m = checkOuts.indices.first(where: {
                        !usedOut.contains($0) && checkOuts[$0].decidedAt >= departure.at - Self.departureWindowBeforeMs
                            && checkOuts[$0].decidedAt <= departure.at + Self.departureWindowAfterMs
                    })
                else {
                    if counted(departure) { departures += 1 }
                    continue
                }
                usedOut.insert(m)
                guard counted(departure) else { continue }
                departures += 1
                matchedDepartures += 1
                let error = checkOuts[m].timestamp - departure.at
                checkOutError.append(Double(error) / 1000)
                if abs(error) <= Self.timeToleranceMs { accurateCheckOuts += 1 }
            }
            let falseSessions = Set(checkIns.indices.filter { !usedIn.contains($0) }.map { checkIns[$0].sessionKey })
            // Where the person truly was when the phone decided: after an arrival and before its departure
            // is inside, whatever was scored of the session's own check-in (one decided too early or too
            // late for its arrival is false, yet the person is in).
            func trulyInside(at t: Int64) -> Bool {
                person.truth.filter { $0.at <= t }.max { $0.at < $1.at }?.kind == .arrival
            }
            // A check-out no departure matched: false when the person was truly inside; one of a false
            // session's when they were not; else a true session's, decided too late for its departure
            // (already a missed departure, not a check-out of someone inside).
            for i in checkOuts.indices where !usedOut.contains(i) {
                if trulyInside(at: checkOuts[i].decidedAt) {
                    falseCheckOuts += 1
                } else if falseSessions.contains(checkOuts[i].sessionKey) {
                    checkOutsOfFalseSessions += 1
                }
            }
        }
        checkInRecall = arrivals == 0 ? 1 : Double(matchedArrivals) / Double(arrivals)
        checkInPrecision = checkIns == 0 ? 1 : Double(checkIns - falseCheckIns - repeatedCheckIns) / Double(checkIns)
        checkOutRecall = departures == 0 ? 1 : Double(matchedDepartures) / Double(departures)
        checkOutAccuracy = departures == 0 ? 1 : Double(accurateCheckOuts) / Double(departures)
        checkInTimeAccuracy = matchedArrivals == 0 ? 1 : Double(accurateCheckInTimes) / Double(matchedArrivals)
        rightGateShare = matchedArrivals == 0 ? 1 : Double(rightGateCheckIns) / Double(matchedArrivals)
        detectionLatencySeconds = Percentiles(detection)
        detectionLatencies = detection
        triggerToVerdictSeconds = Percentiles(verdict)
        checkOutTimeErrorSeconds = Percentiles(checkOutError)
        decisionToVerdictSeconds = Percentiles(decisionToVerdict)
        sloEvents = slo.count
        sloGoodEvents = slo.filter { $0 <= 300 }.count
        sloWithin5Minutes = slo.isEmpty ? 1 : Double(sloGoodEvents) / Double(slo.count)
    }
}
