import BeaconRegistryService
import ServiceRuntime

// beacon-registry: the registry's admin REST service (see BeaconRegistryServer).
await ServiceMain.run {
    try await BeaconRegistryServer.run()
}
