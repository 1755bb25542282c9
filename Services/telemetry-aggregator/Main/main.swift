import ServiceRuntime
import TelemetryAggregatorService

// telemetry-aggregator: device telemetry and pipeline events -> minute rollups, SLO, burn-rate alerts.
await ServiceMain.run {
    try await TelemetryAggregatorServer.run()
}
