import Hummingbird
import Metrics
import Prometheus

public enum MetricsSetup {
    /// Bootstraps swift-metrics with a Prometheus registry; call once per process.
    public static func bootstrap() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }
}

/// `/metrics` in the Prometheus text format.
public struct MetricsController<Context: RequestContext>: Sendable {
    let registry: PrometheusCollectorRegistry

    public func addRoutes(to router: Router<Context>) {
        router.get("/metrics") { _, _ -> Response in
            var buffer = ByteBuffer()
            buffer.writeBytes(registry.emitToBuffer())
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: buffer)
            )
        }
    }
}
