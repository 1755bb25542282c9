import Foundation

/// The operator numbers of one window and filter, computed from the summed minute rollups.
///
/// Rates are `nil` when their denominator is zero (nothing to rate), never 0 or 1 made up.
package struct MetricsSummary: Hashable, Sendable, Codable {
    /// Share of attendance events the server accepted at their first verdict:
    /// accepted / (accepted + rejected + payload_mismatch). A first verdict `duplicate` (its original
    /// was not seen here) is left out.
    package var checkInSuccessRate: Double?
    /// The devices' view: (api_201 + api_200) / (api_201 + api_200 + api_409 + api_422 + api_400).
    package var deviceCheckInSuccessRate: Double?
    package var triggerToVerdict: LatencyPercentiles
    package var triggerToReceipt: LatencyPercentiles
    package var outboxBacklog: OutboxBacklog
    /// Mean of `ranging_stop` values (the ranging time in ms).
    package var averageRangingMs: Double?
    /// Battery percentage points lost per hour between consecutive readings (discharging only).
    package var batteryImpactPercentPerHour: Double?
    /// bg_timeout / ranging_start: background ranging runs cut short by the OS.
    package var bgTimeoutRate: Double?
    /// Attendance events sent from the offline queue / all attendance events received.
    package var offlineRate: Double?
    /// Events received (first receipts), verdicts, session changes and telemetry events by name.
    package var counts: [String: Int64]

    package struct OutboxBacklog: Hashable, Sendable, Codable {
        /// Mean backlog size the devices reported on offline_enqueue / outbox_sent.
        package var averageReported: Double?
        /// offline_enqueue - outbox_sent over the window.
        package var netEnqueued: Int64
    }

    package init(counters: [String: CounterCell], histograms: [String: LogHistogram]) {
        func count(_ metric: String) -> Int64 { counters[metric]?.count ?? 0 }
        func ratio(_ numerator: Int64, _ denominator: Int64) -> Double? { denominator == 0 ? nil : Double(numerator) / Double(denominator) }
        func mean(_ metric: String) -> Double? {
            guard let cell = counters[metric], cell.count > 0 else { return nil }
            return cell.sum / Double(cell.count)
        }

        let accepted = count(CounterMetric.verdict("accepted"))
        checkInSuccessRate = ratio(
            accepted, accepted + count(CounterMetric.verdict("rejected")) + count(CounterMetric.verdict("payload_mismatch")))
        let deviceOK = count(CounterMetric.telemetry("api_201")) + count(CounterMetric.telemetry("api_200"))
        let deviceFinal =
            deviceOK + count(CounterMetric.telemetry("api_409")) + count(CounterMetric.telemetry("api_422"))
            + count(CounterMetric.telemetry("api_400"))
        deviceCheckInSuccessRate = ratio(deviceOK, deviceFinal)
        triggerToVerdict = LatencyPercentiles(histograms[LatencyMetric.triggerToVerdict] ?? LogHistogram())
        triggerToReceipt = LatencyPercentiles(histograms[LatencyMetric.triggerToReceipt] ?? LogHistogram())

        let enqueueValues = counters["value.offline_enqueue"] ?? CounterCell()
        let sentValues = counters["value.outbox_sent"] ?? CounterCell()
        var reported = enqueueValues
        reported.add(sentValues)
        outboxBacklog = OutboxBacklog(
            averageReported: reported.count == 0 ? nil : reported.sum / Double(reported.count),
            netEnqueued: count(CounterMetric.telemetry("offline_enqueue")) - count(CounterMetric.telemetry("outbox_sent")))
        averageRangingMs = mean("value.ranging_stop")
        let hours = counters[CounterMetric.batteryDrainHours]?.sum ?? 0
        batteryImpactPercentPerHour = hours > 0 ? (counters[CounterMetric.batteryDrainPoints]?.sum ?? 0) / hours : nil
        bgTimeoutRate = ratio(count(CounterMetric.telemetry("bg_timeout")), count(CounterMetric.telemetry("ranging_start")))
        offlineRate = ratio(count(CounterMetric.offlineEvents), count(CounterMetric.sloEvents))

        var counts: [String: Int64] = [:]
        for (metric, cell) in counters where !metric.hasPrefix("value.") && !metric.hasPrefix("battery.") {
            counts[metric] = cell.count
        }
        self.counts = counts
    }
}
