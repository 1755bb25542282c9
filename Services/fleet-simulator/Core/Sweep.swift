import AttendanceProtocol
import Foundation
import PresenceKit

/// One world of a sweep: what was drawn, and how to build its plan.
package struct SweepWorld: Sendable, Encodable {
    package var index: Int
    package var worldClass: WorldClass
    package var seed: UInt64
    /// The site's radio: path loss, shadowing, fading, body, wall, packet loss.
    package var radio: RadioParameters
    package var gates: Int
    package var gateSpacingMeters: Double
    package var advertisingIntervalsMs: [Int]
    package var beaconTxErrorsDb: [Double]

    /// World `index` of a sweep seeded `seed`: its class is the index's turn in `WorldClass.allCases`.
    package init(index: Int, seed: UInt64, ranges: SweepRanges) {
        self.index = index
        worldClass = WorldClass.allCases[index % WorldClass.allCases.count]
        self.seed = seed &+ UInt64(index) &* 0x9E37_79B9
        var random = SimulationRandom(seed: self.seed, stream: 0x5EE9)
        var radio = RadioParameters()
        var exponent = ranges.pathLossExponent
        switch worldClass {
        case .openSpace: exponent = Self.narrow(exponent, to: 1.6...2.2)
        case .office: exponent = Self.narrow(exponent, to: 2.2...2.8)
        case .denseBuilding: exponent = Self.narrow(exponent, to: 2.8...3.5)
        case .tightGates, .busyPavement: break
        }
        radio.pathLossExponent = random.uniform(exponent)
        radio.shadowingSigmaDb = random.uniform(ranges.shadowingSigmaDb)
        radio.shadowingDecorrelationMeters = random.uniform(ranges.shadowingDecorrelationMeters)
        if random.chance(ranges.rayleighShare) {
            radio.fading = .rayleigh
        } else {
            radio.fading = .rician(kFactorDb: random.uniform(ranges.ricianKFactorDb))
        }
        radio.bodyAttenuationDb = random.uniform(ranges.bodyAttenuationDb)
        radio.packetLoss = random.uniform(ranges.packetLoss)
        radio.wallAttenuationDb = random.uniform(ranges.wallAttenuationDb)
        self.radio = radio
        if worldClass == .tightGates {
            gates = random.int(ranges.tightGates)
            gateSpacingMeters = random.uniform(ranges.tightGateSpacingMeters)
        } else {
            gates = random.int(ranges.gates)
            gateSpacingMeters = random.uniform(ranges.gateSpacingMeters)
        }
        advertisingIntervalsMs = (0..<gates).map { _ in random.int(ranges.advertisingIntervalMs) }
        beaconTxErrorsDb = (0..<gates).map { _ in random.uniform(-ranges.beaconTxErrorDb...ranges.beaconTxErrorDb) }
        // Drawn last, and only from a range wider than one value, so that every other draw is the same
        // with or without it.
        let shared = ranges.beaconShadowCorrelation
        self.radio.beaconShadowCorrelation = shared.lowerBound < shared.upperBound ? random.uniform(shared) : shared.lowerBound
    }

    /// A class's narrowing of a range: the part inside `narrowing`, or the range itself when the two do not
    /// overlap (a ranges file asking for what the class would exclude: the file wins).
    static func narrow(_ range: ClosedRange<Double>, to narrowing: ClosedRange<Double>) -> ClosedRange<Double> {
        range.overlaps(narrowing) ? range.clamped(to: narrowing) : range
    }

    /// One site with this world's gates and radio, and `people` people of a working day.
    package func plan(people: Int, ranges: SweepRanges) -> FleetPlan {
        var o = FleetOptions()
        o.devices = people
        o.sites = 1
        o.gatesPerSite = gates
        o.gateSpacingMeters = gateSpacingMeters
        o.durationMs = ScheduleGenerator.dayMs
        o.seed = seed
        o.radio = radio
        o.phones = .quiet
        o.phones.phoneLossDb = ranges.phoneLossDb
        o.schedule.deskDepth = ranges.deskDepth
        o.schedule.shadowedDeskShare = ranges.shadowedDeskShare
        o.schedule.pavementDistance =
            worldClass == .busyPavement
            ? Self.narrow(ranges.pavementDistance, to: 0...4) : ranges.pavementDistance
        o.schedule.passerSpeed = ranges.passerSpeed
        o.schedule.walkSpeed = ranges.walkSpeed
        o.visitorShare = 0
        let passing = worldClass == .busyPavement ? 0.5 : 0.2
        o.walkPastShare = passing * 0.5
        o.runnerShare = passing * 0.15
        o.cyclistShare = passing * 0.15
        o.pavementStopperShare = passing * 0.2
        o.gateStanderShare = 0.08
        o.doorwayLoitererShare = 0.08
        var world = World.standard(
            sites: 1, gatesPerSite: gates, gateSpacingMeters: gateSpacingMeters, radio: radio)
        for b in world.sites[0].beacons.indices {
            world.sites[0].beacons[b].advertisingIntervalMs = advertisingIntervalsMs[b]
            world.sites[0].beacons[b].txErrorDb = beaconTxErrorsDb[b]
        }
        return FleetPlan(options: o, world: World(sites: world.sites, radio: radio))
    }
}

/// Detection figures of a set of worlds, pooled: counts add up, latencies are one sample.
package struct SweepFigures: Sendable, Encodable {
    package var worlds = 0
    package var arrivals = 0
    package var matchedArrivals = 0
    package var checkIns = 0
    package var falseCheckIns = 0
    package var repeatedCheckIns = 0
    package var falseCheckInsByKind: [String: Int] = [:]
    /// Check-ins by where they were decided, then by who made them (`Score.checkInsByPlace`).
    package var checkInsByPlace: [String: [String: Int]] = [:]
    /// Check-ins daily attendance leaves out (`Score.briefCheckIns`): all, false, arrivals all of whose
    /// check-ins are, repeats of an arrival.
    package var briefCheckIns = 0
    package var briefFalseCheckIns = 0
    package var briefMatchedArrivals = 0
    package var briefRepeatedCheckIns = 0
    package var falseCheckOuts = 0
    package var departures = 0
    package var accurateCheckOuts = 0
    package var rightGateCheckIns = 0
    package var detectionLatencySeconds = Percentiles([])
    /// A few missed arrivals and false check-ins, to look into.
    package var missedSample: [String] = []
    package var falseSample: [String] = []
    var latencies: [Double] = []

    package init() {}

    package var recall: Double { arrivals == 0 ? 1 : Double(matchedArrivals) / Double(arrivals) }
    package var precision: Double { checkIns == 0 ? 1 : Double(checkIns - falseCheckIns - repeatedCheckIns) / Double(checkIns) }
    package var checkOutAccuracy: Double { departures == 0 ? 1 : Double(accurateCheckOuts) / Double(departures) }
    package var rightGateShare: Double { matchedArrivals == 0 ? 1 : Double(rightGateCheckIns) / Double(matchedArrivals) }
    /// Precision and recall of daily attendance: the check-ins left once sessions shorter than the
    /// minimum presence are dropped.
    package var attendancePrecision: Double {
        let kept = checkIns - briefCheckIns
        let wrong = (falseCheckIns - briefFalseCheckIns) + (repeatedCheckIns - briefRepeatedCheckIns)
        return kept == 0 ? 1 : Double(kept - wrong) / Double(kept)
    }
    package var attendanceRecall: Double { arrivals == 0 ? 1 : Double(matchedArrivals - briefMatchedArrivals) / Double(arrivals) }

    /// The counts that add up when worlds are pooled: each with its JSON key, where it is kept, and where
    /// a world's `Score` has it.
    typealias Count = (
        key: CodingKeys, figure: any WritableKeyPath<SweepFigures, Int> & Sendable, score: any KeyPath<Score, Int> & Sendable
    )
    static let counts: [Count] = [
        (.arrivals, \.arrivals, \.arrivals), (.matchedArrivals, \.matchedArrivals, \.matchedArrivals),
        (.checkIns, \.checkIns, \.checkIns), (.falseCheckIns, \.falseCheckIns, \.falseCheckIns),
        (.repeatedCheckIns, \.repeatedCheckIns, \.repeatedCheckIns), (.falseCheckOuts, \.falseCheckOuts, \.falseCheckOuts),
        (.departures, \.departures, \.departures), (.accurateCheckOuts, \.accurateCheckOuts, \.accurateCheckOuts),
        (.rightGateCheckIns, \.rightGateCheckIns, \.rightGateCheckIns), (.briefCheckIns, \.briefCheckIns, \.briefCheckIns),
        (.briefFalseCheckIns, \.briefFalseCheckIns, \.briefFalseCheckIns),
        (.briefMatchedArrivals, \.briefMatchedArrivals, \.briefMatchedArrivals),
        (.briefRepeatedCheckIns, \.briefRepeatedCheckIns, \.briefRepeatedCheckIns),
    ]

    /// One world's figures.
    init(_ s: Score) {
        worlds = 1
        for count in Self.counts { self[keyPath: count.figure] = s[keyPath: count.score] }
        falseCheckInsByKind = s.falseCheckInsByKind
        checkInsByPlace = s.checkInsByPlace
        missedSample = Array(s.missedArrivalsSample.prefix(5))
        falseSample = Array(s.falseCheckInsSample.prefix(5))
        latencies = s.detectionLatencies
        detectionLatencySeconds = s.detectionLatencySeconds
    }

    /// Adds another set of worlds to these.
    mutating func merge(_ other: SweepFigures) {
        worlds += other.worlds
        for count in Self.counts { self[keyPath: count.figure] += other[keyPath: count.figure] }
        for (k, v) in other.falseCheckInsByKind { falseCheckInsByKind[k, default: 0] += v }
        for (place, byWho) in other.checkInsByPlace {
            for (who, n) in byWho { checkInsByPlace[place, default: [:]][who, default: 0] += n }
        }
        missedSample = Array((missedSample + other.missedSample).prefix(20))
        falseSample = Array((falseSample + other.falseSample).prefix(20))
        latencies += other.latencies
        detectionLatencySeconds = Percentiles(latencies)
    }

    /// `byWho` of `checkInsByPlace` in a line: true check-ins, then false ones, each with who made them.
    static func describe(_ byWho: [String: Int]) -> String {
        func part(_ isFalse: Bool) -> String {
            let mine = byWho.filter { $0.key.hasSuffix(" (false)") == isFalse }
            let who = mine.sorted { $0.key < $1.key }.map { "\($0.key.replacingOccurrences(of: " (false)", with: "")) \($0.value)" }
            return "\(mine.values.reduce(0, +))" + (who.isEmpty ? "" : " (\(who.joined(separator: ", ")))")
        }
        return "true \(part(false)); false \(part(true))"
    }

    enum CodingKeys: String, CodingKey {
        case worlds, arrivals, matchedArrivals, checkIns, falseCheckIns, repeatedCheckIns, falseCheckInsByKind, checkInsByPlace,
            falseCheckOuts
        case departures, accurateCheckOuts, rightGateCheckIns, detectionLatencySeconds, recall, precision, checkOutAccuracy, rightGateShare
        case briefCheckIns, briefFalseCheckIns, briefMatchedArrivals, briefRepeatedCheckIns, attendancePrecision, attendanceRecall
        case missedSample, falseSample
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(worlds, forKey: .worlds)
        for count in Self.counts { try c.encode(self[keyPath: count.figure], forKey: count.key) }
        try c.encode(falseCheckInsByKind, forKey: .falseCheckInsByKind)
        try c.encode(checkInsByPlace, forKey: .checkInsByPlace)
        try c.encode(detectionLatencySeconds, forKey: .detectionLatencySeconds)
        let ratios: [(CodingKeys, Double)] = [
            (.recall, recall), (.precision, precision), (.checkOutAccuracy, checkOutAccuracy), (.rightGateShare, rightGateShare),
            (.attendancePrecision, attendancePrecision), (.attendanceRecall, attendanceRecall),
        ]
        for (key, value) in ratios { try c.encode(value, forKey: key) }
        try c.encode(missedSample, forKey: .missedSample)
        try c.encode(falseSample, forKey: .falseSample)
    }
}

/// The outcome of a sweep: each world's figures, each class pooled with its worst world, the whole
/// sweep pooled, and the targets checked.
package struct SweepReport: Sendable, Encodable {
    package struct WorldRow: Sendable, Encodable {
        package var world: SweepWorld
        package var figures: SweepFigures
    }

    package struct ClassRow: Sendable, Encodable {
        package var worldClass: WorldClass
        package var figures: SweepFigures
        /// Index of the world with the worst of each figure (`recall`, `precision`, `falseCheckOuts`,
        /// `checkOutAccuracy`, `rightGate`, `latencyP99`).
        package var worst: [String: Int]
    }

    package struct Target: Sendable, Encodable {
        package var name: String
        package var met: Bool
        package var detail: String
    }

    package var worlds: [WorldRow]
    package var classes: [ClassRow]
    package var total: SweepFigures
    package var targets: [Target]
    package var peoplePerWorld: Int
    package var seed: UInt64
    /// The ranges the worlds were drawn from, and where they came from: `the sweep's own` or a file.
    package var ranges: SweepRanges
    package var rangesName: String
    package var wallSeconds: Double
    /// The PresenceKit configuration swept: `library defaults` or the file given.
    package var configuration: String

    package var allTargetsMet: Bool { targets.allSatisfy(\.met) }

    package init(
        worlds: [WorldRow], peoplePerWorld: Int, seed: UInt64, wallSeconds: Double, configuration: String,
        ranges: SweepRanges = SweepRanges(), rangesName: String = DetectionSweep.ownRanges
    ) {
        self.worlds = worlds
        self.peoplePerWorld = peoplePerWorld
        self.seed = seed
        self.ranges = ranges
        self.rangesName = rangesName
        self.wallSeconds = wallSeconds
        self.configuration = configuration
        var total = SweepFigures()
        var classes: [ClassRow] = []
        for c in WorldClass.allCases {
            let rows = worlds.filter { $0.world.worldClass == c }
            guard !rows.isEmpty else { continue }
            var pooled = SweepFigures()
            for r in rows { pooled.merge(r.figures) }
            func worst(_ key: (SweepFigures) -> Double) -> Int { rows.min { key($0.figures) < key($1.figures) }!.world.index }
            classes.append(
                ClassRow(
                    worldClass: c, figures: pooled,
                    worst: [
                        "recall": worst(\.recall), "precision": worst(\.precision),
                        "falseCheckOuts": worst { -Double($0.falseCheckOuts) }, "checkOutAccuracy": worst(\.checkOutAccuracy),
                        "rightGate": worst(\.rightGateShare), "latencyP99": worst { -($0.detectionLatencySeconds.p99 ?? .infinity) },
                    ]))
            total.merge(pooled)
        }
        self.classes = classes
        self.total = total
        targets = Self.check(classes: classes, total: total)
    }

    /// The detection targets (the product's specification: PresenceKit's README).
    static func check(classes: [ClassRow], total: SweepFigures) -> [Target] {
        func pct(_ v: Double) -> String { String(format: "%.2f %%", v * 100) }
        var t: [Target] = []
        // "Every world class" means all of them: a sweep too small to draw one misses the per-class targets.
        let everyClass = Set(classes.map(\.worldClass)) == Set(WorldClass.allCases)
        let weakestRecall = classes.min { $0.figures.recall < $1.figures.recall }
        let weakestPrecision = classes.min { $0.figures.precision < $1.figures.precision }
        t.append(
            Target(
                name: "check-in recall >= 99.5 % in every world class",
                met: everyClass && classes.allSatisfy { $0.figures.arrivals > 0 } && (weakestRecall?.figures.recall ?? 0) >= 0.995,
                detail: "weakest: \(weakestRecall?.worldClass.rawValue ?? "-") \(pct(weakestRecall?.figures.recall ?? 0))"))
        t.append(
            Target(
                name: "check-in precision >= 99.5 % in every world class",
                met: everyClass && classes.allSatisfy { $0.figures.checkIns > 0 } && (weakestPrecision?.figures.precision ?? 0) >= 0.995,
                detail: "weakest: \(weakestPrecision?.worldClass.rawValue ?? "-") \(pct(weakestPrecision?.figures.precision ?? 0))"))
        t.append(
            Target(
                name: "check-in recall >= 99.9 % over the sweep", met: total.arrivals > 0 && total.recall >= 0.999,
                detail: "\(pct(total.recall)) (\(total.matchedArrivals)/\(total.arrivals))"))
        t.append(
            Target(
                name: "check-in precision >= 99.9 % over the sweep", met: total.checkIns > 0 && total.precision >= 0.999,
                detail: "\(pct(total.precision)) (\(total.falseCheckIns) false, \(total.repeatedCheckIns) repeated of \(total.checkIns))"))
        t.append(Target(name: "0 check-outs of a person truly inside", met: total.falseCheckOuts == 0, detail: "\(total.falseCheckOuts)"))
        t.append(
            Target(
                name: "check-out time within 3 min of the departure for >= 99 % of stays",
                met: total.departures > 0 && total.checkOutAccuracy >= 0.99,
                detail: "\(pct(total.checkOutAccuracy)) (\(total.accurateCheckOuts)/\(total.departures))"))
        t.append(
            Target(
                name: "the right gate for >= 99 % of check-ins", met: total.matchedArrivals > 0 && total.rightGateShare >= 0.99,
                detail: "\(pct(total.rightGateShare)) (\(total.rightGateCheckIns)/\(total.matchedArrivals))"))
        let p = total.detectionLatencySeconds
        t.append(
            Target(
                name: "detection latency p50 < 5 s and p99 < 15 s", met: (p.p50 ?? .infinity) < 5 && (p.p99 ?? .infinity) < 15,
                detail:
                    "p50 \(p.p50.map { String(format: "%.1f s", $0) } ?? "none"), p99 \(p.p99.map { String(format: "%.1f s", $0) } ?? "none")"
            ))
        return t
    }

    /// The report as the terminal shows it.
    package var text: String {
        func pct(_ v: Double) -> String { String(format: "%6.2f%%", v * 100) }
        // An empty ratio (no arrival, no check-in) is n/a, not the 100 % it scores.
        func pct(_ v: Double, over count: Int) -> String { count > 0 ? pct(v) : "    n/a" }
        func sec(_ v: Double?) -> String { v.map { String(format: "%5.1fs", $0) } ?? "    - " }
        var lines: [String] = []
        lines.append(
            "sweep of \(worlds.count) worlds, \(peoplePerWorld) people each, seed \(seed), configuration: \(configuration), world ranges: \(rangesName), \(String(format: "%.1f", wallSeconds)) s wall"
        )
        lines.append("class            worlds arrivals  recall precision  false  out-false checkout-3min right-gate    p50    p99")
        func row(_ name: String, _ f: SweepFigures) -> String {
            name.padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: " %6d %8d", f.worlds, f.arrivals)
                + " \(pct(f.recall, over: f.arrivals))   \(pct(f.precision, over: f.checkIns))"
                + String(format: " %6d %10d", f.falseCheckIns, f.falseCheckOuts)
                + "      \(pct(f.checkOutAccuracy, over: f.departures))    \(pct(f.rightGateShare, over: f.matchedArrivals)) \(sec(f.detectionLatencySeconds.p50)) \(sec(f.detectionLatencySeconds.p99))"
        }
        for c in classes { lines.append(row(c.worldClass.rawValue, c.figures)) }
        lines.append(row("all", total))
        lines.append("false check-ins by who made them:")
        for (name, f) in classes.map({ ($0.worldClass.rawValue, $0.figures) }) + [("all", total)] {
            let kinds = f.falseCheckInsByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append("  \(name): \(kinds.isEmpty ? "none" : kinds)")
        }
        lines.append("where the whole sweep's check-ins were decided (true ones, then false ones, by who made them):")
        for place in DecisionPlace.allCases {
            let byWho = total.checkInsByPlace[place.rawValue] ?? [:]
            lines.append("  " + place.words.padding(toLength: 40, withPad: " ", startingAt: 0) + " " + SweepFigures.describe(byWho))
        }
        let minutes = Int(AttendancePresence.defaultMinimumSeconds / 60)
        lines.append(
            "daily attendance (the merger leaves out sessions closed by a check-out within \(minutes) min of their check-in; not a detection target):"
        )
        for (name, f) in classes.map({ ($0.worldClass.rawValue, $0.figures) }) + [("all", total)] {
            lines.append(
                "  " + name.padding(toLength: 15, withPad: " ", startingAt: 0)
                    + "precision \(pct(f.attendancePrecision)), recall \(pct(f.attendanceRecall)); left out \(f.briefCheckIns) check-ins, \(f.briefFalseCheckIns) of them false, \(f.briefMatchedArrivals) true arrivals"
            )
        }
        lines.append("worst world per class (index: recall / precision / false check-outs / check-out within 3 min / right gate / p99):")
        for c in classes {
            let parts = ["recall", "precision", "falseCheckOuts", "checkOutAccuracy", "rightGate", "latencyP99"].compactMap {
                key -> String? in
                guard let i = c.worst[key], let w = worlds.first(where: { $0.world.index == i }) else { return nil }
                let f = w.figures
                let value =
                    switch key {
                    case "recall": pct(f.recall)
                    case "precision": pct(f.precision)
                    case "falseCheckOuts": "\(f.falseCheckOuts)"
                    case "checkOutAccuracy": pct(f.checkOutAccuracy)
                    case "rightGate": pct(f.rightGateShare)
                    default: sec(f.detectionLatencySeconds.p99)
                    }
                return "#\(i) \(value.trimmingCharacters(in: .whitespaces))"
            }
            lines.append("  \(c.worldClass.rawValue): " + parts.joined(separator: " / "))
        }
        let met = targets.filter(\.met).count
        lines.append("targets met: \(met)/\(targets.count)")
        for t in targets { lines.append("  [\(t.met ? "met" : "MISSED")] \(t.name): \(t.detail)") }
        return lines.joined(separator: "\n")
    }

    package func write(to directory: String, name: String = "sweep") throws -> (json: String, html: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let json = directory + "/\(name).json", html = directory + "/\(name).html"
        try encoder.encode(self).write(to: URL(fileURLWithPath: json))
        try Data(SweepHTML.render(self).utf8).write(to: URL(fileURLWithPath: html))
        return (json, html)
    }
}

/// Runs a sweep: `worlds` seeded worlds, each a working day of `people` people on one site, every
/// phone running PresenceKit with `config`, scored against the truth.
package struct DetectionSweep: Sendable {
    package var worlds: Int
    package var people: Int
    package var seed: UInt64
    package var ranges = SweepRanges()
    package var rangesName = DetectionSweep.ownRanges
    package var config = PresenceConfig()
    package var configurationName = "library defaults"

    /// `rangesName` of the sweep's own ranges.
    package static let ownRanges = "the sweep's own"

    package init(worlds: Int, people: Int, seed: UInt64) {
        self.worlds = worlds
        self.people = people
        self.seed = seed
    }

    package func run(outboxDirectory: String, progress: (@Sendable (Int) -> Void)? = nil) async throws -> SweepReport {
        let started = ContinuousClock.now
        var rows: [SweepReport.WorldRow] = []
        for i in 0..<worlds {
            let world = SweepWorld(index: i, seed: seed, ranges: ranges)
            let plan = world.plan(people: people, ranges: ranges)
            var runner = DetectionRun(plan: plan, outboxDirectory: outboxDirectory + "/world-\(i)")
            runner.config = config
            let devices = try await runner.run(server: InProcessServer())
            let score = Score(
                people: plan.people, devices: devices, window: plan.options.simulationStart..<plan.options.simulationEnd, edgeMs: 0,
                doors: plan.world.sites.map { $0.gates.map(\.position) })
            rows.append(SweepReport.WorldRow(world: world, figures: SweepFigures(score)))
            progress?(i + 1)
        }
        try? FileManager.default.removeItem(atPath: outboxDirectory)
        let wall = ContinuousClock.now - started
        return SweepReport(
            worlds: rows, peoplePerWorld: people, seed: seed,
            wallSeconds: Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18, configuration: configurationName,
            ranges: ranges, rangesName: rangesName)
    }
}

/// The sweep as one self-contained HTML page (the fleet report's style).
enum SweepHTML {
    static func render(_ report: SweepReport) -> String {
        let e = HTMLReport.escape
        func pct(_ v: Double) -> String { String(format: "%.2f %%", v * 100) }
        func sec(_ v: Double?) -> String { v.map { String(format: "%.1f s", $0) } ?? "none" }
        func kinds(_ f: SweepFigures) -> String {
            let k = f.falseCheckInsByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return k.isEmpty ? "0" : k
        }
        func cells(_ f: SweepFigures) -> String {
            "<td>\(f.arrivals)</td><td>\(pct(f.recall))</td><td>\(pct(f.precision))</td><td>\(e(kinds(f)))</td><td>\(f.falseCheckOuts)</td>"
                + "<td>\(pct(f.checkOutAccuracy))</td><td>\(pct(f.rightGateShare))</td><td>\(sec(f.detectionLatencySeconds.p50))</td><td>\(sec(f.detectionLatencySeconds.p99))</td>"
        }
        let head =
            "<th>arrivals</th><th>check-in recall</th><th>check-in precision</th><th>false check-ins by who</th><th>check-outs while inside</th>"
            + "<th>check-out within 3 min</th><th>right gate</th><th>latency p50</th><th>latency p99</th>"
        var html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Detection sweep</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
            table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
            .met{color:#176b1f}.missed{color:#b00020;font-weight:bold}pre{background:#f6f6f6;padding:1em;white-space:pre-wrap}
            </style></head><body>
            <h1>Detection sweep</h1>
            <p>\(report.worlds.count) seeded worlds of one working day, \(report.peoplePerWorld) people each, seed \(report.seed), \
            configuration: \(e(report.configuration)), world ranges: \(e(report.rangesName)). Each world draws its radio (path loss, shadowing, fading, body blocking, packet loss, \
            advertising intervals, beacon calibration errors), its gates and its people (desk depth, shadowed desks, phones reading hot or \
            cold, walk-pasts, runners, cyclists, pavement stoppers, doorway breaks, lunch trips) from wide ranges.</p>
            <h2>Targets</h2>
            <table><tr><th>target</th><th>actual</th><th></th></tr>

            """
        for t in report.targets {
            html +=
                "<tr><td>\(e(t.name))</td><td>\(e(t.detail))</td><td class=\"\(t.met ? "met" : "missed")\">\(t.met ? "met" : "missed")</td></tr>\n"
        }
        html += "</table>\n<h2>Per world class</h2>\n<table><tr><th>class</th><th>worlds</th>\(head)<th>worst worlds</th></tr>\n"
        for c in report.classes {
            let worst = c.worst.sorted { $0.key < $1.key }.map { "\($0.key) #\($0.value)" }.joined(separator: ", ")
            html += "<tr><td>\(e(c.worldClass.rawValue))</td><td>\(c.figures.worlds)</td>\(cells(c.figures))<td>\(e(worst))</td></tr>\n"
        }
        html += "<tr><th>all</th><td>\(report.total.worlds)</td>\(cells(report.total))<td></td></tr>\n</table>\n"
        html += "<h2>Where check-ins were decided</h2>\n<table><tr><th>where the person was</th><th>check-ins, true; false</th></tr>\n"
        for place in DecisionPlace.allCases {
            let byWho = report.total.checkInsByPlace[place.rawValue] ?? [:]
            html += "<tr><td>\(e(place.words))</td><td>\(e(SweepFigures.describe(byWho)))</td></tr>\n"
        }
        html += "</table>\n"
        html +=
            "<h2>Daily attendance</h2>\n<p>The merger leaves out sessions closed by a check-out within \(Int(AttendancePresence.defaultMinimumSeconds / 60)) min of their check-in (not a detection target).</p>\n"
        html +=
            "<table><tr><th>class</th><th>precision</th><th>recall</th><th>check-ins left out</th><th>of them false</th><th>true arrivals left out</th></tr>\n"
        for (name, f) in report.classes.map({ ($0.worldClass.rawValue, $0.figures) }) + [("all", report.total)] {
            html += "<tr><td>\(e(name))</td><td>\(pct(f.attendancePrecision))</td><td>\(pct(f.attendanceRecall))</td>"
            html += "<td>\(f.briefCheckIns)</td><td>\(f.briefFalseCheckIns)</td><td>\(f.briefMatchedArrivals)</td></tr>\n"
        }
        html += "</table>\n"
        html +=
            "<h2>Every world</h2>\n<table><tr><th>#</th><th>class</th><th>path-loss exponent</th><th>shadowing</th><th>fading</th>"
            + "<th>body</th><th>wall</th><th>packet loss</th><th>gates</th><th>advertising</th><th>beacon error</th>\(head)</tr>\n"
        for w in report.worlds {
            let x = w.world
            html +=
                "<tr id=\"world-\(x.index)\"><td>\(x.index)</td><td>\(e(x.worldClass.rawValue))</td>"
                + String(
                    format: "<td>%.2f</td><td>%.1f dB / %.1f m", x.radio.pathLossExponent, x.radio.shadowingSigmaDb,
                    x.radio.shadowingDecorrelationMeters)
                + (x.radio.beaconShadowCorrelation > 0 ? String(format: ", %.0f %% shared", x.radio.beaconShadowCorrelation * 100) : "")
                + "</td>"
                + "<td>\(e(x.radio.fading.description))</td>"
                + String(
                    format: "<td>%.1f dB</td><td>%.1f dB</td><td>%.0f %%</td>", x.radio.bodyAttenuationDb, x.radio.wallAttenuationDb,
                    x.radio.packetLoss * 100)
                + String(format: "<td>%d, %.1f m apart</td>", x.gates, x.gateSpacingMeters)
                + "<td>\(x.advertisingIntervalsMs.map { "\($0) ms" }.joined(separator: ", "))</td>"
                + "<td>\(x.beaconTxErrorsDb.map { String(format: "%+.1f dB", $0) }.joined(separator: ", "))</td>\(cells(w.figures))</tr>\n"
        }
        html += "</table>\n</body></html>\n"
        return html
    }
}
