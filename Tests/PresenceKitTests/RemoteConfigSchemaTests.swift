import Foundation
import Testing

@testable import PresenceKit

/// Every key the reader knows carries the schema that introduced it, so a registry can leave out, for an
/// older app, the keys of later schemas (which that app would refuse, with the whole document).
@Suite("Remote config: every key has its schema")
struct RemoteConfigSchemaTests {
    /// A key listed but not read, or read but not listed, shows here: each listed key, given a value of a
    /// wrong type, is refused for its type (so the reader reads it), never as unknown.
    @Test func everyListedKeyIsReadAndNoneIsUnknown() {
        for path in RemoteConfig.keySchemaVersions.keys.sorted() {
            let parts = path.split(separator: ".").map(String.init)
            let json = parts.count == 1 ? #"{"\#(parts[0])": [true]}"# : #"{"\#(parts[0])": {"\#(parts[1])": [true]}}"#
            do {
                _ = try RemoteConfig.decode(json)
                Issue.record("\(path): a list was accepted")
            } catch {
                #expect(!error.issues.isEmpty, "\(path)")
                #expect(
                    !error.issues.contains { $0.message.contains("is not a remote-config key") }, "\(path) is listed but not read: \(error)"
                )
            }
        }
        #expect(RemoteConfig.keySchemaVersions.values.allSatisfy { (1...RemoteConfig.schemaVersion).contains($0) })
    }

    @Test func aKeyNotListedIsRefusedByName() {
        do {
            _ = try RemoteConfig.decode(#"{"thresholds": {"enter_rssi": -70, "exit_rssi": -80}}"#)
            Issue.record("an unlisted key was accepted")
        } catch {
            #expect(error.issues.map(\.key) == ["thresholds.exit_rssi"])
        }
    }
}
