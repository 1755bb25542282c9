import Foundation
import PolicyServiceCore
import ServiceRuntime

/// The per-site rule configuration the service starts with.
///
/// `POLICY_BOOK_FILE` names a JSON file `{"globalKillSwitch": false, "default": <SitePolicy>,
/// "sites": [<SitePolicy>, ...]}` (every member optional); without it every site runs
/// `SitePolicy.default`. Each policy is validated against the rules this engine hosts, and a bad
/// file stops the service with one line naming the field (exit 78), never a half-applied book.
package enum PolicyBookLoader {
    struct File: Decodable {
        var globalKillSwitch: Bool?
        var `default`: SitePolicy?
        var sites: [SitePolicy]?
    }

    package static func load(from env: EnvironmentReader, engine: PolicyEngine) throws(ConfigurationError) -> PolicyBook {
        guard let path = env.optionalString("POLICY_BOOK_FILE"), !path.isEmpty else { return PolicyBook() }
        let expected = "a readable JSON policy book: {\"globalKillSwitch\", \"default\", \"sites\"}"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(key: "POLICY_BOOK_FILE", value: path, expected: expected)
        }
        return try parse(data, source: path, engine: engine)
    }

    package static func parse(_ data: Data, source: String, engine: PolicyEngine) throws(ConfigurationError) -> PolicyBook {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw ConfigurationError(key: "POLICY_BOOK_FILE", value: source, expected: "valid JSON policy book (\(error))")
        }
        let policies = [file.default].compactMap { $0 } + (file.sites ?? [])
        for policy in policies {
            do {
                try policy.validate(hostedRules: engine.ruleIDs)
            } catch {
                throw ConfigurationError(
                    key: "POLICY_BOOK_FILE", value: source, expected: "valid site policies; site \(policy.siteId ?? "default"): \(error)"
                )
            }
        }
        if (file.sites ?? []).contains(where: { $0.siteId == nil }) {
            throw ConfigurationError(key: "POLICY_BOOK_FILE", value: source, expected: "every entry of \"sites\" to have a siteId")
        }
        return PolicyBook(
            defaultPolicy: file.default ?? .default, sites: file.sites ?? [], globalKillSwitch: file.globalKillSwitch ?? false)
    }
}
