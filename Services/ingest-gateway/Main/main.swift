import IngestGatewayService
import ServiceRuntime

// ingest-gateway: the device API (see IngestGatewayServer).
await ServiceMain.run {
    try await IngestGatewayServer.run()
}
