/// An app version compared the semantic-versioning way (semver.org 2.0 precedence), lenient about
/// the number of numeric components.
///
/// Accepted: `1.12.0`, `1.12` (= `1.12.0`), `2`, `v1.2.3`, `1.13.0-beta.2`, `1.12.0+345` (build
/// metadata ignored). Numeric components compare as numbers (`1.10.0` > `1.9.9`); missing ones are
/// zero; a pre-release is older than its release (`1.13.0-beta` < `1.13.0`), pre-release
/// identifiers compare numerically when both are numbers, else in ASCII order, numbers before words.
package struct SemanticVersion: Comparable, Hashable, Sendable, CustomStringConvertible {
    package let components: [Int]
    package let prerelease: [String]

    /// `nil` for text that is not a version.
    package init?(_ text: String) {
        var body = Substring(text)
        while let first = body.first, first == " " { body = body.dropFirst() }
        while let last = body.last, last == " " { body = body.dropLast() }
        if let first = body.first, first == "v" || first == "V" { body = body.dropFirst() }
        if let plus = body.firstIndex(of: "+") {
            let build = body[body.index(after: plus)...]
            guard !build.isEmpty, build.split(separator: ".", omittingEmptySubsequences: false).allSatisfy(Self.isIdentifier) else {
                return nil
            }
            body = body[..<plus]
        }
        var prerelease: [String] = []
        if let dash = body.firstIndex(of: "-") {
            let tail = body[body.index(after: dash)...]
            let identifiers = tail.split(separator: ".", omittingEmptySubsequences: false)
            guard !tail.isEmpty, identifiers.allSatisfy(Self.isIdentifier) else { return nil }
            prerelease = identifiers.map(String.init)
            body = body[..<dash]
        }
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 6 else { return nil }
        var components: [Int] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 9, part.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(part) else { return nil }
            components.append(value)
        }
        self.components = components
        self.prerelease = prerelease
    }

    package var description: String {
        components.map(String.init).joined(separator: ".") + (prerelease.isEmpty ? "" : "-" + prerelease.joined(separator: "."))
    }

    package static func < (a: SemanticVersion, b: SemanticVersion) -> Bool { compare(a, b) < 0 }

    package static func == (a: SemanticVersion, b: SemanticVersion) -> Bool { compare(a, b) == 0 }

    package func hash(into hasher: inout Hasher) {
        var trimmed = components[...]
        while let last = trimmed.last, last == 0, trimmed.count > 1 { trimmed = trimmed.dropLast() }
        hasher.combine(Array(trimmed))
        hasher.combine(prerelease)
    }

    static func compare(_ a: SemanticVersion, _ b: SemanticVersion) -> Int {
        for i in 0..<max(a.components.count, b.components.count) {
            let x = i < a.components.count ? a.components[i] : 0
            let y = i < b.components.count ? b.components[i] : 0
            if x != y { return x < y ? -1 : 1 }
        }
        switch (a.prerelease.isEmpty, b.prerelease.isEmpty) {
        case (true, true): return 0
        case (true, false): return 1
        case (false, true): return -1
        case (false, false): break
        }
        for (x, y) in zip(a.prerelease, b.prerelease) where x != y {
            switch (numeric(x), numeric(y)) {
            case let (p?, q?): if p != q { return p < q ? -1 : 1 }
            case (_?, nil): return -1
            case (nil, _?): return 1
            case (nil, nil): return x < y ? -1 : 1
            }
        }
        return a.prerelease.count == b.prerelease.count ? 0 : (a.prerelease.count < b.prerelease.count ? -1 : 1)
    }

    private static func numeric(_ s: String) -> Int? {
        s.allSatisfy({ $0.isASCII && $0.isNumber }) ? Int(s) : nil
    }

    private static func isIdentifier(_ s: Substring) -> Bool {
        !s.isEmpty && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
    }
}
