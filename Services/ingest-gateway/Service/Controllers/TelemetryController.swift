import AttendanceProtocol
import CoreMetrics
import Foundation
import Hummingbird
import Logging
import RegistryFeed
import ServiceRuntime

/// `POST /v1/telemetry`: a device's telemetry batch, validated, stamped with the authenticated
/// device and user, produced to `device.telemetry` (key: device id); 202 after the delivery report,
/// 503 with `Retry-After` when it could not be produced (the app keeps and re-uploads it; the
/// aggregator counts each `eventId` once).
struct TelemetryController {
    let pipeline: IngestPipeline
    let publisher: any GatewayPublisher
    let now: @Sendable () -> Date

    func addRoutes(to group: RouterGroup<GatewayRequestContext>) {
        group.post("telemetry", use: post)
    }

    @Sendable func post(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        let settings = pipeline.settings
        let bytes = try await DeviceBody.read(request, maxBytes: settings.limits.maxBodyBytes)
        let upload = try DeviceBody.decode(TelemetryUploadRequest.self, from: bytes)
        let at = now()
        let errors = upload.validate(now: at, limits: settings.limits)
        if !errors.isEmpty { throw ProblemDetails.validation(errors) }
        // The site labels the aggregator's per-site telemetry figures: only one of the user's own sites, so
        // no phone's telemetry lands in another site's, or another organization's.
        let siteId = upload.siteId.flatMap { site in pipeline.cache.user(id: device.userId)?.siteIds.contains(site) == true ? site : nil }
        let batch = DeviceTelemetryBatch(
            batchId: context.requestId, deviceId: device.deviceId, userId: device.userId, siteId: siteId,
            appVersion: upload.appVersion, deviceModel: upload.deviceModel, osVersion: upload.osVersion, receivedAt: at,
            events: upload.events
        )
        do {
            try await publisher.publish(batch)
        } catch {
            GatewayMetrics.produceFailures.increment()
            pipeline.produceFailureLog.log(
                .warning, "telemetry not produced", metadata: ["error": .string(String(describing: error))], logger: context.logger)
            throw ProblemDetails.unavailable(
                "the telemetry could not be queued; upload it again", retryAfterSeconds: settings.retryAfterSeconds)
        }
        return GatewayReply.json(TelemetryUploadResponse(accepted: upload.events.count), status: 202)
    }
}
