import AttendanceProtocol

/// The broker-side name of each platform topic: the protocol's name unless `TOPIC_<NAME>` overrides
/// it (`TOPIC_RAW_EVENTS`, `TOPIC_VETTED_EVENTS`, `TOPIC_VERDICTS`, `TOPIC_SESSIONS`,
/// `TOPIC_DEVICE_TELEMETRY`, `TOPIC_REGISTRY_CHANGES`, `TOPIC_DEAD_LETTERS`), e.g. to share a cluster
/// with another deployment. Every service and the CLI read the same variables, so an override is
/// created, produced to and consumed from under the same name everywhere.
public struct TopicNames: Sendable, Equatable {
    private var names: [Topic: String]

    /// The protocol's names.
    public init() {
        names = [:]
    }

    public static func load(from env: EnvironmentReader) -> TopicNames {
        var topics = TopicNames()
        for topic in Topic.allCases { topics.names[topic] = env.topicName(topic) }
        return topics
    }

    /// A test points a topic at one of its own by setting it.
    public subscript(topic: Topic) -> String {
        get { names[topic] ?? topic.name }
        set { names[topic] = newValue }
    }
}

extension Topic {
    /// `TOPIC_` and the case in upper snake case: `rawEvents` is `TOPIC_RAW_EVENTS`.
    public var overrideKey: String {
        var key = "TOPIC_"
        for character in String(describing: self) {
            if character.isUppercase { key += "_" }
            key += character.uppercased()
        }
        return key
    }
}

extension EnvironmentReader {
    /// `TopicNames.load(from:)` for one topic.
    public func topicName(_ topic: Topic) -> String {
        string(topic.overrideKey, default: topic.name)
    }
}
