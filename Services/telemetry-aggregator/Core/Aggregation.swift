import AttendanceProtocol
import Foundation

/// What the aggregator keeps of a raw attendance event (`attendance.events.raw`): enough to score it
/// against the SLO and to attribute its verdict later.
package struct RawEventFacts: Hashable, Sendable {
    package var idempotencyKey: String
    /// The device's trigger time (the payload's event time).
    package var triggerAt: Date
    /// The gateway's receipt: "reached the server".
    package var receivedAt: Date
    package var dimensions: Dimensions
    package var queuedOffline: Bool
    package var eventType: String

    package init(idempotencyKey: String, triggerAt: Date, receivedAt: Date, dimensions: Dimensions, queuedOffline: Bool, eventType: String)
    {
        self.idempotencyKey = idempotencyKey
        self.triggerAt = triggerAt
        self.receivedAt = receivedAt
        self.dimensions = dimensions
        self.queuedOffline = queuedOffline
        self.eventType = eventType
    }

    /// Site from the envelope, else the body; app version from the envelope, else the body; device
    /// model from the body (the envelope has none).
    package init(_ raw: RawEventEnvelope) {
        var site = raw.siteId
        var appVersion = raw.appVersion
        var model: String?
        var offline = false
        switch raw.payload {
        case .event(let event):
            site = site ?? event.siteId
            appVersion = appVersion ?? event.app?.version
            model = event.device?.model
            offline = event.queuedOffline ?? false
        case .checkIn(let request):
            site = site ?? request.siteId
            appVersion = appVersion ?? request.deviceMeta.appVersion
            model = request.deviceMeta.model
        case .checkOut, .heartbeat:
            break
        }
        self.init(
            idempotencyKey: raw.idempotencyKey, triggerAt: raw.payload.eventTime, receivedAt: raw.receivedAt,
            dimensions: Dimensions(site: site, appVersion: appVersion, deviceModel: model), queuedOffline: offline,
            eventType: raw.payload.eventType.rawValue)
    }

    /// The minute the event belongs to: its trigger, but never after the receipt (a device clock
    /// running ahead must not push numbers into minutes that have not happened yet).
    package var minute: Int64 { EpochMinute.of(min(triggerAt, receivedAt)) }

    /// Trigger to receipt in milliseconds, 0 when the device clock says the receipt came first.
    package var receiptLatencyMs: Int64 {
        max(0, Int64((receivedAt.timeIntervalSince(triggerAt) * 1000).rounded()))
    }
}

/// The pure aggregation of decoded messages into a `RollupDelta`. Deduplication (which messages are
/// new) is the caller's: it needs the store. Everything here depends only on the message contents,
/// never on the clock or on arrival order, so a replay produces the same delta.
package enum Aggregation {
    /// Telemetry event names become row keys: a newer app's unknown name is kept, but only in a
    /// bounded, printable form.
    package static func eventName(_ name: TelemetryEventName) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in name.rawValue.lowercased().unicodeScalars where scalars.count < 48 {
            if ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_" { scalars.append(scalar) }
        }
        return scalars.isEmpty ? "unnamed" : String(scalars)
    }

    /// Adds a telemetry upload. `isNew` says which events (by id) were not counted before; a battery
    /// pair is counted when its later reading is new.
    ///
    /// - `telemetry.<name>`: one per event, in the minute of the event (late uploads land in their
    ///   own minute; a time after the gateway's receipt is clamped to the receipt).
    /// - `value.<name>`: events carrying a value (ranging time, backlog size, battery level).
    /// - battery drain: consecutive battery readings of one upload (sorted by time) that went down.
    package static func addTelemetry(_ batch: DeviceTelemetryBatch, isNew: (TelemetryEvent) -> Bool, into delta: inout RollupDelta) {
        let dimensions = Dimensions(site: batch.siteId, appVersion: batch.appVersion, deviceModel: batch.deviceModel)
        var battery: [(event: TelemetryEvent, new: Bool)] = []
        for event in batch.events {
            let new = isNew(event)
            if event.name == .battery, event.value != nil { battery.append((event, new)) }
            guard new else { continue }
            let minute = EpochMinute.of(min(event.at, batch.receivedAt))
            let name = eventName(event.name)
            delta.count(CounterMetric.telemetry(name), minute: minute, dimensions)
            if let value = event.value, value.isFinite {
                delta.count("value." + name, minute: minute, dimensions, sumMicros: CounterCell.micros(value))
            }
        }
        guard battery.count > 1 else { return }
        battery.sort { $0.event.at != $1.event.at ? $0.event.at < $1.event.at : $0.event.eventId < $1.event.eventId }
        for index in 1..<battery.count where battery[index].new {
            let previous = battery[index - 1].event, current = battery[index].event
            let hours = current.at.timeIntervalSince(previous.at) / 3_600
            guard hours > 0, hours <= 24, let before = previous.value, let after = current.value, before >= after else { continue }
            let minute = EpochMinute.of(min(current.at, batch.receivedAt))
            // Levels are 0...1; points are percent.
            delta.count(CounterMetric.batteryDrainPoints, minute: minute, dimensions, sumMicros: CounterCell.micros((before - after) * 100))
            delta.count(CounterMetric.batteryDrainHours, minute: minute, dimensions, sumMicros: CounterCell.micros(hours))
        }
    }

    /// Adds the first receipt of an attendance event: the SLO's good/total (under the trigger's minute,
    /// and again under the receipt's for the alerts), the offline count and the trigger-to-receipt
    /// latency.
    package static func addRawEvent(_ facts: RawEventFacts, objective: SLOObjective, into delta: inout RollupDelta) {
        let minute = facts.minute, receiptMinute = EpochMinute.of(facts.receivedAt)
        let good = objective.isGood(latencyMs: facts.receiptLatencyMs)
        delta.count(CounterMetric.sloEvents, minute: minute, facts.dimensions)
        delta.count(CounterMetric.sloEventsByReceipt, minute: receiptMinute, facts.dimensions)
        if good {
            delta.count(CounterMetric.sloGood, minute: minute, facts.dimensions)
            delta.count(CounterMetric.sloGoodByReceipt, minute: receiptMinute, facts.dimensions)
        }
        if facts.queuedOffline {
            delta.count(CounterMetric.offlineEvents, minute: minute, facts.dimensions)
        }
        delta.latency(LatencyMetric.triggerToReceipt, minute: minute, facts.dimensions, milliseconds: facts.receiptLatencyMs)
    }

    /// Adds the first verdict of an idempotency key: its outcome and, when the trigger time is known
    /// (from the verdict, else from the raw event), the trigger-to-verdict latency, both in the
    /// trigger's minute (the decision's when no trigger is known).
    package static func addVerdict(_ verdict: AttendanceVerdict, trigger: Date?, dimensions: Dimensions, into delta: inout RollupDelta) {
        addVerdict(
            outcome: verdict.outcome.rawValue, decidedAt: verdict.decidedAt, triggerAt: verdict.eventTime ?? trigger,
            dimensions: dimensions,
            into: &delta)
    }

    /// The same, from what the store kept of a verdict read before its raw event (counted once the
    /// raw event gives it its dimensions).
    package static func addVerdict(
        outcome: String, decidedAt: Date, triggerAt: Date?, dimensions: Dimensions, into delta: inout RollupDelta
    ) {
        let minute = EpochMinute.of(min(triggerAt ?? decidedAt, decidedAt))
        delta.count(CounterMetric.verdict(outcome), minute: minute, dimensions)
        if let triggerAt {
            let ms = Int64((decidedAt.timeIntervalSince(triggerAt) * 1000).rounded())
            delta.latency(LatencyMetric.triggerToVerdict, minute: minute, dimensions, milliseconds: ms)
        }
    }

    /// Adds a session change (counted by kind, in the minute it happened).
    package static func addSessionChange(_ change: SessionChange, into delta: inout RollupDelta) {
        delta.count(
            CounterMetric.session(change.change.rawValue), minute: EpochMinute.of(change.changedAt),
            Dimensions(site: change.siteId, appVersion: nil, deviceModel: nil))
    }
}
