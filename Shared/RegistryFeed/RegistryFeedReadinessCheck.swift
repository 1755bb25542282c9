import ServiceRuntime

/// Ready once the registry feed's cache has caught up: before that every beacon looks unknown.
public struct RegistryFeedReadinessCheck: ReadinessCheck {
    public let name = "registry_feed"
    let loader: RegistryCacheLoader

    public init(loader: RegistryCacheLoader) { self.loader = loader }

    public func check() async throws {
        guard loader.isCaughtUp else { throw NotCaughtUp() }
    }

    struct NotCaughtUp: Error, CustomStringConvertible {
        var description: String { "the registry change feed is still being read" }
    }
}
