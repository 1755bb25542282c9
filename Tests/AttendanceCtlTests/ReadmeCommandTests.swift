import ArgumentParser
import AttendanceCtlCommands
import AttendanceProtocol
import Foundation
import LocalStackTesting
import Testing

/// The README shows commands people copy: every `attendancectl` command line in it must parse
/// (subcommands, options, flags as written), every `make` target must exist and every link to a file
/// in the repository must resolve. Keeps the README true as the code moves.
@Suite("README commands")
struct ReadmeCommandTests {
    static let readme: String = (try? String(contentsOf: LocalStack.root.appendingPathComponent("README.md"), encoding: .utf8)) ?? ""

    /// Lines inside ``` fences, with `\` continuations joined and trailing `# comments` removed.
    static var codeLines: [String] {
        var lines: [String] = []
        var inFence = false
        var pending = ""
        for raw in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            if line.hasPrefix("```") { inFence.toggle(); pending = ""; continue }
            guard inFence else { continue }
            if line.hasSuffix("\\") { pending += line.dropLast() + " "; continue }
            var full = pending + line
            pending = ""
            if let comment = full.range(of: "  #") ?? full.range(of: "\t#") { full = String(full[..<comment.lowerBound]) }
            lines.append(full)
        }
        return lines
    }

    /// Splits like a shell would for these simple lines: spaces, double and single quotes.
    static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == " " {
                if !current.isEmpty { words.append(current); current = "" }
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { words.append(current) }
        return words
    }

    /// The arguments after `attendancectl` up to a shell operator.
    static func arguments(after text: Substring) -> [String] {
        var result: [String] = []
        for word in words(String(text)) {
            if ["|", "&&", ";", ">", "2>&1", "||"].contains(word) { break }
            result.append(word)
        }
        return result
    }

    @Test func everyAttendancectlLineInACodeBlockParses() throws {
        var checked = 0
        for line in Self.codeLines {
            guard let range = line.range(of: "attendancectl ") else { continue }
            let arguments = Self.arguments(after: line[range.upperBound...])
            do {
                _ = try AttendanceCtl.parseAsRoot(arguments)
            } catch {
                Issue.record(
                    "README line does not parse: attendancectl \(arguments.joined(separator: " ")): \(AttendanceCtl.fullMessage(for: error))"
                )
            }
            checked += 1
        }
        #expect(checked >= 6, "found only \(checked) attendancectl lines in the README's code blocks")
    }

    @Test func everyAttendancectlCommandNamedInTheTextExists() throws {
        let pattern = try Regex("`(?:swift run )?attendancectl ([^`<]*)`")
        var checked = 0
        for match in Self.readme.matches(of: pattern) {
            guard let captured = match.output[1].substring else { continue }
            // The command path and its options as written, asking for help: parses the path and the
            // option names; an option named without its value (`--partitions`) is fine.
            let arguments = Self.arguments(after: captured)
            #expect(Self.commandPathExists(arguments), "README names `attendancectl \(captured)`: no such command")
            do {
                _ = try AttendanceCtl.parseAsRoot(arguments + ["--help"])
            } catch {
                let message = AttendanceCtl.fullMessage(for: error)
                #expect(
                    AttendanceCtl.exitCode(for: error) == .success || message.contains("Missing value for"),
                    "README names `attendancectl \(captured)`, which does not parse: \(message)")
            }
            checked += 1
        }
        #expect(checked >= 5)
    }

    /// The leading words name a command: each a subcommand of the one before, down to a leaf (whose
    /// remaining words are its arguments). `--help` alone would not tell: it wins over a wrong word.
    static func commandPathExists(_ arguments: [String]) -> Bool {
        var command: any ParsableCommand.Type = AttendanceCtl.self
        for word in arguments.prefix(while: { !$0.hasPrefix("-") }) {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { return true }
            guard let next = subcommands.first(where: { $0._commandName == word || $0.configuration.aliases.contains(word) }) else {
                return false
            }
            command = next
        }
        return true
    }

    @Test func everyMakeTargetExistsAndEveryLinkedFileIsThere() throws {
        try #require(!Self.readme.isEmpty, "README.md could not be read")
        let makefile = try String(contentsOf: LocalStack.root.appendingPathComponent("Makefile"), encoding: .utf8)
        let targets = Set(
            makefile.split(separator: "\n").compactMap { line -> String? in
                guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("\t"), !line.hasPrefix(".") else { return nil }
                return String(line[..<colon])
            })
        for match in Self.readme.matches(of: try Regex("`make ([a-z-]+)")) {
            let target = String(match.output[1].substring ?? "")
            #expect(targets.contains(target), "README names `make \(target)`, which the Makefile does not have")
        }
        for match in Self.readme.matches(of: try Regex("\\]\\(([^)#: ]+)(#[^)]*)?\\)")) {
            let path = String(match.output[1].substring ?? "")
            #expect(
                FileManager.default.fileExists(atPath: LocalStack.root.appendingPathComponent(path).path),
                "README links to \(path), which does not exist")
        }
    }
}
