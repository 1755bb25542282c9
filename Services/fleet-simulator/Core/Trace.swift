import Foundation
import PresenceKit

/// A recorded trace: what a field engineer's phone observed, one observation a line (README.md of
/// the fleet simulator documents the format).
package struct Trace: Sendable {
    package enum Observation: Sendable, Hashable {
        case site(id: String, uuid: String, major: UInt16?)
        case rssi(BeaconIdentity, Int)
        case motion(MotionActivity)
        case steps(Int)
        case geofence(siteId: String, inside: Bool)
        case region(inside: Bool)
        case network(online: Bool)
        case app(String)
    }

    package struct Line: Sendable, Hashable {
        package var number: Int
        package var at: Timestamp
        package var observation: Observation
    }

    package var lines: [Line]

    package static let header = "timestamp,event,target,value"

    /// Parses the CSV text; the first problem stops it with the line number and the line.
    package static func parse(_ text: String) throws(TraceError) -> Trace {
        var lines: [Line] = []
        var sawHeader = false
        var number = 0
        var previous: Timestamp?
        // Any line break: a recording exported on Windows ends its lines with CR LF, one `Character`.
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if !sawHeader {
                guard line.replacingOccurrences(of: " ", with: "").lowercased() == header else {
                    throw TraceError(line: number, text: line, message: "expected the header \"\(header)\"")
                }
                sawHeader = true
                continue
            }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count == 4 else {
                throw TraceError(line: number, text: line, message: "expected 4 fields (\(header)), got \(fields.count)")
            }
            guard let at = parseTime(fields[0]) else {
                throw TraceError(
                    line: number, text: line,
                    message: "timestamp \"\(fields[0])\" is neither epoch milliseconds nor ISO-8601 UTC like 2026-01-05T08:00:01.250Z")
            }
            if let previous, at < previous {
                throw TraceError(line: number, text: line, message: "timestamp goes backwards (\(at.iso8601) after \(previous.iso8601))")
            }
            previous = at
            let target = fields[2], value = fields[3]
            let observation: Observation
            switch fields[1].lowercased() {
            case "site":
                let parts = value.split(separator: ":").map(String.init)
                guard !target.isEmpty, let uuid = parts.first, UUIDBits(uuidString: uuid) != nil, parts.count <= 2 else {
                    throw TraceError(line: number, text: line, message: "a site line is SITE_ID then UUID or UUID:major as value")
                }
                var major: UInt16?
                if parts.count == 2 {
                    guard let m = UInt16(parts[1]) else {
                        throw TraceError(line: number, text: line, message: "major \"\(parts[1])\" is not 0...65535")
                    }
                    major = m
                }
                observation = .site(id: target, uuid: uuid, major: major)
            case "rssi":
                let parts = target.split(separator: ":").map(String.init)
                guard parts.count == 3, let bits = UUIDBits(uuidString: parts[0]), let major = UInt16(parts[1]),
                    let minor = UInt16(parts[2])
                else {
                    throw TraceError(line: number, text: line, message: "beacon \"\(target)\" is not UUID:major:minor")
                }
                guard let rssi = Int(value), rssi <= 0, rssi >= -127 else {
                    throw TraceError(
                        line: number, text: line, message: "RSSI \"\(value)\" is not an integer dBm in -127...0 (0 = not heard)")
                }
                observation = .rssi(BeaconIdentity(uuid: bits, major: major, minor: minor), rssi)
            case "motion":
                guard let activity = MotionActivity(rawValue: value.lowercased()) else {
                    throw TraceError(
                        line: number, text: line,
                        message: "motion \"\(value)\" is not one of \(MotionActivity.allCases.map(\.rawValue).joined(separator: "|"))")
                }
                observation = .motion(activity)
            case "steps":
                guard let n = Int(value), n >= 0 else {
                    throw TraceError(line: number, text: line, message: "steps \"\(value)\" is not a count")
                }
                observation = .steps(n)
            case "geofence":
                guard !target.isEmpty, ["enter", "exit"].contains(value.lowercased()) else {
                    throw TraceError(line: number, text: line, message: "a geofence line is SITE_ID then enter|exit")
                }
                observation = .geofence(siteId: target, inside: value.lowercased() == "enter")
            case "region":
                switch value.lowercased() {
                case "enter", "inside": observation = .region(inside: true)
                case "exit", "outside": observation = .region(inside: false)
                default: throw TraceError(line: number, text: line, message: "region \"\(value)\" is not enter|exit")
                }
            case "network":
                switch value.lowercased() {
                case "online": observation = .network(online: true)
                case "offline": observation = .network(online: false)
                default: throw TraceError(line: number, text: line, message: "network \"\(value)\" is not online|offline")
                }
            case "app":
                guard ["launch", "terminate", "force_quit"].contains(value.lowercased()) else {
                    throw TraceError(line: number, text: line, message: "app \"\(value)\" is not launch|terminate|force_quit")
                }
                observation = .app(value.lowercased())
            default:
                throw TraceError(
                    line: number, text: line,
                    message: "unknown event \"\(fields[1])\" (site, rssi, motion, steps, geofence, region, network, app)")
            }
            lines.append(Line(number: number, at: at, observation: observation))
        }
        guard sawHeader else { throw TraceError(line: number, text: "", message: "empty trace: no header \"\(header)\"") }
        return Trace(lines: lines)
    }

    package static func parseTime(_ s: String) -> Timestamp? {
        if let ms = Int64(s) { return Timestamp(millisecondsSinceEpoch: ms) }
        let iso = ISO8601DateFormatter()
        iso.formatOptions = s.contains(".") ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
        guard let date = iso.date(from: s) else { return nil }
        return Timestamp(millisecondsSinceEpoch: Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}

package struct TraceError: Error, Sendable, Hashable, CustomStringConvertible {
    package var line: Int
    package var text: String
    package var message: String

    /// Line 0: the trace as a whole (its end, its timers), not one line of it.
    package var description: String {
        line > 0 ? "trace line \(line): \(message)\(text.isEmpty ? "" : ": \(text)")" : "trace: \(message)"
    }
}

/// Feeds a trace through PresenceKit as a phone would and collects the decisions:
/// - a reading reaches the library only while it scans (a ranging burst or the continuous scan), as
///   the OS delivers ranging callbacks only then; `Options.feedAllReadings` feeds every reading, for
///   analysis;
/// - a timer fires at its own due time, between lines and after the last one, up to `Options.end`
///   (default: the last line plus `defaultTail`), and a decision carries the moment it was made, to the
///   millisecond;
/// - a reading of a beacon that no `site` line claims is an error naming its line.
package enum TraceReplay {
    /// How long after the last line timers still run when no end is given: the soft-exit grace
    /// (3 minutes by default) and the exit confirmation that follows it fit.
    package static let defaultTailMs: Int64 = 600_000

    package struct Options: Sendable {
        package var feedAllReadings = false
        /// When the replay ends (timers due up to then fire); nil: the last line plus `defaultTailMs`.
        package var end: Timestamp?

        package init(feedAllReadings: Bool = false, end: Timestamp? = nil) {
            self.feedAllReadings = feedAllReadings
            self.end = end
        }
    }

    package struct Decision: Sendable, Codable, Hashable {
        package var type: String
        package var timestamp: String
        package var decidedAt: String
        package var siteId: String
        package var beacon: String
        package var reason: String
        package var sessionKey: String
        package var rssiSeries: [Int]
    }

    package struct Output: Sendable, Codable {
        package var observations: Int
        /// Readings that came while the library was not scanning (not fed, unless `feedAllReadings`).
        package var readingsWhileNotScanning: Int
        package var endedAt: String
        package var decisions: [Decision]
        package var finalPhase: String
        package var notifications: [String]
    }

    /// Timers that may fire between two lines (or after the last): a heartbeat every 5 minutes for about
    /// a year.
    static let maxTimerFiringsPerStep = 100_000

    package static func run(_ trace: Trace, config: PresenceConfig, options: Options = Options()) throws -> Output {
        var sites: [String: (uuid: String, major: UInt16?)] = [:]
        var order: [String] = []
        for line in trace.lines {
            if case .site(let id, let uuid, let major) = line.observation {
                if sites[id] == nil { order.append(id) }
                sites[id] = (uuid, major)
            }
        }
        guard !sites.isEmpty else {
            throw TraceError(
                line: 0, text: "",
                message: "the trace names no site (add a line like \"0,site,S_HQ,f7826da6-4fa2-4e98-8024-bc5b71e0893e:10\")")
        }
        let directory = SiteDirectory(
            sites: order.map { id in
                Site(
                    id: id, center: GeoPoint(latitude: 0, longitude: 0), beacons: [BeaconMatcher(sites[id]!.uuid, major: sites[id]!.major)])
            })
        for line in trace.lines {
            if case .rssi(let beacon, _) = line.observation, directory.siteIndex(for: beacon) == nil {
                throw TraceError(
                    line: line.number, text: "",
                    message: "beacon \(beacon.beaconId) belongs to no site: add a site line for its UUID or UUID:major")
            }
            if case .geofence(let id, _) = line.observation, directory.siteIndex(id: id) == nil {
                throw TraceError(
                    line: line.number, text: "",
                    message: "geofence of \(id), which no site line declares (sites: \(order.joined(separator: ", ")))")
            }
        }
        let lastAt = trace.lines.last?.at ?? Timestamp.zero
        let end = options.end ?? lastAt + defaultTailMs
        guard end >= lastAt else {
            throw TraceError(
                line: 0, text: "",
                message: "the end \(end.iso8601Milliseconds) is before the trace's last line (\(lastAt.iso8601Milliseconds))")
        }
        let identity = DeviceIdentity(userId: "trace-user", deviceId: "trace-device")
        var agent = PresenceAgent(machine: try PresenceStateMachine(config: config, directory: directory, identity: identity, seed: 1))
        var decisions: [Decision] = []
        var notifications: [String] = []
        var count = 0
        var notScanning = 0
        var lastSnapshot: PresenceSnapshot?
        func collect(_ effects: [PresenceEffect], at now: Timestamp) {
            for effect in effects {
                switch effect {
                case .postCheckIn(let e), .postCheckOut(let e), .postHeartbeat(let e):
                    decisions.append(
                        Decision(
                            type: e.type.rawValue, timestamp: e.timestamp.iso8601Milliseconds, decidedAt: e.decidedAt.iso8601Milliseconds,
                            siteId: e.siteId, beacon: e.beacon.beaconId, reason: e.reason.rawValue, sessionKey: e.sessionKey,
                            rssiSeries: e.rssiSeries ?? []))
                case .persistSnapshot(let s): lastSnapshot = s
                case .notifyUser(let n): notifications.append("\(now.iso8601Milliseconds) \(n.kind.rawValue): \(n.message)")
                default: break
                }
            }
        }
        /// Fires every timer due up to `t`, each at its own deadline.
        func runTimers(until t: Timestamp) throws {
            // Bounded: a timer that keeps rescheduling itself at the same moment must not hang the replay,
            // and a replay stopped short must say so rather than report the end it was given.
            for _ in 0..<Self.maxTimerFiringsPerStep {
                guard let due = agent.nextDeadline, due <= t else { return }
                collect(agent.advance(to: due), at: due)
            }
            guard let due = agent.nextDeadline, due <= t else { return }
            throw TraceError(
                line: 0, text: "",
                message:
                    "more than \(Self.maxTimerFiringsPerStep) timers fire before \(t.iso8601Milliseconds) (the next at \(due.iso8601Milliseconds)): end the replay sooner (--end)"
            )
        }
        for line in trace.lines {
            let now = line.at
            try runTimers(until: now)
            let event: PresenceEvent?
            switch line.observation {
            case .site: event = nil
            case .rssi(let beacon, let rssi):
                let scanning = agent.machine.rangingActive || agent.machine.continuousScanActive
                if !scanning { notScanning += 1 }
                event = scanning || options.feedAllReadings ? .beaconReading(BeaconReading(beacon: beacon, rssi: rssi)) : nil
            case .motion(let a): event = .motionActivity(a)
            case .steps(let n): event = .steps(n)
            case .geofence(let id, let inside): event = inside ? .geofenceEntered(siteId: id) : .geofenceExited(siteId: id)
            case .region(let inside): event = inside ? .beaconRegionEntered : .beaconRegionExited
            case .network(let online): event = .connectivityChanged(online: online)
            case .app(let what):
                switch what {
                case "launch":
                    agent = PresenceAgent(
                        machine: try PresenceStateMachine(
                            config: config, directory: directory, identity: identity, seed: UInt64(line.number), restoring: lastSnapshot))
                    event = .appLaunched
                case "force_quit": event = .appTerminated(forceQuit: true)
                default: event = .appTerminated(forceQuit: false)
                }
            }
            guard let event else { continue }
            count += 1
            collect(agent.handle(event, at: now), at: now)
        }
        try runTimers(until: end)
        return Output(
            observations: count, readingsWhileNotScanning: notScanning, endedAt: end.iso8601Milliseconds, decisions: decisions,
            finalPhase: agent.machine.phase.rawValue, notifications: notifications)
    }

    package static func json(_ output: Output) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(output), as: UTF8.self)
    }
}
