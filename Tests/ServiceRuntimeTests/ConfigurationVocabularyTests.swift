import AttendanceProtocol
import Foundation
import Testing

@testable import ServiceRuntime

/// docs/CONFIGURATION.md is the one list of the platform's environment variables: every variable the
/// code reads is in its table and every row is read by the code, and every name follows the one
/// vocabulary (a duration ends in its unit, a topic name is `TOPIC_<NAME>`, a schema `<SERVICE>_SCHEMA`).
@Suite("Configuration vocabulary")
struct ConfigurationVocabularyTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The first column of the table under "## Variables".
    static func documented() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Variables").dropFirst().first?.components(separatedBy: "\n## ").first)
        var names: Set<String> = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(3).prefix { $0 != "`" }
            names.insert(String(cell))
        }
        return names
    }

    /// Literal keys handed to an `EnvironmentReader` getter or looked up in the process environment,
    /// in every product source file, plus the topic overrides `TopicNames` builds from `Topic` and the
    /// consumer-group variables `ConsumerGroupConfiguration` builds from a prefix.
    static func readByCode() throws -> [String: [String]] {
        let getter = try Regex(
            #"\.(?:string|optionalString|requiredString|int|optionalInt|double|bool|milliseconds|choice|port|schemaName)\(\s*"([A-Z][A-Z0-9_]+)""#
        )
        let lookup = try Regex(#"(?:environment|env)\["([A-Z][A-Z0-9_]+)"\]"#)
        let consumerPrefix = try Regex(#"\.overridden\(prefix: "([A-Z][A-Z0-9_]*)""#)
        var found: [String: [String]] = [:]
        for folder in ["Services", "Shared"] {
            let base = root.appendingPathComponent(folder)
            let files = try #require(FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                let source = try String(contentsOf: file, encoding: .utf8)
                for regex in [getter, lookup] {
                    for match in source.matches(of: regex) {
                        if let key = match.output[1].substring.map(String.init) {
                            found[key, default: []].append(file.path.replacingOccurrences(of: root.path + "/", with: ""))
                        }
                    }
                }
                for match in source.matches(of: consumerPrefix) {
                    guard let prefix = match.output[1].substring.map(String.init) else { continue }
                    let names = ConsumerGroupConfiguration.variableNames(prefix: prefix)
                    for key in [names.groupId, names.maxBatch] { found[key, default: []].append("ConsumerGroupConfiguration") }
                }
            }
        }
        for topic in Topic.allCases { found[topic.overrideKey, default: []].append("TopicNames") }
        return found
    }

    @Test func everyVariableTheCodeReadsIsDocumentedAndEveryDocumentedOneIsRead() throws {
        let documented = try Self.documented()
        let read = try Self.readByCode()
        #expect(documented.count > 50)
        let undocumented = read.filter { !documented.contains($0.key) }
        #expect(undocumented.isEmpty, "read by the code but not in docs/CONFIGURATION.md: \(undocumented)")
        let unread = documented.subtracting(read.keys)
        #expect(unread.isEmpty, "in docs/CONFIGURATION.md but read by nothing: \(unread.sorted())")
        let renamed = documented.intersection(EnvironmentReader.renamedKeys.keys)
        #expect(renamed.isEmpty, "documented under a name that was renamed: \(renamed.sorted())")
    }

    @Test func everyNameFollowsTheVocabulary() throws {
        for key in try Self.readByCode().keys {
            #expect(
                !key.hasSuffix("_S") && !key.hasSuffix("_SEC") && !key.hasSuffix("_MILLIS"),
                "\(key): a duration ends in _MS, _SECONDS or _DAYS")
            // Besides the names, two settings size the topics a service creates.
            if key.contains("TOPIC") && !["TOPIC_PARTITIONS", "TOPIC_REPLICATION_FACTOR"].contains(key) {
                #expect(Topic.allCases.map(\.overrideKey).contains(key), "\(key): a topic name is TOPIC_<NAME> of a protocol topic")
            }
            if key.hasSuffix("SCHEMA") { #expect(key.split(separator: "_").count == 2, "\(key): a schema is <SERVICE>_SCHEMA") }
        }
    }

    @Test func topicOverridesAreTheProtocolsNamesInUpperSnakeCase() {
        #expect(Topic.rawEvents.overrideKey == "TOPIC_RAW_EVENTS")
        #expect(Topic.deadLetters.overrideKey == "TOPIC_DEAD_LETTERS")
        let names = TopicNames.load(from: EnvironmentReader(["TOPIC_VERDICTS": "tenant-a.verdicts"]))
        #expect(names[.verdicts] == "tenant-a.verdicts")
        #expect(names[.rawEvents] == Topic.rawEvents.name)
    }

    @Test func aRenamedVariableStopsTheServiceNamingItsNewName() {
        let env = EnvironmentReader(["MERGER_HORIZON_S": "600000"])
        #expect(throws: ConfigurationError.self) { try ServiceConfiguration.load(service: "svc", defaultHTTPPort: 1, from: env) }
        do {
            try env.refuseRenamedKeys()
        } catch {
            #expect(error.description.contains("MERGER_HORIZON_S was renamed MERGER_HORIZON_SECONDS"), "\(error)")
        }
    }
}
