import Foundation
import Synchronization
import Testing

@testable import ServiceRuntime

@Suite("Page cursor text, deadline waits and entity tags")
struct SharedHelpersTests {
    @Test func aCursorGivesBackItsPayloadAndNothingElseIsACursor() {
        let cursor = PageCursorText.encode(version: "c1", "site_42:ü")
        #expect(!cursor.contains("=") && !cursor.contains("+") && !cursor.contains("/"))
        #expect(PageCursorText.decode(cursor, version: "c1", maxLength: 400) == "site_42:ü")
        // Another version, an edit, an empty payload, a control character, too long, not base64url.
        #expect(PageCursorText.decode(cursor, version: "s1", maxLength: 400) == nil)
        #expect(PageCursorText.decode("x" + cursor, version: "c1", maxLength: 400) == nil)
        #expect(PageCursorText.decode(PageCursorText.encode(version: "c1", ""), version: "c1", maxLength: 400) == nil)
        #expect(PageCursorText.decode(PageCursorText.encode(version: "c1", "a\u{0}b"), version: "c1", maxLength: 400) == nil)
        #expect(PageCursorText.decode(cursor, version: "c1", maxLength: cursor.count - 1) == nil)
        #expect(PageCursorText.decode("", version: "c1", maxLength: 400) == nil)
        #expect(PageCursorText.decode("%%%", version: "c1", maxLength: 400) == nil)
    }

    @Test func anEntityTagIsStableQuotedAndMatchedWeaklyInAnyListMember() {
        let tag = Reply.entityTag(of: Data(#"{"a":1}"#.utf8))
        #expect(tag == Reply.entityTag(of: Data(#"{"a":1}"#.utf8)) && tag != Reply.entityTag(of: Data(#"{"a":2}"#.utf8)))
        #expect(tag.count == 34 && tag.first == "\"" && tag.last == "\"")
        for field in [tag, "W/\(tag)", "\"x\",\(tag)", "  \"x\" , W/\(tag)  ", "*"] {
            #expect(Reply.ifNoneMatch(field, matches: tag), "\(field)")
        }
        for field in ["", ",", "\"x\"", String(tag.dropLast()), "w/\(tag)", "\(tag)x", "**"] {
            #expect(!Reply.ifNoneMatch(field, matches: tag), "\(field)")
        }
    }

    @Test func pollAnswersTrueOnceTheConditionHoldsAndFalseAtTheDeadline() async throws {
        let checks = Mutex(0)
        // The deadline is far: on two busy cores a 5 ms sleep can resume seconds late while other
        // suites hold the cooperative pool, and this case is about stopping once the condition holds.
        let met = await poll(every: .milliseconds(5), timeout: .seconds(300)) {
            checks.withLock {
                $0 += 1; return $0 >= 3
            }
        }
        #expect(met && checks.withLock { $0 } == 3)

        let started = ContinuousClock.now
        #expect(await poll(every: .milliseconds(10), timeout: .milliseconds(100)) { false } == false)
        #expect(ContinuousClock.now - started >= .milliseconds(100))

        struct Failure: Error {}
        await #expect(throws: Failure.self) { _ = try await poll(timeout: .seconds(1)) { throw Failure() } }
    }

    @Test func pollStopsWhenItsTaskIsCancelled() async {
        let task = Task { await poll(every: .milliseconds(10), timeout: .seconds(60)) { false } }
        try? await Task.sleep(for: .milliseconds(50))
        task.cancel()
        #expect(await task.value == false)
    }
}
