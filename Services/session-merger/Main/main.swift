import ServiceRuntime
import SessionMergerService

// session-merger: vetted events -> sessions, verdicts and session changes (see SessionMergerServer).
await ServiceMain.run {
    try await SessionMergerServer.run()
}
