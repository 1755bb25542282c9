import PolicyService
import ServiceRuntime

// policy-service: raw events → anti-fraud rules → vetted events (see PolicyServer).
await ServiceMain.run {
    try await PolicyServer.run()
}
