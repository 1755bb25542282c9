import Metrics

/// The gateway's own metrics (Prometheus through the process's `MetricsSetup`).
enum GatewayMetrics {
    static let rateLimited = Counter(label: "ingest_gateway_rate_limited_total")
    static let produceFailures = Counter(label: "ingest_gateway_produce_failures_total")
    /// Requests refused because the idempotency table held `maxEntries` requests awaiting their verdict.
    static let tableFull = Counter(label: "ingest_gateway_requests_refused_table_full_total")
    /// Requests refused because the verdict reader is not positioned (starting, or the broker was away):
    /// nothing was produced, so `produceFailures` does not count them.
    static let unpositioned = Counter(label: "ingest_gateway_requests_refused_unpositioned_total")
    static let verdictsReceived = Counter(label: "ingest_gateway_verdicts_total")
    static let verdictsUndecodable = Counter(label: "ingest_gateway_verdicts_undecodable_total")
    static let verdictWait = Timer(label: "ingest_gateway_verdict_wait_seconds")

    /// `ingest_gateway_answers_total{status}`: one per event answered, alone or as an item of a batch.
    static func answered(status: Int) {
        Counter(label: "ingest_gateway_answers_total", dimensions: [("status", String(status))]).increment()
    }
}
