import PresenceKit

/// Who a simulated person is, as far as attendance goes.
package enum PersonKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Arrives, maybe goes out for lunch and back, leaves: two or four gate passes a day.
    case employee
    /// Walks along the pavement past the gates a few times a day and never goes in.
    case walkPast = "walk_past"
    /// An employee who stands still right at the gate for minutes before going in.
    case gateStander = "gate_stander"
    /// Walks in and out like an employee but carries no enrolled device (nothing may be recorded).
    case visitor
    /// Runs past the gates on the pavement (2.5-4 m/s) and never goes in.
    case runner
    /// Cycles past the gates (4-7 m/s) and never goes in.
    case cyclist
    /// Walks along the pavement, stops just outside a door for a while (a phone call, waiting for
    /// someone), walks on, and never goes in.
    case pavementStopper = "pavement_stopper"
    /// An employee who also steps out into the doorway for a break (and comes back in): in the
    /// building all day as far as attendance goes.
    case doorwayLoiterer = "doorway_loiterer"

    /// People who never go in: every check-in of theirs is false.
    package var passesBy: Bool { self == .walkPast || self == .runner || self == .cyclist || self == .pavementStopper }
}

/// A piece of a person's day: standing at `from` (`from == to`) or moving from `from` to `to`.
package struct Segment: Sendable, Hashable {
    package var start: Int64
    package var end: Int64
    package var from: Point
    package var to: Point
    /// Which way the person faces while standing (the direction of their last move; zero: unknown).
    package var facing = Point(x: 0, y: 0)
    /// Extra loss of this spot, dB (a desk behind a pillar or a metal cabinet).
    package var extraLossDb = 0.0
    /// What the motion coprocessor reports while moving.
    package var activity = MotionActivity.walking

    package var isWalk: Bool { from != to }
}

/// Where a person is, which way they move or face, and whether they move, at a virtual time.
package struct Whereabouts: Sendable, Hashable {
    package var position: Point
    /// Unit vector of the walking direction; zero when standing.
    package var heading: Point
    package var walking: Bool
    /// Which way the body faces: the heading while moving, the last heading while standing.
    package var facing: Point
    package var extraLossDb: Double
    package var activity: MotionActivity

    package init(
        position: Point, heading: Point, walking: Bool, facing: Point? = nil, extraLossDb: Double = 0, activity: MotionActivity? = nil
    ) {
        self.position = position
        self.heading = heading
        self.walking = walking
        self.facing = facing ?? heading
        self.extraLossDb = extraLossDb
        self.activity = activity ?? (walking ? .walking : .stationary)
    }
}

/// A person's whole run as back-to-back segments (virtual epoch milliseconds).
package struct Itinerary: Sendable {
    package private(set) var segments: [Segment]

    package init(segments: [Segment]) { self.segments = segments }

    package func segmentIndex(at t: Int64, hint: Int = 0) -> Int {
        var i = min(max(hint, 0), max(segments.count - 1, 0))
        while i > 0 && segments[i].start > t { i -= 1 }
        while i + 1 < segments.count && segments[i].end <= t { i += 1 }
        return i
    }

    package func whereabouts(at t: Int64, hint: Int = 0) -> Whereabouts {
        guard !segments.isEmpty else { return Whereabouts(position: Point(x: 0, y: -1_000), heading: Point(x: 0, y: 0), walking: false) }
        let s = segments[segmentIndex(at: t, hint: hint)]
        guard s.isWalk, s.end > s.start else {
            return Whereabouts(position: s.to, heading: Point(x: 0, y: 0), walking: false, facing: s.facing, extraLossDb: s.extraLossDb)
        }
        let f = min(max(Double(t - s.start) / Double(s.end - s.start), 0), 1)
        let length = s.from.distance(to: s.to)
        let heading = Point(x: (s.to.x - s.from.x) / length, y: (s.to.y - s.from.y) / length)
        let moving = t < s.end
        return Whereabouts(
            position: s.from.interpolated(to: s.to, fraction: f), heading: heading, walking: moving, facing: heading,
            extraLossDb: s.extraLossDb, activity: moving ? s.activity : .stationary)
    }

    /// The next segment boundary after `t` (nil past the last one).
    package func nextBoundary(after t: Int64, hint: Int = 0) -> Int64? {
        let i = segmentIndex(at: t, hint: hint)
        return segments[i].end > t ? segments[i].end : nil
    }
}

/// Builds an itinerary forward in time.
package struct ItineraryBuilder {
    package private(set) var segments: [Segment] = []
    package private(set) var now: Int64
    package private(set) var position: Point
    /// Direction of the last move: where the person faces while standing.
    package private(set) var facing = Point(x: 0, y: 0)

    package init(start: Int64, at position: Point) {
        now = start
        self.position = position
    }

    /// Stands where the person is until `t`; `extraLossDb` is the spot's own loss (a shadowed desk).
    package mutating func stay(until t: Int64, extraLossDb: Double = 0) {
        guard t > now else { return }
        var segment = Segment(start: now, end: t, from: position, to: position)
        segment.facing = facing
        segment.extraLossDb = extraLossDb
        segments.append(segment)
        now = t
    }

    package mutating func stay(forMs ms: Int64, extraLossDb: Double = 0) { stay(until: now + ms, extraLossDb: extraLossDb) }

    /// Moves to `target` at `speed` m/s (walking unless `activity` says running or cycling); returns
    /// the arrival time.
    @discardableResult
    package mutating func walk(to target: Point, speed: Double, activity: MotionActivity = .walking) -> Int64 {
        let ms = Int64((position.distance(to: target) / max(speed, 0.1) * 1000).rounded())
        if ms > 0 {
            var segment = Segment(start: now, end: now + ms, from: position, to: target)
            segment.activity = activity
            segments.append(segment)
            let length = position.distance(to: target)
            facing = Point(x: (target.x - position.x) / length, y: (target.y - position.y) / length)
        }
        now += ms
        position = target
        return now
    }

    /// How long walking to `target` from the current position takes.
    package func walkDuration(to target: Point, from: Point? = nil, speed: Double) -> Int64 {
        Int64(((from ?? position).distance(to: target) / max(speed, 0.1) * 1000).rounded())
    }

    package func build(until end: Int64) -> Itinerary {
        var copy = self
        copy.stay(until: end)
        if copy.segments.isEmpty { copy.segments.append(Segment(start: now, end: end, from: position, to: position)) }
        return Itinerary(segments: copy.segments)
    }
}

/// A true gate pass at `siteId`: going in, the person reached the check-in point 0.8 m in front of the
/// door (arrival; a gate stander then waits outside); going out, the person passed the doorway (departure).
package struct TruthEvent: Sendable, Hashable, Codable {
    package enum Kind: String, Sendable, Hashable, Codable { case arrival, departure }
    package var person: Int
    package var siteId: String
    package var kind: Kind
    package var at: Int64
    package var gate: Int
}

/// One simulated person: kind, home site, itinerary and the true gate passes.
package struct Person: Sendable {
    package var index: Int
    package var kind: PersonKind
    package var siteIndex: Int
    package var itinerary: Itinerary
    package var truth: [TruthEvent]
    /// Walking speed, m/s.
    package var speed: Double

    package var hasDevice: Bool { kind != .visitor }
}

/// The daily routines of the QA matrix, randomised per person.
package struct ScheduleSettings: Sendable, Hashable, Codable {
    /// Mean arrival and leave times of day, ms after midnight of the virtual day.
    package var arrivalMs: Int64 = 8 * 3_600_000
    package var leaveMs: Int64 = 17 * 3_600_000 + 30 * 60_000
    package var arrivalSpreadMs: Double = 25 * 60_000
    package var leaveSpreadMs: Double = 30 * 60_000
    /// Share of people going out for lunch on a day.
    package var lunchOutProbability: Double = 0.5
    /// Seconds paused in the doorway (a door to open, a badge to show) on the way in.
    package var doorPauseSeconds: ClosedRange<Double> = 2...5
    package var walkSpeed: ClosedRange<Double> = 1.0...1.6
    /// Seconds a gate stander stands at the gate.
    package var standSeconds: ClosedRange<Double> = 60...300
    /// Walk-pasts pass at this distance from the gates (the pavement across the forecourt).
    package var pavementDistance: ClosedRange<Double> = 8...12
    /// How deep in the building desks are (metres behind the front wall); a receptionist sits at 1-2 m.
    package var deskDepth: ClosedRange<Double> = 35...70
    /// How far to either side of the door desks are, at most (metres).
    package var deskSideways: Double = 30
    /// Share of desks in a radio shadow (behind a pillar, a metal cabinet, a lift shaft), and its loss.
    package var shadowedDeskShare = 0.0
    package var shadowedDeskLossDb: ClosedRange<Double> = 8...20
    /// Speeds of people passing by on foot, running and cycling, m/s.
    package var passerSpeed: ClosedRange<Double> = 1.0...1.6
    package var runnerSpeed: ClosedRange<Double> = 2.5...4
    package var cyclistSpeed: ClosedRange<Double> = 4...7
    /// Pavement stoppers stop this far in front of a door (metres), for this long (seconds).
    package var stopDistance: ClosedRange<Double> = 1...4
    package var stopSeconds: ClosedRange<Double> = 20...300
    /// Doorway loiterers step out into the doorway this many times a day, for this long (seconds).
    package var doorwayBreaks: ClosedRange<Int> = 1...3
    package var doorwayBreakSeconds: ClosedRange<Double> = 120...600

    package init() {}
}

/// How the people's time is laid out in a run.
package enum ScheduleKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Whole working days from a midnight: arrivals around 08:00, lunch, leaving around 17:30
    /// (`ScheduleSettings`). For detection-only runs, where virtual time runs as fast as the machine.
    case workingDays = "days"
    /// A morning rush compressed into the run itself (`RushSettings`): every person with a reason to
    /// come arrives within the run, so a run against the stack can be real time (the phones' clocks
    /// and the servers' are the same) and still be short.
    case morningRush = "rush"
}

/// The world of a morning rush: people already on their way when the run starts, an open-plan
/// office right behind the doors, short stands at the gate and short network troubles.
package struct RushSettings: Sendable, Hashable, Codable {
    /// Nobody reaches a door before this much of the run has passed (the phones see the approach).
    package var leadMs: Int64 = 15_000
    /// The run goes on this long after the last arrival: time for a check-in confirmed at the desk
    /// and for its delivery.
    package var tailMs: Int64 = 50_000
    /// Desks this deep behind the front wall (metres).
    package var deskDepth: ClosedRange<Double> = 5...25
    /// Seconds a gate stander stands at the gate.
    package var standSeconds: ClosedRange<Double> = 15...45

    package init() {}

    /// The shortest run a rush fits in.
    package var minimumDurationMs: Int64 { leadMs + tailMs + 10_000 }

    /// When arrivals happen, relative to the run's start.
    package func arrivalWindow(durationMs: Int64) -> ClosedRange<Int64> {
        leadMs...max(leadMs, durationMs - tailMs)
    }
}

package enum ScheduleGenerator {
    package static let dayMs: Int64 = 86_400_000
    /// Far enough from a site's centre to be outside its geofence plus the exit margin.
    static let awayDistance = 320.0

    /// A person's itinerary and truth from `start` for `durationMs`. `start` should be a midnight.
    package static func person(
        index: Int, kind: PersonKind, siteIndex: Int, site: SiteLayout, start: Int64, durationMs: Int64,
        settings: ScheduleSettings, random: inout SimulationRandom
    ) -> Person {
        let speed = random.uniform(settings.walkSpeed)
        let end = start + durationMs
        let homeX = random.uniform(-150...150)
        let home = Point(x: homeX, y: -awayDistance - random.uniform(50...500))
        var b = ItineraryBuilder(start: start, at: home)
        var truth: [TruthEvent] = []
        let days = Int((durationMs + dayMs - 1) / dayMs)
        for day in 0..<days {
            let midnight = start + Int64(day) * dayMs
            switch kind {
            case .walkPast, .runner, .cyclist, .pavementStopper:
                let passes = random.int(2...4)
                var times = (0..<passes).map { _ in midnight + Int64(random.uniform(7 * 3_600_000...19 * 3_600_000)) }
                times.sort()
                let (pace, activity) = passing(kind, settings: settings, random: &random)
                for t in times where t > b.now && t < end {
                    let y = -random.uniform(kind == .pavementStopper ? settings.stopDistance : settings.pavementDistance)
                    let leftToRight = random.chance(0.5)
                    let from = Point(x: leftToRight ? -awayDistance : awayDistance, y: y)
                    let to = Point(x: leftToRight ? awayDistance : -awayDistance, y: y)
                    b.walk(to: from, speed: 20) // teleport-ish far outside the geofence
                    b.stay(until: t)
                    if kind == .pavementStopper {
                        let door = site.gates[random.int(0...(site.gates.count - 1))].position
                        b.walk(to: Point(x: door.x + random.uniform(-1.5...1.5), y: y), speed: pace)
                        b.stay(forMs: Int64(random.uniform(settings.stopSeconds) * 1000))
                    }
                    b.walk(to: to, speed: pace, activity: activity)
                    b.walk(to: Point(x: to.x, y: -awayDistance - 300), speed: 20)
                }
            case .employee, .gateStander, .visitor, .doorwayLoiterer:
                let gate = random.int(0...(site.gates.count - 1))
                let door = site.gates[gate].position
                let deskY = random.uniform(settings.deskDepth)
                let desk = Point(x: door.x + random.uniform(-1...1) * min(settings.deskSideways, deskY), y: deskY)
                let deskLoss = random.chance(settings.shadowedDeskShare) ? random.uniform(settings.shadowedDeskLossDb) : 0
                let arrival = midnight + settings.arrivalMs + Int64(random.gaussian() * settings.arrivalSpreadMs)
                let leave = midnight + settings.leaveMs + Int64(random.gaussian() * settings.leaveSpreadMs)
                guard arrival > b.now + 600_000, arrival < end - 600_000 else { continue }
                // In.
                goIn(
                    &b, &truth, person: index, site: site, gate: gate, door: door, desk: desk, at: arrival,
                    stand: kind == .gateStander ? random.uniform(settings.standSeconds) : 0, speed: speed, settings: settings,
                    random: &random)
                if kind == .doorwayLoiterer {
                    let breaks = random.int(settings.doorwayBreaks)
                    var times = (0..<breaks).map { _ in midnight + Int64(random.uniform(9.5 * 3_600_000...16.5 * 3_600_000)) }
                    times.sort()
                    for t in times where t > b.now + 60_000 && t < leave - 20 * 60_000 && t < end - 600_000 {
                        b.stay(until: t, extraLossDb: deskLoss)
                        b.walk(to: Point(x: door.x + random.uniform(-1.5...1.5), y: -random.uniform(0.3...2)), speed: speed)
                        b.stay(forMs: Int64(random.uniform(settings.doorwayBreakSeconds) * 1000))
                        b.walk(to: desk, speed: speed)
                    }
                }
                if random.chance(settings.lunchOutProbability) {
                    let out = midnight + 12 * 3_600_000 + Int64(random.gaussian() * 20 * 60_000)
                    let back = out + Int64(random.uniform(35 * 60_000...70 * 60_000))
                    if out > b.now + 60_000 && back < leave - 30 * 60_000 && back < end - 600_000 {
                        b.stay(until: out - b.walkDuration(to: Point(x: door.x, y: 0), speed: speed), extraLossDb: deskLoss)
                        goOut(&b, &truth, person: index, site: site, gate: gate, door: door, at: out, speed: speed, random: &random)
                        goIn(
                            &b, &truth, person: index, site: site, gate: gate, door: door, desk: desk, at: back,
                            stand: 0, speed: speed, settings: settings, random: &random)
                    }
                }
                guard leave < end - 600_000 else { continue }
                b.stay(until: leave - b.walkDuration(to: Point(x: door.x, y: 0), speed: speed), extraLossDb: deskLoss)
                goOut(&b, &truth, person: index, site: site, gate: gate, door: door, at: leave, speed: speed, random: &random)
                b.walk(to: home, speed: 20)
            }
        }
        return Person(index: index, kind: kind, siteIndex: siteIndex, itinerary: b.build(until: end), truth: truth, speed: speed)
    }

    /// A person of a morning rush starting at `start` (any moment, not a midnight): employees, gate
    /// standers and visitors reach their door once within `rush.arrivalWindow`, walking the last part
    /// of their way in the run (they start where they are on their approach at `start`); walk-pasts
    /// pass the doors once within the same window. Nobody leaves.
    package static func rushPerson(
        index: Int, kind: PersonKind, siteIndex: Int, site: SiteLayout, start: Int64, durationMs: Int64,
        settings: ScheduleSettings, rush: RushSettings, random: inout SimulationRandom
    ) -> Person {
        let speed = random.uniform(settings.walkSpeed)
        let end = start + durationMs
        let window = rush.arrivalWindow(durationMs: durationMs)
        let at = start + Int64(random.uniform(Double(window.lowerBound)...Double(window.upperBound)))
        var truth: [TruthEvent] = []
        switch kind {
        case .walkPast, .runner, .cyclist, .pavementStopper:
            let (pace, activity) = passing(kind, settings: settings, random: &random)
            let y = -random.uniform(kind == .pavementStopper ? settings.stopDistance : settings.pavementDistance)
            let leftToRight = random.chance(0.5)
            let door = site.gates[random.int(0...(site.gates.count - 1))].position
            // Where on the pavement the person is at `start`, so that they pass the door at `at`.
            let travelled = min(pace * Double(at - start) / 1000, awayDistance)
            let from = Point(x: door.x + (leftToRight ? -travelled : travelled), y: y)
            var b = ItineraryBuilder(start: start, at: from)
            if kind == .pavementStopper {
                b.walk(to: Point(x: door.x, y: y), speed: pace)
                b.stay(forMs: Int64(random.uniform(rush.standSeconds) * 1000))
            }
            b.walk(to: Point(x: leftToRight ? awayDistance : -awayDistance, y: y), speed: pace, activity: activity)
            return Person(index: index, kind: kind, siteIndex: siteIndex, itinerary: b.build(until: end), truth: truth, speed: speed)
        case .employee, .gateStander, .visitor, .doorwayLoiterer:
            let gate = random.int(0...(site.gates.count - 1))
            let door = site.gates[gate].position
            let desk = Point(x: door.x + random.uniform(-8...8), y: random.uniform(rush.deskDepth))
            let approachStart = Point(x: door.x + random.uniform(-60...60), y: -awayDistance)
            let inFront = Point(x: door.x + random.uniform(-0.6...0.6), y: -0.8)
            // Start on the straight approach, as far from the door as the time until `at` allows.
            let full = approachStart.distance(to: inFront)
            let travelled = min(speed * Double(at - start) / 1000, full)
            var b = ItineraryBuilder(start: start, at: inFront.interpolated(to: approachStart, fraction: travelled / max(full, 0.001)))
            b.stay(until: at - b.walkDuration(to: inFront, speed: speed))
            b.walk(to: inFront, speed: speed)
            truth.append(TruthEvent(person: index, siteId: site.id, kind: .arrival, at: b.now, gate: gate))
            if kind == .gateStander {
                b.walk(to: Point(x: door.x + random.uniform(-1.5...1.5), y: -random.uniform(0.8...2)), speed: 0.5)
                b.stay(forMs: Int64(random.uniform(rush.standSeconds) * 1000))
            }
            b.walk(to: Point(x: door.x, y: 0), speed: speed)
            b.stay(forMs: Int64(random.uniform(settings.doorPauseSeconds) * 1000))
            b.walk(to: desk, speed: speed)
            return Person(index: index, kind: kind, siteIndex: siteIndex, itinerary: b.build(until: end), truth: truth, speed: speed)
        }
    }

    /// The pace and the motion activity of someone passing by.
    static func passing(_ kind: PersonKind, settings: ScheduleSettings, random: inout SimulationRandom) -> (Double, MotionActivity) {
        switch kind {
        case .runner: (random.uniform(settings.runnerSpeed), .running)
        case .cyclist: (random.uniform(settings.cyclistSpeed), .cycling)
        default: (random.uniform(settings.passerSpeed), .walking)
        }
    }

    /// From away to the doorway (reached at `at`), a pause there, then to the desk.
    static func goIn(
        _ b: inout ItineraryBuilder, _ truth: inout [TruthEvent], person: Int, site: SiteLayout, gate: Int, door: Point, desk: Point,
        at: Int64, stand: Double, speed: Double, settings: ScheduleSettings, random: inout SimulationRandom
    ) {
        let approachStart = Point(x: door.x + random.uniform(-60...60), y: -awayDistance)
        let inFront = Point(x: door.x + random.uniform(-0.6...0.6), y: -0.8)
        b.walk(to: approachStart, speed: 20)
        b.stay(until: at - b.walkDuration(to: inFront, from: approachStart, speed: speed))
        b.walk(to: inFront, speed: speed)
        truth.append(TruthEvent(person: person, siteId: site.id, kind: .arrival, at: b.now, gate: gate))
        if stand > 0 {
            b.walk(to: Point(x: door.x + random.uniform(-1.5...1.5), y: -random.uniform(0.8...2)), speed: 0.5)
            b.stay(forMs: Int64(stand * 1000))
        }
        b.walk(to: Point(x: door.x, y: 0), speed: speed)
        b.stay(forMs: Int64(random.uniform(settings.doorPauseSeconds) * 1000))
        b.walk(to: desk, speed: speed)
    }

    /// From the desk out of the doorway (passed at about `at`) and away beyond the geofence.
    static func goOut(
        _ b: inout ItineraryBuilder, _ truth: inout [TruthEvent], person: Int, site: SiteLayout, gate: Int, door: Point,
        at: Int64, speed: Double, random: inout SimulationRandom
    ) {
        let doorway = Point(x: door.x, y: 0)
        b.stay(until: at - b.walkDuration(to: doorway, speed: speed))
        b.walk(to: doorway, speed: speed)
        truth.append(TruthEvent(person: person, siteId: site.id, kind: .departure, at: b.now, gate: gate))
        b.stay(forMs: 1_500)
        b.walk(to: Point(x: door.x + random.uniform(-60...60), y: -awayDistance - 10), speed: speed)
    }
}
